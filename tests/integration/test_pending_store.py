"""The store's process started ahead of its store (while the sweep prepares its data): it
imports MLflow, then serves the store it is given as a new process would; one nobody adopts
ends with its close; one that died is replaced. Real MLflow (an SQLite file), no Ray."""

from __future__ import annotations

import pytest

from ludwig_hpo.tracking.process import PendingStore, StoreProcess

pytestmark = pytest.mark.timeout(120)


def test_a_pending_child_is_adopted_and_serves_the_store(tmp_path):
    pending = PendingStore()
    pid = pending.proc.pid
    store = StoreProcess(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit", tmp_path / "art", pending=pending)
    try:
        assert store._proc.pid == pid and pending.adopted
        parent = store.start_run("sweep")
        assert store.children_by_tag(parent, "trial_id") == {}
        pending.close()  # adopted: the store's own close ends it, not this
        assert store._proc.is_alive()
    finally:
        store.close()
    assert store._proc.exitcode is not None


def test_a_pending_child_nobody_adopts_ends_with_its_close():
    pending = PendingStore()
    pending.close()
    pending.close()
    assert pending.proc.exitcode is not None


def test_a_pending_child_that_died_is_replaced_by_a_new_process(tmp_path):
    pending = PendingStore()
    pending.proc.kill()
    pending.proc.join()
    store = StoreProcess(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit", tmp_path / "art", pending=pending)
    try:
        assert store._proc.pid != pending.proc.pid
        store.start_run("sweep")
    finally:
        store.close()
        pending.close()
