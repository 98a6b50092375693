"""``trainer.learning_rate_scheduler``: the rate per optimizer step is Ludwig's (its torch
schedulers, rebuilt here as Ludwig builds them), the loop applies it per step and reports it
per epoch, plateaus reduce it, and a resumed trial continues the same schedule."""

from __future__ import annotations

import math
import shutil

import pytest
import torch
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts, LambdaLR, SequentialLR

from ludwig_hpo.config.trainer import LRSchedulerConfig
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.lr_schedule import LearningRateSchedule
from ludwig_hpo.train.report_keys import LEARNING_RATE, RUNNING_LOSS

from .trainer_helpers import STEPS_PER_EPOCH, config, data, run


def _ludwig_rates(c: LRSchedulerConfig, base: float, per_epoch: int, total: int, steps: int) -> list[float]:
    """The rate of each of the first ``steps`` steps as Ludwig's LRScheduler sets it: a LambdaLR
    warmup and the decay scheduler in a SequentialLR, stepped once per optimizer step."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
    warmup = max(c.warmup_fraction * total, c.warmup_evaluations * per_epoch)
    scheds: list = []
    if warmup > 0:
        scheds.append(LambdaLR(opt, lambda s: s / max(1, warmup)))
    if c.decay == "cosine":
        scheds.append(CosineAnnealingWarmRestarts(opt, T_0=c.t_0 or per_epoch, T_mult=c.t_mult, eta_min=c.eta_min))
    elif c.decay == "linear":
        scheds.append(LambdaLR(opt, lambda s: max(0.0, (total - warmup - s) / max(1, total - warmup))))
    elif c.decay == "exponential":

        def expo(s):
            e = 1 + s / c.decay_steps
            return c.decay_rate ** (math.ceil(e) if c.staircase else e)

        scheds.append(LambdaLR(opt, expo))
    else:
        scheds.append(LambdaLR(opt, lambda s: 1.0))
    sched = scheds[0] if len(scheds) == 1 else SequentialLR(opt, scheds, milestones=[warmup])
    rates = []
    for _ in range(steps):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return rates


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"decay": "linear"},
        {"decay": "linear", "warmup_fraction": 0.2},
        {"decay": "linear", "warmup_fraction": 0.05},
        {"decay": "cosine", "t_0": 4, "warmup_fraction": 0.07},
        {"warmup_evaluations": 0.25},
        {"decay": "exponential", "decay_steps": 7, "decay_rate": 0.8},
        {"decay": "exponential", "decay_steps": 7, "decay_rate": 0.8, "staircase": True, "warmup_evaluations": 1},
        {"decay": "cosine", "eta_min": 0.001},
        {"decay": "cosine", "t_0": 4, "t_mult": 2},
        {"decay": "cosine", "t_0": 3, "warmup_evaluations": 2},
    ],
)
def test_the_rate_of_each_step_is_ludwigs(options):
    c = LRSchedulerConfig(**options)
    per_epoch, total = 10, 50
    sched = LearningRateSchedule(c, 0.1, per_epoch, total)
    mine = [sched.lr_at(s) for s in range(total)]
    assert mine == pytest.approx(_ludwig_rates(c, 0.1, per_epoch, total, total), rel=1e-9, abs=1e-12)


def test_plateaus_reduce_the_rate_at_most_reduce_on_plateau_times():
    c = LRSchedulerConfig(reduce_on_plateau=2, reduce_on_plateau_patience=1, reduce_on_plateau_rate=0.5)
    sched = LearningRateSchedule(c, 1.0, 10, 100)
    reduced = [sched.evaluation(v) for v in (1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5)]
    # torch's ReduceLROnPlateau: a reduction after more than `patience` evaluations without improvement
    assert reduced == [False, False, False, True, False, True, False, False]
    assert sched.lr_at(5) == pytest.approx(0.25) and sched.plateau.reductions == 2
    maximize = LearningRateSchedule(c, 1.0, 10, 100, larger_is_better=True)
    assert [maximize.evaluation(v) for v in (0.5, 0.9, 0.9, 0.9)] == [False, False, False, True]


def test_the_loop_applies_the_schedule_per_step_and_reports_the_rate_per_epoch():
    cfg = config({"epochs": 4, "learning_rate_scheduler": {"decay": "linear", "warmup_evaluations": 1}})
    reports, _ = run(cfg)
    total = 4 * STEPS_PER_EPOCH
    expected = _ludwig_rates(cfg.trainer.learning_rate_scheduler, 0.01, STEPS_PER_EPOCH, total, total)
    assert [r["optimizer_steps"] for r in reports] == [STEPS_PER_EPOCH * e for e in (1, 2, 3, 4)]
    # each epoch reports the rate of its last optimizer step
    assert [r[LEARNING_RATE] for r in reports] == pytest.approx(
        [expected[e * STEPS_PER_EPOCH - 1] for e in (1, 2, 3, 4)]
    )
    assert all(r["effective_learning_rate"] == 0.01 for r in reports)


def test_the_rate_is_the_one_the_optimizer_steps_with():
    """SGD without momentum moves each weight by exactly ``-lr x gradient``: with a warmup the
    first step's rate is 0 (Ludwig's warmup starts at 0), so one step leaves the weights as built."""
    cfg = config(
        {
            "epochs": 1,
            "train_steps": 1,
            "optimizer": {"type": "sgd"},
            "learning_rate_scheduler": {"warmup_evaluations": 1},
            "gradient_clipping": {"clipglobalnorm": None},
        }
    )
    torch.manual_seed(cfg.trainer.seed)
    from ludwig_hpo.model import build_model

    fresh = build_model(cfg, data().meta)
    reports, model = run(cfg)
    assert reports[-1]["optimizer_steps"] == 1 and reports[-1][LEARNING_RATE] == 0.0
    for (k, a), b in zip(fresh.state_dict().items(), model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=k)


def test_reduce_on_plateau_in_the_loop_follows_the_watched_running_loss():
    cfg = config(
        {
            "epochs": 6,
            "learning_rate": 0.05,
            "learning_rate_scheduler": {"reduce_on_plateau": 3, "reduce_on_plateau_patience": 0},
        }
    )
    reports, _ = run(cfg)
    check = LearningRateSchedule(cfg.trainer.learning_rate_scheduler, 0.05, STEPS_PER_EPOCH, 6 * STEPS_PER_EPOCH)
    rates = []
    for r in reports:  # the reported rate is the one in force during the epoch, before its evaluation
        rates.append(check.lr_at(0))
        check.evaluation(r[RUNNING_LOSS])
    assert [r[LEARNING_RATE] for r in reports] == pytest.approx(rates)


def test_a_resumed_trial_continues_the_schedule_and_its_plateau_counters(tmp_path):
    cfg = config(
        {
            "epochs": 4,
            "learning_rate_scheduler": {
                "decay": "cosine",
                "t_0": 5,
                "reduce_on_plateau": 2,
                "reduce_on_plateau_patience": 0,
                "reduce_eval_split": "validation",
            },
        }
    )
    saved = {}

    def keep(metrics, ckpt):
        whole.append(dict(metrics))
        if ckpt is not None:
            saved[metrics["epoch"]] = shutil.copytree(ckpt, tmp_path / f"e{metrics['epoch']}")

    whole: list[dict] = []
    train_loop(cfg, data(), Job(checkpoint_every=2), keep)
    rest: list[dict] = []
    train_loop(cfg, data(), Job(resume_from=str(saved[2])), lambda m, c: rest.append(dict(m)))
    assert [r["epoch"] for r in rest] == [3, 4]
    for a, b in zip(whole[2:], rest, strict=True):
        for key in (LEARNING_RATE, "objective", "optimizer_steps"):
            assert a[key] == pytest.approx(b[key], rel=1e-6), key


def test_what_the_plateau_reduction_watches():
    from ludwig_hpo.train.watch import watched_keys

    def plateau(trainer, kind="search", split="validation"):
        w = watched_keys(config(trainer), kind, split)
        return w.plateau_key, w.plateau_larger, w.score_train

    on = {"reduce_on_plateau": 1}
    assert plateau({"learning_rate_scheduler": on}) == (RUNNING_LOSS, False, False)
    assert plateau({"learning_rate_scheduler": on, "evaluate_training_set": True}) == (
        "train/combined/loss",
        False,
        True,
    )
    accuracy = {**on, "reduce_eval_metric": "accuracy"}
    assert plateau({"learning_rate_scheduler": accuracy, "validation_field": "malignant"}) == (
        "train/malignant/accuracy",
        True,
        True,  # the training split is scored for it
    )
    validation = {**on, "reduce_eval_split": "validation"}
    assert plateau({"learning_rate_scheduler": validation}) == ("validation/combined/loss", False, False)
    # a test run scores no validation split: its rate does not follow validation plateaus
    assert plateau({"learning_rate_scheduler": validation}, "test", "test") == (None, False, False)
    assert plateau({}) == (None, False, False)
