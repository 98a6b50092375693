"""The MLflow store in its own process: calls keep their order and results, errors come back
as the store's own, and the process ends with the driver's close, its death is an error and
not a hang. Real MLflow (an SQLite file), no Ray."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ludwig_hpo.errors import TrackingError
from ludwig_hpo.tracking.process import StoreProcess, _reply

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def store(tmp_path):
    s = StoreProcess(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit", artifact_location=tmp_path / "art")
    yield s
    s.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One store process for the tests that leave it working."""
    folder = tmp_path_factory.mktemp("shared")
    s = StoreProcess(f"sqlite:///{folder / 'mlflow.db'}", "unit", artifact_location=folder / "art")
    yield s
    s.close()


def test_calls_are_written_in_order_and_answered(store, tmp_path):
    parent = store.start_run("sweep", params={"seed": 7})
    child = store.start_run("trial_1", parent_id=parent, tags={"trial_id": "a"})
    for step in (1, 2, 3):
        store.log_steps(
            child,
            params={"lr": 0.1} if step == 1 else {},
            tags={"batch_size": 32},
            metrics=[("objective", 1.0 / step, step, 0), ("nan_skipped", float("nan"), step, 0)],
        )
    assert store.last_step(child) == 3
    assert store.children_by_tag(parent, "trial_id") == {"a": child}
    store.end_run(child, "FINISHED")
    store.close()

    client = MlflowClient(tracking_uri=store.uri)  # what a user reads afterwards
    run = client.get_run(child)
    assert run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.1"}
    assert run.data.tags["mlflow.parentRunId"] == parent
    assert [m.value for m in client.get_metric_history(child, "objective")] == [1.0, 0.5, 1.0 / 3]
    assert "nan_skipped" not in run.data.metrics


def test_a_failed_call_raises_the_stores_error_and_the_next_call_works(shared):
    with pytest.raises(MlflowException, match="not found"):
        shared.end_run("no-such-run", "FINISHED")
    run = shared.start_run("after")
    assert isinstance(run, str) and len(run) == 32


def test_an_interrupted_wait_does_not_shift_later_answers(shared):
    run = shared.start_run("r")
    shared.log_steps(run, params={}, tags={}, metrics=[("objective", 1.0, 4, 0)])
    # a caller stopped (Ctrl-C) after its call was sent, before its answer was read
    shared._number += 1
    shared._conn.send((shared._number, "last_step", (run,), {}))
    assert shared.start_run("next") != 4  # its own answer, a run id
    assert shared.last_step(run) == 4


