"""Tracking writes off the caller's thread, in order (driver only).

The sweep monitor runs on Ray Tune's event loop: while it waits for a write to the tracking
store (a SQLite transaction, an HTTP request) no trial is scheduled and no result is
processed. :class:`OrderedWriter` runs the writes on one background thread instead, in the
order they were submitted, so a run is always created before anything is logged to it and
ended after everything else.

MLflow's own asynchronous logging (``log_batch(..., synchronous=False)``) covers only metrics,
parameters and tags: creating and ending a run stay synchronous, and ending any run
(``set_terminated``) first drains the whole store's queue, so with several trials at a time
nearly every write would still be waited for on the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class OrderedWriter:
    """One background thread that runs submitted calls one at a time, in submission order.

    The first call that raises stops nothing by itself (later calls still run, and a call
    that needs a failed call's result raises too); the error is raised again, on the
    caller's thread, by the next :meth:`submit`, :meth:`call` or :meth:`flush`, so a broken
    store still fails the sweep, one event later than a synchronous write would.

    Args:
        name: the thread's name (shown in stack dumps).
    """

    def __init__(self, name: str = "tracking-writer") -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._last: Future | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    def _raise_pending(self) -> None:
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except BaseException as e:
            with self._lock:
                if self._error is None:
                    self._error = e
            raise

    def submit(self, fn: Callable[[], T]) -> Future:
        """Queue ``fn()`` after every earlier call; returns its future (its result or error).

        Raises:
            Exception: the error of an earlier call that failed (raised once).
        """
        self._raise_pending()
        self._last = self._pool.submit(self._run, fn)
        return self._last

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` after every earlier call and wait for its result (a read that must
        see every earlier write).

        Raises:
            Exception: ``fn``'s error, or an earlier call's.
        """
        future = self.submit(fn)
        try:
            result = future.result()
        except BaseException as e:
            with self._lock:
                if self._error is e:  # raised here, not again by the next call
                    self._error = None
            raise
        self._raise_pending()
        return result

    def flush(self, until: Future | None = None) -> None:
        """Wait until every submitted call has run, or with ``until`` (a future :meth:`submit`
        returned) until that call and every earlier one have run.

        Raises:
            Exception: the first error of a call since the last one raised.
        """
        last = self._last if until is None else until
        if last is not None:
            # waits without raising the call's own error (reported through _error, the first
            # one, which may be earlier); a KeyboardInterrupt while waiting goes through
            last.exception()
        self._raise_pending()

    def close(self) -> None:
        """:meth:`flush`, then stop the thread (later submissions are refused)."""
        try:
            self.flush()
        finally:
            self._pool.shutdown(wait=True)
