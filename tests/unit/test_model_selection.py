"""``kfold.select``: the rule choosing the final model's configuration from the k-fold scores,
its record in ``results.json``, and the retrained run keeping its final weights."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from ludwig_hpo.config.schema import KFoldConfig
from ludwig_hpo.results import KFoldRecord, SweepResult
from ludwig_hpo.results.io import read_result, write_result
from ludwig_hpo.results.selection import ModelSelection, cv_mean, select_configuration
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.report_keys import CHECKPOINT_EPOCH, MODEL_FILE, MODEL_TRAIN_ROWS

from . import trainer_helpers as th


def rec(rank: int, folds: tuple[float, ...], failed: int = 0) -> KFoldRecord:
    return KFoldRecord(
        config_rank=rank,
        trial_id=f"t{rank}",
        params={"trainer.learning_rate": rank / 100},
        fold_scores=folds,
        test_score=0.5,
        metric="label/loss",
        failed_folds=failed,
    )


# config #2 lower (better) than #1 on every fold by about the same amount: the paired test tells them apart
SEARCH_BEST = rec(1, (0.110, 0.120, 0.100, 0.115, 0.105))
CLEARLY_BETTER = rec(2, (0.060, 0.071, 0.052, 0.066, 0.061))
# config #3 better on average but not fold by fold
NOISY = rec(3, (0.020, 0.200, 0.030, 0.190, 0.040))


def test_select_is_cv_by_default_and_refuses_other_values():
    assert KFoldConfig().select == "cv"
    assert KFoldConfig(select="search").select == "search"
    with pytest.raises(ValueError, match="select"):
        KFoldConfig(select="test")


def test_a_significantly_better_cv_mean_is_chosen():
    s = select_configuration([CLEARLY_BETTER, SEARCH_BEST], "minimize", "cv")
    assert s is not None and (s.config_rank, s.trial_id, s.chosen_by) == (2, "t2", "cv_mean")
    assert s.p_value is not None and s.p_value < 0.05
    assert s.cv_means == pytest.approx((0.11, 0.062))  # rank order, whatever order the records came in
    assert "config #2 has the best CV mean" in s.reason and "p = " in s.reason and "5 folds" in s.reason


def test_a_better_cv_mean_the_paired_test_cannot_tell_apart_keeps_the_search_best():
    s = select_configuration([SEARCH_BEST, NOISY], "minimize", "cv")
    assert cv_mean(NOISY) < cv_mean(SEARCH_BEST)  # type: ignore[operator]
    assert s is not None and (s.config_rank, s.chosen_by) == (1, "search_best")
    assert s.p_value is not None and s.p_value >= 0.05
    assert "cannot tell" in s.reason and "search's best is kept" in s.reason


def test_only_the_best_cv_mean_is_compared_with_the_search_best():
    # #3 has the best mean but is noisy; #2 would have passed the test, yet the rule compares
    # the best CV mean with the search's best only
    s = select_configuration(
        [SEARCH_BEST, CLEARLY_BETTER, dataclasses.replace(NOISY, fold_scores=(0.0,) * 4 + (0.2,))], "minimize", "cv"
    )
    assert s is not None and (s.config_rank, s.chosen_by) == (1, "search_best")


def test_the_goal_decides_which_mean_is_better():
    s = select_configuration([CLEARLY_BETTER, SEARCH_BEST], "maximize", "cv")
    assert s is not None and (s.config_rank, s.chosen_by) == (1, "cv_mean")  # #1's larger mean is the best
    assert s.p_value is None


def test_select_search_keeps_the_search_best_whatever_the_folds_say():
    s = select_configuration([SEARCH_BEST, CLEARLY_BETTER], "minimize", "search")
    assert s is not None and (s.config_rank, s.chosen_by, s.select) == (1, "search_best", "search")
    assert s.cv_means == pytest.approx((0.11, 0.062))


def test_failed_folds_cannot_be_compared():
    broken_best = dataclasses.replace(SEARCH_BEST, fold_scores=SEARCH_BEST.fold_scores[:4], failed_folds=1)
    s = select_configuration([broken_best, CLEARLY_BETTER], "minimize", "cv")
    assert s is not None and (s.config_rank, s.chosen_by) == (1, "search_best") and s.cv_means[0] is None
    assert "did not finish" in s.reason
    nan = dataclasses.replace(CLEARLY_BETTER, fold_scores=(float("nan"),) * 5)
    s = select_configuration([SEARCH_BEST, nan], "minimize", "cv")
    assert s is not None and (s.config_rank, s.chosen_by) == (1, "cv_mean") and s.cv_means[1] is None
    s = select_configuration([broken_best], "minimize", "cv")
    assert s is not None and s.chosen_by == "search_best" and "no configuration has every fold" in s.reason
    assert select_configuration([], "minimize", "cv") is None


def test_the_selection_round_trips_through_results_json(tmp_path):
    selection = ModelSelection(
        "cv",
        2,
        "t2",
        "cv_mean",
        "why",
        (0.11, None),
        0.004,
        retrained=True,
        epochs=3,
        train_rows=480,
        search_test_scores={"test/label/loss": float("nan")},
    )
    result = SweepResult("s", "validation/label/loss", "minimize", (), (), selection=selection)
    write_result(result, tmp_path / "results.json")
    back = read_result(tmp_path / "results.json").selection
    assert back is not None and back.search_test_scores["test/label/loss"] != back.search_test_scores["test/label/loss"]
    assert dataclasses.replace(back, search_test_scores={}) == dataclasses.replace(selection, search_test_scores={})
    no_kfold = SweepResult("s", "validation/label/loss", "minimize", (), ())
    write_result(no_kfold, tmp_path / "plain.json")
    assert read_result(tmp_path / "plain.json").selection is None


def _checkpoints(cfg, job: Job, tmp_path: Path) -> tuple[list[dict], list[Path]]:
    reports: list[dict] = []
    kept: list[Path] = []

    def report(metrics, folder):
        reports.append(dict(metrics))
        if folder is not None:  # a reporter persists the folder before the next write
            kept.append(Path(shutil.copytree(folder, tmp_path / f"ckpt{len(kept)}")))

    train_loop(cfg, th.data(), job, report)
    return reports, kept


def test_the_retrain_keeps_its_final_weights_and_row_count_under_select_cv(tmp_path):
    cfg = th.config(kfold={"k": 2, "top_k": 1})
    data = th.data()
    reports, kept = _checkpoints(cfg, Job("test", epochs=2), tmp_path)
    rows = len(data.splits["train"]) + len(data.splits["validation"])
    assert [r["epoch"] for r in reports] == [1, 2] and len(kept) == 1  # the final epoch only
    assert reports[-1][CHECKPOINT_EPOCH] == 2
    saved = torch.load(kept[0] / MODEL_FILE, weights_only=True)
    assert (saved["epoch"], saved[MODEL_TRAIN_ROWS]) == (2, rows)
    # the weights are the run's final ones: they score the test split as its last report did
    from ludwig_hpo.model import build_model
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    model = build_model(cfg, data.meta)
    model.load_state_dict(saved["state_dict"])
    scores = evaluate(model, cfg, DeviceData(data, torch.device("cpu")), data.splits["test"], "test", 64)
    assert scores["test/malignant/roc_auc"] == pytest.approx(reports[-1]["test/malignant/roc_auc"])


def test_fold_runs_and_select_search_keep_no_weights(tmp_path):
    _, kept = _checkpoints(th.config(kfold={"k": 2, "top_k": 1, "select": "search"}), Job("test", epochs=1), tmp_path)
    assert kept == []
    _, kept = _checkpoints(th.config(kfold={"k": 2, "top_k": 1}), Job("fold", 0, epochs=1), tmp_path)
    assert kept == []


def test_the_selection_is_read_back_from_the_parent_run_tags():
    from ludwig_hpo.results.selection import selection_from_tags
    from ludwig_hpo.tracking import layout

    tags = {
        layout.FINAL_MODEL_SELECT_TAG: "cv",
        layout.FINAL_MODEL_CONFIG_RANK_TAG: "2",
        layout.FINAL_MODEL_TRIAL_ID_TAG: "t2",
        layout.FINAL_MODEL_CHOSEN_BY_TAG: "cv_mean",
        layout.FINAL_MODEL_REASON_TAG: "why",
        layout.FINAL_MODEL_RETRAINED_TAG: "true",
        layout.FINAL_MODEL_TRAIN_ROWS_TAG: "480",
    }
    s = selection_from_tags(tags, [CLEARLY_BETTER, SEARCH_BEST])
    assert s is not None and (s.select, s.config_rank, s.trial_id, s.chosen_by, s.reason) == (
        "cv",
        2,
        "t2",
        "cv_mean",
        "why",
    )
    assert s.retrained and s.train_rows == 480 and s.cv_means == pytest.approx((0.11, 0.062))
    assert selection_from_tags({}, [SEARCH_BEST]) is None


def test_the_parent_run_description_names_the_retrained_final_model():
    from ludwig_hpo.driver.outcome import sweep_description
    from ludwig_hpo.results import EpochRecord, TrialRecord

    trial = TrialRecord("t1", "FINISHED", {"trainer.learning_rate": 0.01}, 0.2, 0.2, (EpochRecord(1, 0.2),))
    sel = ModelSelection("cv", 1, "t1", "cv_mean", "the search's best has the best CV mean", retrained=True)
    result = SweepResult(
        "s", "validation/label/loss", "minimize", (), (trial,), best_trial_id="t1", test_scores={"test/label/loss": 0.3}
    )
    assert "Its best weights on the test split:" in sweep_description(result)
    text = sweep_description(dataclasses.replace(result, selection=sel))
    assert "The final model, config #1 (`t1`) retrained on train+validation (`kfold.select: cv`" in text
    assert "| `test/label/loss` | 0.3 |" in text


def test_a_resumed_sweep_finds_the_retrained_weights_through_the_journal(tmp_path):
    """The retrain is a k-fold trial: the journal keeps its checkpoint, so a resumed sweep that
    replays it exports the same weights without training again."""
    from ludwig_hpo.driver.journal import JournalSink, read_journal, restore_trial
    from ludwig_hpo.results import EpochRecord
    from ludwig_hpo.results.kfold import job_tags, retrained_weights
    from ludwig_hpo.results.live import LiveTrial

    job = {"kind": "test", "fold": None, "params": {}, "epochs": 2, "config_rank": 2, "trial_id": "t2"}
    fold = {**job, "kind": "fold", "fold": 0}
    ended = LiveTrial("k1", {}, job_tags(job), "config2-test", status="FINISHED", checkpoint=str(tmp_path / "ck"))
    ended.history = [EpochRecord(1, 0.3, {"test/label/loss": 0.3}), EpochRecord(2, 0.2, {"test/label/loss": 0.2})]
    ended.checkpoint_epoch = 2
    a_fold = LiveTrial("k2", {}, job_tags(fold), "config2-fold0", status="FINISHED", checkpoint="elsewhere")
    assert retrained_weights([ended, a_fold]) == {2: str(tmp_path / "ck")}  # a fold's folder is no retrain
    JournalSink(tmp_path / "journal.jsonl", "kfold").trial_ended(ended)
    replayed = LiveTrial("k1", {}, job_tags(job), "config2-test")
    restore_trial(replayed, read_journal(tmp_path / "journal.jsonl")["k1"])
    assert retrained_weights([replayed]) == {2: str(tmp_path / "ck")}
    assert retrained_weights([LiveTrial("k3", {}, job_tags(job), "config2-test", status="FAILED")]) == {}


@pytest.mark.parametrize(
    ("select", "final"),
    [
        ("cv", "the best CV mean the paired test tells from the search's best, retrained on train+validation"),
        ("search", "the search's best trial's weights"),
    ],
)
def test_hpo_validate_says_which_model_the_sweep_ends_with(tmp_path, monkeypatch, select, final):
    import sklearn  # noqa: F401 (sets KMP_* variables on import: before the hygiene check)
    from typer.testing import CliRunner

    from ludwig_hpo.cli import app

    from ..conftest import SWEEPS

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    sweep = tmp_path / "s.yaml"
    text = (SWEEPS / "breast_cancer_tiny.yaml").read_text()
    sweep.write_text(text.replace("kfold: {k: 2, top_k: 1}", f"kfold: {{k: 2, top_k: 1, select: {select}}}"))
    out = CliRunner().invoke(app, ["validate", str(sweep)]).stdout.splitlines()
    assert f"k-fold: top 1 configurations x 2 folds + test; final model (kfold.select: {select}): {final}" in out
