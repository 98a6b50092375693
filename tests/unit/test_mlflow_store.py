"""MlflowStore.log_batch: parameters, tags and metrics of a trial's first result in one write
when within MLflow's per-request limits, split otherwise; nothing lost either way."""

from __future__ import annotations

import math

import pytest

from ludwig_hpo.tracking.mlflow_store import MlflowStore


@pytest.fixture()
def store(tmp_path):
    return MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit")


def test_log_batch_is_one_request_within_limits(store, monkeypatch):
    run = store.start_run("t")
    calls = []
    real = store.client.log_batch
    monkeypatch.setattr(store.client, "log_batch", lambda *a, **kw: (calls.append(kw), real(*a, **kw)))
    store.log_batch(
        run,
        params={"batch_size": 32},
        tags={"batch_size_cache": "hit"},
        metrics={"validation/x/loss": 0.5, "bad": math.nan, "flag": True},
        step=1,
    )
    assert len(calls) == 1
    data = store.client.get_run(run).data
    assert data.params == {"batch_size": "32"}
    assert data.tags["batch_size_cache"] == "hit"
    assert data.metrics == {"validation/x/loss": 0.5}  # non-finite and boolean values are skipped
    assert store.client.get_metric_history(run, "validation/x/loss")[0].step == 1


def test_log_batch_splits_beyond_the_parameter_limit(store):
    run = store.start_run("t")
    params = {f"p{i}": i for i in range(150)}  # MLflow takes at most 100 parameters per request
    store.log_batch(run, params=params, tags={}, metrics={"m": 1.0}, step=2)
    data = store.client.get_run(run).data
    assert len(data.params) == 150 and data.metrics == {"m": 1.0}


def test_the_embedded_store_uses_a_write_ahead_log_without_syncing_each_commit(store):
    import sqlalchemy

    engine = store.client._tracking_client.store.engine
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(sqlalchemy.text("PRAGMA synchronous")).scalar() == 1  # NORMAL


@pytest.mark.timeout(120)
def test_a_committed_write_survives_the_driver_killed_right_after(tmp_path):
    """Commits are not synced to the disk one by one, but a killed process loses none: the
    write-ahead log is in the operating system's cache, and the next reader recovers it."""
    import os
    import signal
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = (
        f"import os, signal\nfrom ludwig_hpo.tracking.mlflow_store import MlflowStore\n"
        f"s = MlflowStore({uri!r}, 'unit')\nr = s.start_run('t', tags={{'trial_id': 'a'}})\n"
        f"s.log_steps(r, params={{'lr': 0.1}}, tags={{'status': 'FINISHED'}}, metrics=[('loss', 0.5, 3, 0)])\n"
        f"s.end_run(r, 'FINISHED')\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert os.path.getsize(tmp_path / "mlflow.db-wal") > 0  # not folded into the database: only in the log
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("unit").experiment_id])
    assert run.info.status == "FINISHED" and run.data.params == {"lr": "0.1"}
    assert run.data.tags["status"] == "FINISHED" and run.data.metrics == {"loss": 0.5}


def test_every_way_of_writing_tags_cuts_long_values_to_mlflow_s_tag_length(store):
    from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

    from ludwig_hpo.tracking.mlflow_store import _tags

    long = "x" * (MAX_TAG_VAL_LENGTH + 10)
    cut = [(t.key, t.value) for t in _tags({"note": long, "n": 3})]
    assert cut == [("note", long[:MAX_TAG_VAL_LENGTH]), ("n", "3")]
    run = store.start_run("t")
    store.set_tags(run, {"a": long})
    store.log_batch(run, params={}, tags={"b": long}, metrics={}, step=0)
    store.log_steps(run, params={}, tags={"c": long}, metrics=[])
    tags = store.client.get_run(run).data.tags
    assert {k: len(tags[k]) for k in "abc"} == dict.fromkeys("abc", MAX_TAG_VAL_LENGTH)
