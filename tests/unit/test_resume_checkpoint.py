"""A search trial that continues from its checkpoint trains exactly as one that never stopped.

One process, the breast-cancer MLP with dropout and Adam (so the random state and the
optimizer's moments must both be restored), no Ray.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest
import torch

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.errors import CheckpointError
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.report_keys import MODEL_FILE, TRAINER_STATE_FILE

from ..conftest import SWEEPS

EPOCHS = 4


@pytest.fixture(scope="module")
def setup():
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    raw = {
        **loaded.raw,
        "trainer": {
            "epochs": EPOCHS,
            "learning_rate": 0.01,
            "batch_size": 16,
            "eval_batch_size": 64,
            "optimizer": {"type": "adam"},
        },
        "combiner": {"type": "concat", "num_fc_layers": 2, "output_size": 16, "dropout": 0.3},
        "backend": {"num_workers": 1},
    }
    cfg = SweepConfig.model_validate(raw)
    data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
    data = dataclasses.replace(data, splits={**data.splits, "train": data.splits["train"][:96]})
    return cfg, data


def _run(cfg, data, job, keep: Path | None = None):
    reports, saved = [], {}

    def report(metrics, ckpt):
        reports.append(metrics)
        if ckpt is not None and keep is not None:
            dest = keep / f"epoch_{metrics['epoch']}"
            shutil.copytree(ckpt, dest)
            saved[metrics["epoch"]] = dest

    model = train_loop(cfg, data, job, report)
    return reports, saved, model


def test_continuing_from_a_periodic_checkpoint_equals_an_uninterrupted_run(setup, tmp_path):
    cfg, data = setup
    whole, saved, model = _run(cfg, data, Job(checkpoint_every=2), keep=tmp_path)
    assert 2 in saved and all((saved[2] / f).is_file() for f in (MODEL_FILE, TRAINER_STATE_FILE))
    rest, _, resumed_model = _run(cfg, data, Job(checkpoint_every=2, resume_from=str(saved[2])))
    assert [r["epoch"] for r in rest] == [3, 4]
    for a, b in zip(whole[2:], rest, strict=True):
        for key in ("objective", "train/combined/running_loss", "validation/malignant/accuracy", "optimizer_steps"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), key
    for (k, a), b in zip(model.state_dict().items(), resumed_model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=k)


def _best_so_far(cfg, reports):
    """(epoch, objective) of the best epoch up to each report, ties going to the later epoch."""
    best, out = None, []
    for r in reports:
        if best is None or cfg.goal_sign * r["objective"] <= cfg.goal_sign * best[1]:
            best = (r["epoch"], r["objective"])
        out.append(best)
    return out


def _weights(folder: Path) -> dict:
    return torch.load(folder / MODEL_FILE, weights_only=True)


def test_without_a_budget_every_epoch_writes_and_model_pt_holds_the_best_epochs_weights(setup, tmp_path):
    cfg, data = setup
    reports, saved, _ = _run(cfg, data, Job(checkpoint_budget=math.inf), keep=tmp_path)
    assert sorted(saved) == list(range(1, EPOCHS + 1))
    for r, (epoch, objective) in zip(reports, _best_so_far(cfg, reports), strict=True):
        assert (r["checkpoint_epoch"], r["checkpoint_objective"]) == (epoch, objective)
        assert _weights(saved[r["epoch"]])["epoch"] == epoch
    # an epoch's model.pt is the best epoch's: the same tensors as that epoch's own write
    for r in reports:
        best_epoch = r["checkpoint_epoch"]
        for k, v in _weights(saved[r["epoch"]])["state_dict"].items():
            torch.testing.assert_close(v, _weights(saved[best_epoch])["state_dict"][k], rtol=0, atol=0)


def test_a_zero_budget_writes_only_at_the_last_epoch_the_best_epochs_weights(setup, tmp_path):
    cfg, data = setup
    every, every_saved, _ = _run(cfg, data, Job(checkpoint_budget=math.inf), keep=tmp_path / "every")
    reports, saved, _ = _run(cfg, data, Job(checkpoint_budget=0.0), keep=tmp_path / "last")
    assert sorted(saved) == [EPOCHS] and [("checkpoint_epoch" in r) for r in reports] == [False] * (EPOCHS - 1) + [True]
    best_epoch = reports[-1]["checkpoint_epoch"]
    assert best_epoch == every[-1]["checkpoint_epoch"]
    # kept in memory from its epoch on, written at the last: bit-identical to its own write
    for k, v in _weights(saved[EPOCHS])["state_dict"].items():
        torch.testing.assert_close(v, _weights(every_saved[best_epoch])["state_dict"][k], rtol=0, atol=0)


def test_a_stop_epoch_writes_when_the_best_changed_since_the_last_write(setup, tmp_path):
    """Where the scheduler may stop the trial (an ASHA rung), the best weights reach a checkpoint."""
    cfg, data = setup
    reports, saved, _ = _run(cfg, data, Job(checkpoint_budget=0.0, stop_epochs=(1, 2, 3)), keep=tmp_path)
    best = _best_so_far(cfg, reports)
    expected, last_written = {EPOCHS}, None
    for e in (1, 2, 3):
        if best[e - 1][0] != last_written:
            expected.add(e)
            last_written = best[e - 1][0]
    assert set(saved) == expected and 1 in saved


def test_periodic_epochs_write_even_without_budget(setup, tmp_path):
    cfg, data = setup
    _, saved, _ = _run(cfg, data, Job(checkpoint_every=3, checkpoint_budget=0.0), keep=tmp_path)
    assert sorted(saved) == [3, EPOCHS]
    # under PBT (checkpoint_every) the budget adds no writes: the periodic ones are what a clone needs
    _, saved, _ = _run(cfg, data, Job(checkpoint_every=3, checkpoint_budget=math.inf), keep=tmp_path / "pbt")
    assert sorted(saved) == [3, EPOCHS]


def test_continuing_from_a_checkpoint_after_the_best_epoch_keeps_the_best_weights(setup, tmp_path):
    """A checkpoint written after the best epoch holds that epoch's weights as ``model.pt`` and
    its own epoch's in ``trainer_state.pt``: a continued run trains on from its own epoch, and
    still knows the best epoch's weights and objective."""
    cfg, data = setup
    # the MLP's validation loss at a high learning rate gets worse after a few epochs
    fast = cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"learning_rate": 0.2})})
    whole, saved, model = _run(fast, data, Job(checkpoint_budget=math.inf), keep=tmp_path)
    later = [r["epoch"] for r in whole[:-1] if r["checkpoint_epoch"] < r["epoch"]]
    assert later, [(r["epoch"], r["objective"]) for r in whole]
    at = later[0]
    rest, rest_saved, resumed = _run(
        fast, data, Job(checkpoint_budget=math.inf, resume_from=str(saved[at])), keep=tmp_path / "rest"
    )
    assert [r["epoch"] for r in rest] == list(range(at + 1, EPOCHS + 1))
    for a, b in zip(whole[at:], rest, strict=True):
        for key in ("objective", "train/combined/running_loss", "checkpoint_epoch", "checkpoint_objective"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), key
    for (k, a), b in zip(model.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=k)
    for k, v in _weights(rest_saved[EPOCHS])["state_dict"].items():
        torch.testing.assert_close(v, _weights(saved[EPOCHS])["state_dict"][k], rtol=0, atol=0)


