"""The MLflow store in a process of its own (driver side: a proxy; the store's side: a loop).

Every write to MLflow's SQLite store is SQLAlchemy work in Python, several writes per trial
of a sweep (creating its run, its params, tags, a batch of metrics per epoch, ending it). On the
driver that work shares one interpreter lock with Ray Tune's event loop and the sampler, so
in large sweeps of short trials it takes a large share of the driver's time. :class:`StoreProcess`
runs an :class:`~ludwig_hpo.tracking.mlflow_store.MlflowStore` in a child process instead: each call is
pickled through a pipe and the caller waits for its answer, which releases the lock, and the
store's work runs on another core. Calls keep their order (one pipe, one store), so the
child is the store's only writer, as the driver is without it.

The child ignores Ctrl-C and SIGTERM, which reach the whole process group (``timeout``, a
terminal, a batch scheduler): the driver marks the runs KILLED after them. It ends when
:meth:`StoreProcess.close` is called, when the driver exits, or when its pipe closes (the
driver was killed).

Each call carries a number that its answer repeats: a caller interrupted while it waited
(Ctrl-C) leaves an answer in the pipe, which the next call skips instead of taking it as its own.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import pickle
import threading
import time
import traceback
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from ludwig_hpo.errors import TrackingError
from ludwig_hpo.tracking.protocol import Tracker
from ludwig_hpo.train.report_keys import OBJECTIVE

#: Seconds :meth:`StoreProcess.close` waits for the child to end after its last call.
CLOSE_TIMEOUT_S = 30.0
#: File name of the database a pending store makes ahead, in a temporary folder.
AHEAD_DB_NAME = "mlflow.db"


def _serve(conn, uri: str | None, experiment: str | None, artifact_location: Path | None) -> None:
    """The child's loop: build the store, then answer ``(number, method, args, kwargs)`` calls
    with ``(number, "ok", result)`` or ``(number, "error", exception, traceback text)`` until a
    call without a method (answered, then the loop ends) or the pipe's end. ``uri`` None (a
    :class:`PendingStore`): MLflow is imported first, then the store's ``(uri, experiment,
    artifact_location)`` is read from the pipe."""
    import signal

    # Ctrl-C and SIGTERM reach the whole process group: the driver decides what is written
    # after them (the runs marked KILLED), so the store must outlive them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from ludwig_hpo.tracking.mlflow_store import MlflowStore

    if uri is None:
        ahead = _empty_store_ahead()
        try:
            uri, experiment, artifact_location = conn.recv()
        except (EOFError, OSError):  # the driver stopped before it needed a store
            _drop_ahead(ahead)
            return
        _use_ahead(ahead, uri)
    assert uri is not None and experiment is not None
    try:
        store = MlflowStore(uri, experiment, artifact_location)
    except BaseException as e:  # noqa: BLE001 - sent to the driver, which raises it
        _reply(conn, 0, error=e)
        return
    if not _reply(conn, 0, result=(store.uri, store.experiment_id)):
        return
    while True:
        try:
            number, name, args, kwargs = conn.recv()
        except (EOFError, OSError):  # the driver is gone
            return
        if name is None:
            _reply(conn, number, result=None)
            return
        try:
            result = getattr(store, name)(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001
            if not _reply(conn, number, error=e):
                return
            continue
        if not _reply(conn, number, result=result):
            return


def _empty_store_ahead() -> Path | None:
    """A new embedded store's database, its tables created (most of a new store's start),
    in a temporary folder, made while the driver prepares the data; None if it could not be
    made. Store process, before its store is known."""
    import shutil
    import tempfile

    from mlflow.tracking import MlflowClient

    from ludwig_hpo.tracking.mlflow_store import quiet_mlflow_logs, sqlalchemy_engine

    quiet_mlflow_logs()
    folder = Path(tempfile.mkdtemp(prefix="hpo-mlflow-"))
    db = folder / AHEAD_DB_NAME
    try:
        client = MlflowClient(tracking_uri=f"sqlite:///{db}")  # MlflowStore's own path: the same Default experiment
        client.search_experiments(max_results=1)
        engine = sqlalchemy_engine(client)
        if engine is not None:
            engine.dispose()  # no connection left on the file once it moves
    except Exception:  # noqa: BLE001 - the store then creates its tables itself
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return db


def _use_ahead(ahead: Path | None, uri: str) -> None:
    """Publish the database made ahead at a new embedded store's place: a ``sqlite:///`` path
    (no query, not ``:memory:``) in an existing folder where no file or link is yet. It is
    hard-linked there, which fails rather than replace a database another process created
    meanwhile (across file systems, through a copy beside the target first, so no partial file
    is ever at the target). Any other store, or any failure, leaves it unused: the store then
    creates its tables itself. Either way its temporary folder is removed."""
    import os
    import shutil

    if ahead is None:
        return
    try:
        path = uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else ""
        if not path or "?" in path or path == ":memory:":
            return
        target = Path(path)
        if not target.parent.is_dir() or target.exists() or target.is_symlink():
            return
        try:
            os.link(ahead, target)
        except OSError:  # another file system (or no hard links there)
            beside = target.parent / f".{target.name}.{os.getpid()}.ahead"
            try:
                shutil.copyfile(ahead, beside)
                os.link(beside, target)
            finally:
                beside.unlink(missing_ok=True)
    except (OSError, ValueError):  # e.g. a folder we may not read, a target created meanwhile
        pass
    finally:
        _drop_ahead(ahead)


def _drop_ahead(ahead: Path | None) -> None:
    import shutil

    if ahead is not None:
        shutil.rmtree(ahead.parent, ignore_errors=True)


def _reply(conn, number: int, *, result: Any = None, error: BaseException | None = None) -> bool:
    """Send an answer; an error the driver could not rebuild (it does not pickle, or its
    class's constructor refuses its own ``args``) goes as a :class:`TrackingError` of its
    type and message. Returns False when the driver is gone."""
    data = None
    if error is None:
        try:
            data = ForkingPickler.dumps((number, "ok", result))
        except Exception as e:  # noqa: BLE001 - the result does not pickle
            error = TrackingError(f"an answer of the MLflow store does not pickle: {type(e).__name__}: {e}")
    if data is None:
        text = "".join(traceback.format_exception(error))
        try:
            data = ForkingPickler.dumps((number, "error", error, text))
            pickle.loads(data)  # what the driver will do with it
        except Exception:  # noqa: BLE001
            message = (str(error).splitlines() or [""])[0][:300]
            data = ForkingPickler.dumps(
                (number, "error", TrackingError(f"the MLflow store failed: {type(error).__name__}: {message}"), text)
            )
    try:
        conn.send_bytes(data)
    except OSError:
        return False
    return True


class PendingStore:
    """A store process started before the driver knows its store: the child imports MLflow
    (~2 s, ~230 MB) and makes an embedded store's database with its tables in a temporary
    folder (moved to the store's place if that is a new embedded store, else removed) while
    the driver prepares the data, and :class:`StoreProcess` adopts it
    (``pending=``) once the output folder, hence the store's place, exists. Driver only.
    :meth:`close` ends a child nobody adopted (the sweep stopped on an error before)."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # the driver has threads (Ray, torch): no fork
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, None, None, None), name="hpo-mlflow-store", daemon=True)
        self.proc.start()
        child.close()
        self.adopted = False

    def close(self) -> None:
        """End the child unless a :class:`StoreProcess` adopted it; safe to call twice."""
        if self.adopted or self.conn.closed:
            return
        self.conn.close()  # the child ends at its pipe's end
        self.proc.join(CLOSE_TIMEOUT_S)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


