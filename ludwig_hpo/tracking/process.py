"""The MLflow store in a process of its own (driver side: a proxy; the store's side: a loop).

Every write to MLflow's SQLite store is SQLAlchemy work in Python: ~25 ms of CPU per trial
of a sweep (creating its run, its params, tags, a batch of metrics per epoch, ending it). On the
driver that work shares one interpreter lock with Ray Tune's event loop and the sampler, so
large sweeps of short trials spend a third of the driver's time on it. :class:`StoreProcess`
runs an :class:`~ludwig_hpo.tracking.MlflowStore` in a child process instead: each call is
pickled through a pipe and the caller waits for its answer, which releases the lock, and the
store's work runs on another core. Calls keep their order (one pipe, one store), so the
child is the store's only writer, as the driver is without it.

The child ignores Ctrl-C (the driver marks the runs KILLED after it) and ends when :meth:`StoreProcess.close` is called, when the driver exits, or when
its pipe closes (the driver was killed).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import traceback
from pathlib import Path
from typing import Any

from ludwig_hpo.errors import TrackingError

#: Seconds :meth:`StoreProcess.close` waits for the child to end after its last call.
CLOSE_TIMEOUT_S = 30.0


def _serve(conn, uri: str, experiment: str, artifact_location: Path | None) -> None:
    """The child's loop: build the store, then answer ``(method, args, kwargs)`` calls with
    ``("ok", result)`` or ``("error", exception, traceback text)`` until ``None`` or EOF."""
    import signal

    from ludwig_hpo.tracking.mlflow_store import MlflowStore

    # Ctrl-C reaches the whole process group: the driver decides what is written after it
    # (the runs marked KILLED), so the store must outlive it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        store = MlflowStore(uri, experiment, artifact_location)
    except BaseException as e:  # noqa: BLE001 - sent to the driver, which raises it
        _send_error(conn, e)
        return
    conn.send(("ok", (store.uri, store.experiment_id)))
    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError):  # the driver is gone
            return
        if call is None:
            conn.send(("ok", None))
            return
        name, args, kwargs = call
        try:
            result = getattr(store, name)(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001
            _send_error(conn, e)
            continue
        conn.send(("ok", result))


def _send_error(conn, error: BaseException) -> None:
    text = "".join(traceback.format_exception(error))
    try:
        conn.send(("error", error, text))
    except Exception:  # noqa: BLE001 - an exception that does not pickle
        conn.send(("error", TrackingError(f"{type(error).__name__}: {error}"), text))


class StoreProcess:
    """An :class:`~ludwig_hpo.tracking.MlflowStore` (same methods, same arguments) whose calls
    run in a child process. Driver only; calls from several threads are served one at a time.

    Args:
        uri, experiment, artifact_location: as for :class:`~ludwig_hpo.tracking.MlflowStore`.

    Raises:
        TrackingError: the store cannot be reached or written (at construction, as the
            in-process store), or the child process died (at a call).
    """

    def __init__(self, uri: str, experiment: str, artifact_location: Path | None = None) -> None:
        from ludwig_hpo.tracking.mlflow_store import MlflowStore

        self._methods = {n for n in dir(MlflowStore) if not n.startswith("_")}
        ctx = multiprocessing.get_context("spawn")  # the driver has threads (Ray, torch): no fork
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, uri, experiment, artifact_location),
                                 name="hpo-mlflow-store", daemon=True)
        self._proc.start()
        child.close()
        self._lock = threading.Lock()
        self._unanswered = 1  # the store's construction
        try:
            self.uri, self.experiment_id = self._answer()
        except BaseException:
            self._conn.close()  # the child ends at its pipe's end
            self._proc.join(CLOSE_TIMEOUT_S)
            raise

    def _ended(self) -> TrackingError:
        return TrackingError(f"the MLflow store's process ended (exit code {self._proc.exitcode})",
                             fix="run again with --debug to see why")

    def _answer(self) -> Any:
        """The next answer: the result of the oldest call not yet answered, or its error raised."""
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            self._unanswered = 0
            raise self._ended() from None
        self._unanswered -= 1
        if reply[0] == "ok":
            return reply[1]
        error, text = reply[1], reply[2]
        if hasattr(error, "add_note"):  # Python >= 3.11: shown with --debug
            error.add_note(f"in the MLflow store's process:\n{text}")
        raise error

    def _call(self, name: str, *args, **kwargs) -> Any:
        with self._lock:
            while self._unanswered:  # a caller interrupted (Ctrl-C) while it waited
                with contextlib.suppress(Exception):
                    self._answer()
            try:
                self._conn.send((name, args, kwargs))
            except OSError:
                raise self._ended() from None
            self._unanswered += 1
            return self._answer()

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(name)
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    def close(self) -> None:
        """End the child after the calls made so far (waits up to :data:`CLOSE_TIMEOUT_S`)."""
        if self._proc.is_alive():
            with self._lock, contextlib.suppress(OSError):
                self._conn.send(None)  # the child answers it after the calls before it
        self._proc.join(CLOSE_TIMEOUT_S)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._conn.close()
