"""The shared view ``hpo ui`` writes on a sweep's experiment: MLflow's run list opens on the
sweep's metric and searched parameters (a real SQLite store, no server)."""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from ludwig_hpo.driver.ui import runs_url
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.mlflow_store import MlflowStore
from ludwig_hpo.tracking.ui_view import SHARE_QUERY, write_sweep_view


def test_the_view_names_the_sweeps_metric_and_its_searched_parameters_as_written(tmp_path):
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "view-sweep")
    parent = store.start_run("view-sweep-20260101-000000", tags={layout.RUN_KIND_TAG: "sweep"})
    store.log_params(parent, {layout.METRIC_PARAM: "validation/size (cm)/loss"})
    child = store.start_run("trial_1", tags={layout.RUN_KIND_TAG: "trial"}, parent_id=parent)
    store.log_params(child, {"size (cm).encoder.type": "dense", "trainer.learning_rate": 0.01})
    # `hpo train --from-sweep` nests its own run (kind sweep, other params) under the parent, later
    train = store.start_run("train", tags={layout.RUN_KIND_TAG: layout.RUN_KIND_SWEEP}, parent_id=parent)
    store.log_params(train, {"num_samples": 1, "kfold.k": 2})

    assert write_sweep_view(store.uri, store.experiment_id, parent) == SHARE_QUERY
    tags = MlflowClient(tracking_uri=store.uri).get_experiment(store.experiment_id).tags
    columns = json.loads(tags[layout.SHARED_VIEW_TAG_PREFIX + layout.SWEEP_VIEW_KEY])["selectedColumns"]
    # the UI's column ids hold the keys as MLflow stores them (names.mlflow_key's spelling)
    assert "metrics.`validation/size :28cm:29/loss`" in columns
    assert "metrics.`best/validation/size :28cm:29/loss`" in columns
    params = {c for c in columns if c.startswith("params.")}
    assert params == {"params.`size :28cm:29.encoder.type`", "params.`trainer.learning_rate`"}
    url = runs_url("127.0.0.1", 5000, store.experiment_id, SHARE_QUERY)
    assert url.endswith(f"/runs?workflowType=machine_learning&{SHARE_QUERY}")


def test_a_parent_run_without_a_metric_gets_no_view(tmp_path):
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "no-metric")
    parent = store.start_run("no-metric-20260101-000000", tags={layout.RUN_KIND_TAG: "sweep"})
    assert write_sweep_view(store.uri, store.experiment_id, parent) is None
    assert runs_url("127.0.0.1", 5000, store.experiment_id, None).endswith("runs?workflowType=machine_learning")