def test_a_pbt_clone_runs_with_its_own_learning_rate(setup, tmp_path):
    cfg, data = setup
    _, saved, _ = _run(cfg, data, Job(checkpoint_every=2), keep=tmp_path)
    faster = cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"learning_rate": 0.05})})
    rest, _, _ = _run(faster, data, Job(resume_from=str(saved[2])))
    assert rest[0]["epoch"] == 3 and rest[0]["effective_learning_rate"] == 0.05


def test_a_retry_seed_offset_is_reported(setup):
    cfg, data = setup
    reports, _, _ = _run(cfg, data, Job(seed_offset=2, epochs=1))
    assert reports[0]["seed"] == cfg.trainer.seed + 2


def test_a_checkpoint_of_another_model_is_a_checkpoint_error(setup, tmp_path):
    cfg, data = setup
    _, saved, _ = _run(cfg, data, Job(checkpoint_every=2), keep=tmp_path)
    wider = cfg.model_copy(update={"combiner": cfg.combiner.model_copy(update={"output_size": 32})})
    with pytest.raises(CheckpointError, match="cannot resume from the checkpoint"):
        _run(wider, data, Job(resume_from=str(saved[2])))
    (saved[2] / TRAINER_STATE_FILE).unlink()
    with pytest.raises(CheckpointError):
        _run(cfg, data, Job(resume_from=str(saved[2])))