class StoreProcess(Tracker):
    """An :class:`~ludwig_hpo.tracking.mlflow_store.MlflowStore` (same methods, same arguments) whose calls
    run in a child process: the :class:`~ludwig_hpo.tracking.protocol.Tracker` out of the
    driver's interpreter. Driver only; calls from several threads are served one at a time.

    Args:
        uri, experiment, artifact_location: as for :class:`~ludwig_hpo.tracking.mlflow_store.MlflowStore`.
        pending: a child started ahead (:class:`PendingStore`) to use instead of a new one
            (a new one when it has ended).

    Raises:
        TrackingError: the store cannot be reached or written (at construction, as the
            in-process store), or the child process died (at a call).
    """

    def __init__(
        self, uri: str, experiment: str, artifact_location: Path | None = None, *, pending: PendingStore | None = None
    ) -> None:
        if pending is not None and not pending.adopted and not pending.conn.closed and pending.proc.is_alive():
            self._conn, self._proc = pending.conn, pending.proc
            pending.adopted = True
            try:
                self._conn.send((uri, experiment, artifact_location))
            except OSError:  # the child ended meanwhile: its answer below says so
                pass
        else:
            ctx = multiprocessing.get_context("spawn")  # the driver has threads (Ray, torch): no fork
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(
                target=_serve, args=(child, uri, experiment, artifact_location), name="hpo-mlflow-store", daemon=True
            )
            self._proc.start()
            child.close()
        self._lock = threading.Lock()
        self._number = 0  # of the last call; the store's construction is 0
        self._broken = False  # a wait interrupted inside an answer: the pipe is out of step
        try:
            self.uri: str
            self.experiment_id: str
            self.uri, self.experiment_id = self._answer(0)
        except BaseException:
            self._conn.close()  # the child ends at its pipe's end
            self._proc.join(CLOSE_TIMEOUT_S)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
            raise
        # before multiprocessing's own exit handler, which would wait for a child that ignores SIGTERM
        atexit.register(self.close)

    def _ended(self) -> TrackingError:
        return TrackingError(
            f"the MLflow store's process ended (exit code {self._proc.exitcode})",
            fix="run again with --debug to see why",
        )

    def _answer(self, number: int) -> Any:
        """The answer to call ``number`` (answers to earlier calls, whose callers were
        interrupted, are skipped): its result, or its error raised."""
        while True:
            self._conn.poll(None)  # an interruption while waiting leaves the pipe in step
            try:
                data = self._conn.recv_bytes()
            except (EOFError, OSError):
                raise self._ended() from None
            except BaseException:
                self._broken = True
                raise
            try:
                reply = pickle.loads(data)
            except Exception as e:  # noqa: BLE001 - a class this process cannot rebuild
                raise TrackingError(f"an answer of the MLflow store cannot be read: {type(e).__name__}: {e}") from None
            if reply[0] == number:
                break
        if reply[1] == "ok":
            return reply[2]
        error, text = reply[2], reply[3]
        if hasattr(error, "add_note"):  # Python >= 3.11: shown with --debug
            error.add_note(f"in the MLflow store's process:\n{text}")
        raise error

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._broken:
                raise TrackingError(
                    "the MLflow store's answers are out of step after an interruption",
                    fix="resume the sweep (hpo resume)",
                )
            self._number += 1
            try:
                self._conn.send((self._number, name, args, kwargs))
            except OSError:
                raise self._ended() from None
            return self._answer(self._number)

    # ------------------------------------------------ the store's methods, as calls to the child
    def start_run(
        self,
        name: str,
        *,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> str:
        """As :meth:`MlflowStore.start_run <ludwig_hpo.tracking.mlflow_store.MlflowStore.start_run>`."""
        return self._call("start_run", name, parent_id=parent_id, tags=tags, params=params)

    def reopen_run(self, run_id: str) -> None:
        """As :meth:`MlflowStore.reopen_run <ludwig_hpo.tracking.mlflow_store.MlflowStore.reopen_run>`."""
        self._call("reopen_run", run_id)

    def clear_tags(self, run_id: str, keys: tuple[str, ...]) -> None:
        """As :meth:`MlflowStore.clear_tags <ludwig_hpo.tracking.mlflow_store.MlflowStore.clear_tags>`."""
        self._call("clear_tags", run_id, keys)

    def end_run(self, run_id: str, status: str) -> None:
        """As :meth:`MlflowStore.end_run <ludwig_hpo.tracking.mlflow_store.MlflowStore.end_run>`."""
        self._call("end_run", run_id, status)

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        """As :meth:`MlflowStore.log_params <ludwig_hpo.tracking.mlflow_store.MlflowStore.log_params>`."""
        self._call("log_params", run_id, params)

    def log_metrics(self, run_id: str, metrics: dict[str, Any], step: int) -> None:
        """As :meth:`MlflowStore.log_metrics <ludwig_hpo.tracking.mlflow_store.MlflowStore.log_metrics>`."""
        self._call("log_metrics", run_id, metrics, step)

    def log_batch(
        self, run_id: str, *, params: dict[str, Any], tags: dict[str, Any], metrics: dict[str, Any], step: int
    ) -> None:
        """As :meth:`MlflowStore.log_batch <ludwig_hpo.tracking.mlflow_store.MlflowStore.log_batch>`."""
        self._call("log_batch", run_id, params=params, tags=tags, metrics=metrics, step=step)

    def log_steps(
        self, run_id: str, *, params: dict[str, Any], tags: dict[str, Any], metrics: list[tuple[str, Any, int, int]]
    ) -> None:
        """As :meth:`MlflowStore.log_steps <ludwig_hpo.tracking.mlflow_store.MlflowStore.log_steps>`."""
        self._call("log_steps", run_id, params=params, tags=tags, metrics=metrics)

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        """As :meth:`MlflowStore.set_tags <ludwig_hpo.tracking.mlflow_store.MlflowStore.set_tags>`."""
        self._call("set_tags", run_id, tags)

    def log_text(self, run_id: str, text: str, file_name: str) -> None:
        """As :meth:`MlflowStore.log_text <ludwig_hpo.tracking.mlflow_store.MlflowStore.log_text>`."""
        self._call("log_text", run_id, text, file_name)

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        """As :meth:`MlflowStore.log_artifact <ludwig_hpo.tracking.mlflow_store.MlflowStore.log_artifact>`
        (``path`` is read by the child: the same machine, the same disk)."""
        self._call("log_artifact", run_id, path, artifact_path)

    def log_model(self, run_id: str, name: str, path: Path) -> str:
        """As :meth:`MlflowStore.log_model <ludwig_hpo.tracking.mlflow_store.MlflowStore.log_model>`
        (``path`` is on the driver's disk, which the store's process shares)."""
        return self._call("log_model", run_id, name, path)

    def register_model_version(self, name: str, run_id: str, artifact_path: str, model_id: str | None = None) -> str:
        """As :meth:`MlflowStore.register_model_version
        <ludwig_hpo.tracking.mlflow_store.MlflowStore.register_model_version>`."""
        return self._call("register_model_version", name, run_id, artifact_path, model_id)

    def children_by_tag(self, parent_id: str, tag: str, *, status: str | None = None) -> dict[str, str]:
        """As :meth:`MlflowStore.children_by_tag <ludwig_hpo.tracking.mlflow_store.MlflowStore.children_by_tag>`."""
        return self._call("children_by_tag", parent_id, tag, status=status)

    def last_step(self, run_id: str, metric: str = OBJECTIVE) -> int:
        """As :meth:`MlflowStore.last_step <ludwig_hpo.tracking.mlflow_store.MlflowStore.last_step>`."""
        return self._call("last_step", run_id, metric)

    def step_history(self, run_id: str) -> dict[str, dict[int, float]]:
        """As :meth:`MlflowStore.step_history <ludwig_hpo.tracking.mlflow_store.MlflowStore.step_history>`."""
        return self._call("step_history", run_id)

    def close_running_children(self, parent_id: str, tags: dict[str, Any]) -> list[str]:
        """As :meth:`MlflowStore.close_running_children
        <ludwig_hpo.tracking.mlflow_store.MlflowStore.close_running_children>`."""
        return self._call("close_running_children", parent_id, tags)

    def close(self) -> None:
        """End the child after the calls made so far (waits up to :data:`CLOSE_TIMEOUT_S`);
        answers nobody waits for any more are read and dropped. Safe to call twice."""
        atexit.unregister(self.close)
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        try:
            if self._proc.is_alive() and not self._conn.closed:
                with self._lock, contextlib.suppress(OSError, EOFError):
                    if not self._broken:
                        self._number += 1
                        self._conn.send((self._number, None, (), {}))
                        # until the child's end: a large unread answer would block its last send
                        while self._conn.poll(max(0.0, deadline - time.monotonic())):
                            self._conn.recv_bytes()
        finally:
            self._conn.close()  # the child ends at its pipe's end, if it is still waiting
            self._proc.join(max(0.0, deadline - time.monotonic()))
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
