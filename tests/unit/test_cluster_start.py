"""A local cluster starting in the background while the driver prepares the data: the start
overlaps the caller's work, one thread starts and stops it (Ray's daemons die with the
thread that started them), its errors reach the caller, and a sweep whose data is bad stops
it before the error shows, leaving no output folder. Without Ray: the cluster is a fake
context manager driven by events."""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from ludwig_hpo.execution.cluster_start import ClusterStart

#: Upper bound on waiting for an event the code under test must set (a hang, not a speed).
WAIT_S = 60


class FakeCluster:
    """A cluster whose start blocks until :attr:`go` is set; records the threads and order."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.go = threading.Event()
        self.entering = threading.Event()
        self.events: list[tuple[str, str]] = []
        self.fail = fail

    @contextlib.contextmanager
    def cm(self) -> Iterator[None]:
        self.entering.set()
        assert self.go.wait(WAIT_S)
        if self.fail is not None:
            self.events.append(("failed", threading.current_thread().name))
            raise self.fail
        self.events.append(("started", threading.current_thread().name))
        try:
            yield
        finally:
            self.events.append(("stopped", threading.current_thread().name))


def test_the_start_overlaps_the_callers_work_and_its_thread_lives_until_the_stop():
    fake = FakeCluster()
    start = ClusterStart(fake.cm())
    start.begin()
    assert fake.entering.wait(WAIT_S)
    # the caller goes on (prepares the data) while the start is blocked
    assert fake.events == []
    fake.go.set()
    start.wait()
    assert [e for e, _ in fake.events] == ["started"]
    # Ray's daemons die with the thread that started them: it must outlive the start
    assert start._thread is not None and start._thread.is_alive()
    start.stop()
    start.stop()  # idempotent
    assert not start._thread.is_alive()
    (started, by), (stopped, by_main) = fake.events
    assert (started, stopped) == ("started", "stopped")
    assert by != threading.main_thread().name and by_main == threading.main_thread().name


def test_a_start_error_reaches_wait_and_stop_has_nothing_to_stop():
    fake = FakeCluster(fail=ValueError("a local cluster has whole CPUs"))
    fake.go.set()
    with pytest.raises(ValueError, match="whole CPUs"):
        with ClusterStart(fake.cm()) as start:
            start.wait()
    assert [e for e, _ in fake.events] == ["failed"]


def test_an_error_of_the_caller_stops_a_cluster_that_was_still_starting():
    fake = FakeCluster()
    with pytest.raises(RuntimeError, match="bad data"):
        with ClusterStart(fake.cm()):
            assert fake.entering.wait(WAIT_S)
            fake.go.set()  # the start ends while the error unwinds: stop() waits for it
            raise RuntimeError("bad data")
    assert [e for e, _ in fake.events] == ["started", "stopped"]


def test_a_sweep_with_bad_data_stops_its_cluster_and_store_process_and_creates_no_output(
    tmp_path, monkeypatch, repo_root: Path
):
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver import startup
    from ludwig_hpo.driver import sweep as sweep_module
    from ludwig_hpo.errors import DataError

    text = (repo_root / "sweeps" / "breast_cancer_tiny.yaml").read_text()
    bad = tmp_path / "sweep.yaml"
    bad.write_text(text.replace("sklearn:breast_cancer", "missing.csv"))
    fake = FakeCluster()
    fake.go.set()
    begun: list[ClusterStart] = []

    def start_local_cluster(plan, *, train_jobs):
        begun.append(ClusterStart(fake.cm()))
        begun[-1].begin()
        return begun[-1]

    class FakeStore:
        closed = False

        def close(self) -> None:
            FakeStore.closed = True

    monkeypatch.setattr(startup, "start_local_cluster", start_local_cluster)
    monkeypatch.setattr(startup, "PendingStore", FakeStore)
    sweep = sweep_module.Sweep(load_sweep(bad), Console(file=io.StringIO()), tmp_path / "out")
    with pytest.raises(DataError, match="missing.csv"):
        sweep.run()
    assert len(begun) == 1 and [e for e, _ in fake.events] == ["started", "stopped"]
    assert FakeStore.closed  # the store's process started ahead, never adopted, is ended
    assert not (tmp_path / "out").exists()


def test_the_sigterm_action_ray_replaces_in_the_start_thread_is_put_back():
    # the driver's core worker installs an aborting SIGTERM handler (sigaction, any thread);
    # the start puts the sweep's handler back from its own thread
    import ctypes
    import os
    import signal

    from ludwig_hpo.execution.cluster_start import _sigterm_action

    got = threading.Event()
    old = signal.signal(signal.SIGTERM, lambda *a: got.set())
    try:

        def replace_and_restore() -> None:
            restore = _sigterm_action()
            ctypes.CDLL(None).signal(signal.SIGTERM, ctypes.c_void_p(1))  # SIG_IGN, as a library would set
            restore()

        t = threading.Thread(target=replace_and_restore)
        t.start()
        t.join(WAIT_S)
        os.kill(os.getpid(), signal.SIGTERM)
        assert got.wait(WAIT_S)
    finally:
        signal.signal(signal.SIGTERM, old)
