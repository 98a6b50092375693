"""``trainer.early_stop``: a search trial ends after that many epochs without an improvement of
``validation_metric`` on ``validation_field``, says so in its last report, and the driver
records it FINISHED, stopped by ``early_stop`` (still ranked)."""

from __future__ import annotations

import pytest

from ludwig_hpo.driver.monitor import SweepMonitor
from ludwig_hpo.results.live import TrialDescription
from ludwig_hpo.tracking import layout
from ludwig_hpo.train.early_stop import EarlyStopping
from ludwig_hpo.train.loop import Job
from ludwig_hpo.train.report_keys import END_EARLY_STOP, END_LAST_EPOCH, END_REASON

from .trainer_helpers import config, run


def test_patience_counts_epochs_since_the_last_strict_improvement():
    stop = EarlyStopping(patience=2)
    assert [stop.update(e, v) for e, v in enumerate([3.0, 2.0, 2.0, 1.0, 1.5, 1.0], start=1)] == [
        False,
        False,
        False,
        False,
        False,
        True,  # epochs 5 and 6 did not beat epoch 4's 1.0 (equal is no improvement)
    ]
    up = EarlyStopping(patience=1, larger_is_better=True)
    assert [up.update(e, v) for e, v in enumerate([0.5, 0.7, 0.6], start=1)] == [False, False, True]
    # Ludwig reads a NaN as 0: for a loss, an improvement
    nan = EarlyStopping(patience=1)
    assert [nan.update(e, v) for e, v in enumerate([1.0, float("nan"), 0.5], start=1)] == [False, False, True]
    assert not any(EarlyStopping(patience=-1).update(e, 1.0) for e in range(1, 10))


def _epochs_since_best(values, larger):
    best, since = None, []
    for i, v in enumerate(values):
        if best is None or (v > values[best] if larger else v < values[best]):
            best = i
        since.append(i - best)
    return since


def test_the_loop_stops_at_the_epoch_patience_runs_out_and_says_why():
    cfg = config(
        {
            "epochs": 40,
            "learning_rate": 0.05,
            "early_stop": 2,
            "validation_field": "malignant",
            "validation_metric": "accuracy",
        }
    )
    reports, _ = run(cfg)
    values = [r["validation/malignant/accuracy"] for r in reports]
    since = _epochs_since_best(values, larger=True)
    assert len(reports) < 40, "accuracy on 114 rows plateaus long before 40 epochs"
    assert since[-1] == 2 and all(s < 2 for s in since[:-1])
    assert reports[-1][END_REASON] == END_EARLY_STOP
    assert all(END_REASON not in r for r in reports[:-1])


def test_validation_field_and_metric_choose_what_is_watched():
    cfg = config({"epochs": 40, "learning_rate": 0.05, "early_stop": 1, "validation_field": "malignant"})
    reports, _ = run(cfg)
    since = _epochs_since_best([r["validation/malignant/loss"] for r in reports], larger=False)
    assert since[-1] == 1 and all(s < 1 for s in since[:-1])


def test_off_for_minus_one_and_for_k_fold_and_test_runs():
    flat = {"epochs": 6, "learning_rate": 0.05, "validation_field": "malignant", "validation_metric": "accuracy"}
    reports, _ = run(config({**flat, "early_stop": -1}))
    assert [r["epoch"] for r in reports] == [1, 2, 3, 4, 5, 6] and reports[-1][END_REASON] == END_LAST_EPOCH
    search, _ = run(config({**flat, "early_stop": 1}))
    assert len(search) < 6 and search[-1][END_REASON] == END_EARLY_STOP  # the same config stops a search run
    reports, _ = run(config({**flat, "early_stop": 1}), Job(kind="test", epochs=6))
    assert len(reports) == 6 and reports[-1][END_REASON] == END_LAST_EPOCH


def test_the_driver_records_an_early_stopped_trial_finished_and_stopped_by_early_stop():
    mon = SweepMonitor(
        epochs=10,
        goal_sign=1.0,
        sinks=[],
        describe=lambda tid, cfg: TrialDescription(dict(cfg), {"phase": "search"}, f"trial_{tid}"),
        early_stopping=True,  # a scheduler that may stop trials: the trial's own reason still wins
    )

    class Trial:
        def __init__(self, tid):
            self.trial_id, self.config = tid, {}

    a, b = Trial("a"), Trial("b")
    for t in (a, b):
        mon.on_trial_start(0, [], t)
    for e in (1, 2, 3):
        last = {END_REASON: END_EARLY_STOP} if e == 3 else {}
        mon.on_trial_result(0, [], a, {"epoch": e, "objective": 1.0 / e, **last})
    mon.on_trial_result(0, [], b, {"epoch": 1, "objective": 0.1})
    mon.on_trial_complete(0, [], a)
    mon.on_trial_complete(0, [], b)
    recs = {r.trial_id: r for r in mon.records()}
    assert (recs["a"].status, recs["a"].stopped_by, recs["a"].stopped_at_epoch) == ("FINISHED", "early_stop", 3)
    assert recs["a"].label == "stopped early" and recs["a"].objective_best == pytest.approx(1 / 3)
    assert recs["a"].stopped_by == layout.STOPPED_BY_EARLY_STOP
    assert recs["b"].stopped_by == layout.STOPPED_BY_SCHEDULER


def test_a_trial_that_ran_its_train_steps_is_complete_not_stopped():
    mon = SweepMonitor(
        epochs=100,
        goal_sign=1.0,
        sinks=[],
        describe=lambda tid, cfg: TrialDescription(dict(cfg), {"phase": "search"}, f"trial_{tid}"),
        early_stopping=True,
    )

    class Trial:
        trial_id, config = "c", {}

    mon.on_trial_start(0, [], Trial())
    mon.on_trial_result(0, [], Trial(), {"epoch": 2, "objective": 0.5, END_REASON: END_LAST_EPOCH})
    mon.on_trial_complete(0, [], Trial())
    (rec,) = mon.records()
    assert (rec.status, rec.stopped_by, rec.label) == ("FINISHED", None, "completed")


def test_a_resumed_trial_keeps_counting_from_its_checkpoint(tmp_path):
    import shutil

    from ludwig_hpo.train.loop import train_loop

    from .trainer_helpers import data

    cfg = config(
        {
            "epochs": 40,
            "learning_rate": 0.05,
            "early_stop": 2,
            "validation_field": "malignant",
            "validation_metric": "accuracy",
        }
    )
    whole: list[dict] = []
    saved = {}

    def keep(metrics, ckpt):
        whole.append(dict(metrics))
        if ckpt is not None:
            saved[metrics["epoch"]] = shutil.copytree(ckpt, tmp_path / f"e{metrics['epoch']}")

    train_loop(cfg, data(), Job(checkpoint_every=1), keep)
    assert whole[-1][END_REASON] == END_EARLY_STOP and len(whole) >= 3
    at = len(whole) - 1  # resume one epoch before the stop: the count must carry over
    rest: list[dict] = []
    train_loop(cfg, data(), Job(resume_from=str(saved[at])), lambda m, c: rest.append(dict(m)))
    assert [r["epoch"] for r in rest] == [len(whole)] and rest[-1][END_REASON] == END_EARLY_STOP