def _poisoned(data):
    """``data`` with one training row's first input made NaN: every batch holding it has a NaN loss."""
    name = next(iter(data.inputs))
    x = data.inputs[name].copy()
    x[data.splits["train"][5]] = float("nan")
    return dataclasses.replace(data, inputs={**data.inputs, name: x})


def test_a_nan_loss_fails_the_trial_by_default(setup):
    cfg, data = setup
    with pytest.raises(FloatingPointError, match="training loss is nan at epoch 1"):
        _run(cfg, _poisoned(data), Job())


def test_skip_batch_skips_the_steps_of_non_finite_batches(setup):
    cfg, data = setup
    skip = cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"nan_policy": "skip_batch"})})
    reports, _, model = _run(skip, _poisoned(data), Job())
    assert [r["epoch"] for r in reports] == list(range(1, EPOCHS + 1))
    # one batch per epoch holds the row (batch size 16, 96 rows, drop_last): 6 steps, 5 taken
    assert [r["nonfinite_batches"] for r in reports] == list(range(1, EPOCHS + 1))
    assert reports[-1]["optimizer_steps"] == EPOCHS * 5
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert all(r["objective"] == r["objective"] for r in reports)  # finite, not NaN


def test_a_clone_of_a_final_epoch_checkpoint_reports_its_scores_once(setup, tmp_path):
    cfg, data = setup
    whole, saved, _ = _run(cfg, data, Job(checkpoint_every=EPOCHS), keep=tmp_path)
    rest, _, _ = _run(cfg, data, Job(resume_from=str(saved[EPOCHS])))
    assert len(rest) == 1 and rest[0]["epoch"] == EPOCHS and rest[0]["resumed_from_epoch"] == EPOCHS
    assert rest[0]["objective"] == pytest.approx(whole[-1]["objective"], rel=1e-6)


def test_a_checkpoint_in_the_earlier_unpacked_format_still_resumes(setup, tmp_path):
    """``trainer_state.pt`` written as a plain dict without its own weights (the format before
    the packed one): the run continues from ``model.pt``'s weights."""
    from ludwig_hpo.train.checkpoint import unpack

    cfg, data = setup
    whole, saved, _ = _run(cfg, data, Job(checkpoint_every=2), keep=tmp_path)
    state = unpack(torch.load(saved[2] / TRAINER_STATE_FILE, weights_only=False)["packed"])
    assert state["weights"] is None or whole[1]["checkpoint_epoch"] != 2
    if state["weights"] is not None:  # epoch 2 was not the best: the old format had its weights in model.pt
        torch.save({"state_dict": state["weights"], "epoch": 2}, saved[2] / MODEL_FILE)
    for key in ("weights", "best_epoch"):
        state.pop(key)
    torch.save(state, saved[2] / TRAINER_STATE_FILE)
    rest, _, _ = _run(cfg, data, Job(checkpoint_every=2, resume_from=str(saved[2])))
    assert [r["epoch"] for r in rest] == [3, 4]
    for a, b in zip(whole[2:], rest, strict=True):
        assert a["objective"] == pytest.approx(b["objective"], rel=1e-6, abs=1e-9)
