"""A sweep's private local Ray cluster, started in a thread of the driver while its main
thread reads and prepares the data, checks the model and creates the output folder and the
MLflow store: Ray's start (GCS, raylet, agents: ~3 s of waiting on processes) overlaps that
work instead of following it.

An error of the main thread (bad data, a model that cannot be built, Ctrl-C) stops the
cluster before it is reported: :meth:`ClusterStart.stop` lets the start end (a ``ray.init``
cannot be cut short), then shuts the cluster down and removes its temp folder, so nothing
of it is left. Driver process only.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ludwig_hpo.execution.cluster import local_cluster
from ludwig_hpo.execution.resources import ResourcePlan

#: The logger of ``ray.init``'s note that a start outside the main thread sets no SIGTERM
#: handler: the sweep keeps its own handler on purpose (see ``cluster.local_cluster``).
_RAY_WORKER_LOGGER = "ray._private.worker"


def _sigterm_action() -> Callable[[], None]:
    """The process's current SIGTERM action, as a function that puts it back. ``ray.init``
    makes the driver's core worker install a failure handler for SIGTERM (it aborts the
    process); started from the main thread, the handler the sweep had was set again after
    it, which a thread cannot do with :func:`signal.signal`. The action is copied as opaque
    bytes with libc's ``sigaction`` (any thread may call it); where libc cannot be loaded,
    the returned function does nothing (:meth:`ClusterStart.wait` sets the handler again)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        saved = ctypes.create_string_buffer(1024)  # larger than any libc's struct sigaction
        if libc.sigaction(signal.SIGTERM, None, saved) != 0:
            return lambda: None
    except (OSError, AttributeError):
        return lambda: None
    return lambda: libc.sigaction(signal.SIGTERM, saved, None)


class _NoSigtermNote(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


class ClusterStart:
    """Runs the context manager ``cluster`` (e.g. :func:`.cluster.local_cluster`) in a thread
    of its own from :meth:`begin` (or entering ``with``) until :meth:`stop` (or leaving
    ``with``); :meth:`wait` blocks until it has started, raising its error. Every method runs
    in the driver's main thread.

    The thread that starts the cluster lives as long as it: Ray sets its daemons'
    parent-death signal, which Linux sends when the *thread* that started them ends, so a
    thread that ended after the start would take the cluster with it. The cluster stops in
    the main thread, as a cluster started there would.

    Args:
        cluster: the cluster's context manager, not yet entered.

    Attributes:
        log_file: where Ray's messages go once the output folder exists (the sweep's
            ``ray.log``); the cluster reads it through a callable (``lambda: start.log_file``).
    """

    def __init__(self, cluster: AbstractContextManager[Any]) -> None:
        self._cluster = cluster
        self._thread: threading.Thread | None = None
        self._started = threading.Event()  # the start ended, started or failed
        self._release = threading.Event()  # stop the cluster
        self._error: BaseException | None = None
        self._entered = False
        self.log_file: Path | None = None

    def begin(self) -> None:
        """Start the cluster in its thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._hold, name="hpo-ray-cluster", daemon=True)
            self._thread.start()

    def _hold(self) -> None:
        note = _NoSigtermNote()
        logging.getLogger(_RAY_WORKER_LOGGER).addFilter(note)
        restore_sigterm = _sigterm_action()
        try:
            self._cluster.__enter__()
            self._entered = True
        except BaseException as e:  # handed to the main thread by wait()
            self._error = e
        finally:
            restore_sigterm()  # the sweep's own SIGTERM handler, not Ray's abort
            logging.getLogger(_RAY_WORKER_LOGGER).removeFilter(note)
            self._started.set()
        self._release.wait()  # alive while the cluster runs: its daemons die with this thread

    def wait(self) -> None:
        """Block until the cluster has started.

        Raises:
            BaseException: the start's own error (e.g. ``ValueError`` for fractional CPUs,
                Ray's error when its processes cannot start).
        """
        self.begin()
        self._started.wait()
        if threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGTERM)
            if handler is not None:  # Python's own handler again, over any Ray installed
                signal.signal(signal.SIGTERM, handler)
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def stop(self) -> None:
        """Stop the cluster (once its start has ended) and remove what it left, here in the
        main thread as Ray's driver state expects, then let the start's thread end;
        idempotent. A start that failed has nothing to stop."""
        if self._thread is None:
            return
        self._started.wait()
        try:
            if self._entered:
                self._entered = False
                self._cluster.__exit__(None, None, None)
        finally:
            self._release.set()
            self._thread.join()

    def __enter__(self) -> ClusterStart:
        self.begin()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_cluster(plan: ResourcePlan, *, train_jobs: bool) -> ClusterStart:
    """Begin starting the local cluster of ``plan`` (its CPUs, GPUs and trial slots) in the
    background; Ray's messages go to the returned start's :attr:`~ClusterStart.log_file` once
    it is set. ``train_jobs``: trials run as Ray Train jobs (see :func:`.cluster.local_cluster`).
    Driver only; use it as a context manager, or call :meth:`~ClusterStart.stop`."""
    start = ClusterStart(
        local_cluster(
            num_cpus=plan.cluster_cpus,
            num_gpus=int(plan.cluster_gpus),
            trial_slots=plan.max_concurrent,
            log_file=lambda: start.log_file,  # read at each message, once set
            train_jobs=train_jobs,
        )
    )
    start.begin()
    return start
