"""The sweep's outcome on its parent run: the best trial's scores, the k-fold mean, its 95 %
confidence interval and the test score of each top configuration, and the run's description."""

from __future__ import annotations

import dataclasses

import pytest

from ludwig_hpo.driver.outcome import log_sweep_summary, summary_metrics, sweep_description
from ludwig_hpo.results import EpochRecord, KFoldRecord, SweepResult, TrialRecord

METRIC = "validation/y/roc_auc"


def _result() -> SweepResult:
    best = TrialRecord(
        "b",
        "FINISHED",
        {"trainer.learning_rate": 0.01, "trainer.optimizer.type": "adam"},
        0.8,
        0.9,
        (EpochRecord(1, 0.9, {METRIC: 0.9, "validation/y/loss": 0.3}), EpochRecord(2, 0.8, {METRIC: 0.8})),
    )
    stopped = TrialRecord(
        "s", "FINISHED", {"trainer.learning_rate": 0.1}, 0.6, 0.6, (EpochRecord(1, 0.6),), stopped_by="scheduler"
    )
    kfold = (
        KFoldRecord(1, "b", best.params, (0.8, 0.9, 0.85), 0.88, "y/roc_auc"),
        KFoldRecord(2, "s", stopped.params, (0.7,), None, "y/roc_auc", failed_folds=2),
    )
    return SweepResult("s", METRIC, "maximize", (), (best, stopped), kfold, best_trial_id="b")


def test_the_parent_gets_the_best_trials_scores_and_each_configurations_kfold_and_test_scores():
    m = summary_metrics(_result())
    assert m["best/validation/y/loss"] == 0.3 and "best/" + METRIC not in m  # best/<metric> is logged already
    assert m["kfold/1/mean"] == pytest.approx(0.85) and m["kfold/1/test"] == 0.88
    assert m["kfold/1/ci95"] == pytest.approx(4.302653 * 0.05 / 3**0.5, rel=1e-5)  # t(0.975, 2) * s / sqrt(n)
    assert m["kfold/2/mean"] == 0.7 and "kfold/2/ci95" not in m and "kfold/2/test" not in m  # one fold, no test


def test_the_description_names_the_best_configuration_and_the_kfold_table():
    text = sweep_description(_result())
    assert "2 trials (1 completed, 1 stopped early)" in text
    assert "Best trial `b`: `validation/y/roc_auc` = 0.9 (epoch 1, completed)" in text
    assert "| `trainer.learning_rate` | 0.01 |" in text and "| `trainer.optimizer.type` | adam |" in text
    assert "| 1 | `b` | 0.85 ± 0.12 | 0.88 |" in text and "| 2 | `s` | 0.7 | failed |" in text


def test_they_are_logged_on_the_parent_run(tmp_path):
    from ludwig_hpo.tracking.mlflow_store import MlflowStore

    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "outcome")
    parent = store.start_run("s-20260101-000000")
    reason = "time budget reached after 2 of 8 trials"
    log_sweep_summary(dataclasses.replace(_result(), stop_reason=reason), store, parent)
    run = store.client.get_run(parent)
    assert run.data.tags["stop_reason"] == reason
    assert run.data.metrics["kfold/1/test"] == 0.88
    assert run.data.tags["mlflow.note.content"] == sweep_description(_result())