def test_an_interruption_inside_an_answer_is_an_error_not_a_wrong_answer(store, monkeypatch):
    run = store.start_run("r")

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(store._conn, "recv_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.last_step(run)
    monkeypatch.undo()
    with pytest.raises(TrackingError, match="out of step"):
        store.last_step(run)
    store.close()
    assert store._proc.exitcode is not None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_store_outlives_signals_to_the_process_group(store, signum):
    """Ctrl-C and ``timeout``'s SIGTERM reach the child too: the driver still marks the runs."""
    run = store.start_run("r")
    os.kill(store._proc.pid, signum)
    # a request answered after the signal: the child has handled it (a signal is delivered before
    # the process returns to its code), and a child the signal ended could not answer
    store.last_step(run)
    store.end_run(run, "KILLED")
    store.close()
    assert store._proc.exitcode == 0
    assert MlflowClient(tracking_uri=store.uri).get_run(run).info.status == "KILLED"


class _Unrebuildable(Exception):
    """Pickles, but its constructor refuses its own args when unpickled."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code}: {text}")


def test_answers_the_driver_could_not_rebuild_come_back_as_tracking_errors():
    driver, child = multiprocessing.Pipe()
    _reply(child, 3, error=_Unrebuildable(7, "refused"))
    number, kind, error, text = pickle.loads(driver.recv_bytes())
    assert (number, kind, type(error)) == (3, "error", TrackingError)
    assert "_Unrebuildable: 7: refused" in str(error) and "_Unrebuildable" in text
    _reply(child, 4, result=threading.Lock())  # a result that does not pickle
    number, kind, error, _ = pickle.loads(driver.recv_bytes())
    assert (number, kind, type(error)) == (4, "error", TrackingError)


def test_a_store_left_open_ends_with_the_driver(tmp_path):
    """A driver that exits without close() does not wait for the child (which ignores SIGTERM)
    and leaves no process behind."""
    code = (
        "from ludwig_hpo.tracking.process import StoreProcess, _reply\n"
        f"s = StoreProcess('sqlite:///{tmp_path / 'mlflow.db'}', 'unit')\n"
        "s.start_run('r')\nprint(s._proc.pid, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_store_that_cannot_be_opened_is_one_line_error(tmp_path):
    with pytest.raises(TrackingError, match="folder of the SQLite store does not exist") as e:
        StoreProcess(f"sqlite:///{tmp_path / 'missing' / 'mlflow.db'}", "unit")
    assert e.value.key == "tracking.uri"


def test_a_dead_store_process_is_an_error_not_a_hang(store):
    store.start_run("r")
    store._proc.kill()
    store._proc.join()
    with pytest.raises(TrackingError, match="process ended"):
        store.start_run("r2")


def test_close_ends_the_process_after_the_calls_before_it(store):
    run = store.start_run("r")
    store.close()
    assert store._proc.exitcode == 0
    assert MlflowClient(tracking_uri=store.uri).get_run(run).info.status == "RUNNING"


def test_unknown_methods_are_attribute_errors(shared):
    with pytest.raises(AttributeError):
        shared.drop_everything  # noqa: B018


def test_a_pending_store_adopted_for_a_new_embedded_store_moves_its_database_there(tmp_path, monkeypatch):
    from ludwig_hpo.tracking.process import PendingStore

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # where the spawned child makes its database ahead
    pending = PendingStore()
    s = StoreProcess(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit", artifact_location=tmp_path / "art", pending=pending)
    try:
        run = s.start_run("trial_1", params={"lr": 0.1}, tags={})
        s.log_steps(run, params={}, tags={}, metrics=[("loss", 0.5, 1, 0)])
    finally:
        s.close()
    assert list(temp.iterdir()) == []  # the temporary folder is gone
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(run).data.params == {"lr": "0.1"}


def test_a_pending_store_nobody_adopts_leaves_no_database_behind(tmp_path, monkeypatch):
    from ludwig_hpo.tracking.process import PendingStore

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    pending = PendingStore()
    pending.close()  # the child reads the end of its pipe once its database is made, and removes it
    assert not pending.proc.is_alive() and list(tmp_path.iterdir()) == []


def test_a_database_made_ahead_goes_only_to_a_new_embedded_store(tmp_path):
    from ludwig_hpo.tracking.process import AHEAD_DB_NAME, _use_ahead

    def ahead() -> object:
        folder = tmp_path / f"ahead{len(list(tmp_path.glob('ahead*')))}"
        folder.mkdir()
        (folder / AHEAD_DB_NAME).write_bytes(b"tables")
        return folder / AHEAD_DB_NAME

    (tmp_path / "old.db").write_bytes(b"runs")
    (tmp_path / "link.db").symlink_to(tmp_path / "elsewhere.db")
    refused = [
        f"sqlite:///{tmp_path / 'old.db'}",  # an existing database is never replaced
        "http://127.0.0.1:5000",
        f"sqlite:///{tmp_path / 'no' / 'x.db'}",  # no such folder
        f"sqlite:///{tmp_path / 'q.db'}?timeout=30",
        "sqlite:///:memory:",
        f"sqlite:///{tmp_path / 'link.db'}",  # a dangling link: MLflow creates the file behind it
    ]
    for uri in refused:
        made = ahead()
        _use_ahead(made, uri)
        assert not made.parent.exists()
    assert (tmp_path / "old.db").read_bytes() == b"runs" and not (tmp_path / "no").exists()
    assert not (tmp_path / "elsewhere.db").exists() and not list(tmp_path.glob("q.db*"))
    assert not Path(":memory:").exists()
    made = ahead()
    _use_ahead(made, f"sqlite:///{tmp_path / 'new.db'}")
    assert (tmp_path / "new.db").read_bytes() == b"tables" and not made.parent.exists()
