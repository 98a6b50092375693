"""MlflowStore.log_batch: parameters, tags and metrics of a trial's first result in one write
when within MLflow's per-request limits, split otherwise; nothing lost either way."""

from __future__ import annotations

import math

import pytest

from ludwig_hpo.tracking import MlflowStore


@pytest.fixture()
def store(tmp_path):
    return MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit")


def test_log_batch_is_one_request_within_limits(store, monkeypatch):
    run = store.start_run("t")
    calls = []
    real = store.client.log_batch
    monkeypatch.setattr(store.client, "log_batch", lambda *a, **kw: (calls.append(kw), real(*a, **kw)))
    store.log_batch(run, params={"batch_size": 32}, tags={"batch_size_cache": "hit"},
                    metrics={"validation/x/loss": 0.5, "bad": math.nan, "flag": True}, step=1)
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
