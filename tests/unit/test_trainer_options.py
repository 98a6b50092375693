"""The other Ludwig trainer keys: their defaults, what each does to a run in one process, and
the one-line errors of the keys not supported yet."""

from __future__ import annotations

import math

import pytest
import torch

from ludwig_hpo.config.trainer import TrainerConfig
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.train.optim import clip_gradients, make_optimizer
from ludwig_hpo.train.plan import ordered_shard
from ludwig_hpo.train.regularize import regularization_loss

from .trainer_helpers import BATCH, STEPS_PER_EPOCH, config, data, run


def test_ludwigs_defaults():
    t = TrainerConfig()
    assert (t.epochs, t.learning_rate, t.batch_size, t.eval_batch_size, t.early_stop) == (100, 0.001, "auto", None, 5)
    assert (t.validation_field, t.validation_metric, t.evaluate_training_set) == ("combined", "loss", False)
    assert (t.regularization_type, t.regularization_lambda, t.learning_rate_scaling) == ("l2", 0.0, "linear")
    assert t.optimizer.model_dump() == {
        "type": "adam",
        "betas": (0.9, 0.999),
        "eps": 1e-8,
        "weight_decay": 0.0,
        "amsgrad": False,
    }
    assert t.gradient_clipping.model_dump() == {"clipglobalnorm": 0.5, "clipnorm": None, "clipvalue": None}
    assert TrainerConfig.model_validate({"gradient_clipping": None, "learning_rate_scheduler": None}) == t
    assert TrainerConfig.model_validate({"optimizer": {"type": "sgd"}}).optimizer.model_dump() == {
        "type": "sgd",
        "momentum": 0.0,
        "weight_decay": 0.0,
        "dampening": 0.0,
        "nesterov": False,
    }


@pytest.mark.parametrize(
    ("options", "cls"),
    [
        ({"type": "sgd", "momentum": 0.9, "nesterov": True}, torch.optim.SGD),
        ({"type": "adam", "amsgrad": True, "betas": [0.8, 0.99]}, torch.optim.Adam),
        ({"type": "adamw", "weight_decay": 0.01}, torch.optim.AdamW),
        ({"type": "adadelta", "rho": 0.8}, torch.optim.Adadelta),
        ({"type": "adagrad", "lr_decay": 0.1, "initial_accumulator_value": 0.2}, torch.optim.Adagrad),
        ({"type": "adamax"}, torch.optim.Adamax),
        ({"type": "nadam", "momentum_decay": 0.01}, torch.optim.NAdam),
        ({"type": "radam"}, torch.optim.RAdam),
        ({"type": "rmsprop", "alpha": 0.9, "centered": True, "momentum": 0.1}, torch.optim.RMSprop),
        ({"type": "lbfgs", "max_iter": 5, "history_size": 10}, torch.optim.LBFGS),
    ],
)
def test_each_optimizer_gets_its_ludwig_options(options, cls):
    cfg = config({"optimizer": options})
    opt = make_optimizer(cfg, [torch.nn.Parameter(torch.zeros(2))], 0.1)
    assert type(opt) is cls and opt.defaults["lr"] == 0.1
    for k, v in options.items():
        if k != "type":
            assert opt.defaults[k] == (tuple(v) if isinstance(v, list) else v), k


def test_lbfgs_trains_in_the_loop():
    reports, _ = run(config({"epochs": 2, "optimizer": {"type": "lbfgs", "max_iter": 3}}))
    assert [r["optimizer_steps"] for r in reports] == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]
    assert reports[1]["train/combined/running_loss"] < reports[0]["train/combined/running_loss"]


def _refused(trainer: dict) -> str:
    with pytest.raises(ValueError) as e:
        config(trainer)
    return str(e.value)


@pytest.mark.parametrize(
    ("trainer", "words"),
    [
        ({"learning_rate": "auto"}, "learning_rate: auto (Ludwig's learning-rate search) is not supported yet"),
        ({"steps_per_checkpoint": 10}, "steps_per_checkpoint is not supported yet"),
        ({"checkpoints_per_epoch": 2}, "checkpoints_per_epoch is not supported yet"),
        ({"increase_batch_size_on_plateau": 1}, "increase_batch_size_on_plateau is not supported yet"),
        ({"bucketing_field": "x"}, "bucketing_field is not supported yet"),
        ({"compile": True}, "compile is not supported yet"),
        ({"optimizer": {"type": "paged_adamw"}}, "needs bitsandbytes and a GPU, which are not supported yet"),
        ({"learning_rate_scheduler": {"decay": "one_cycle"}}, "decay: one_cycle is not supported yet"),
        ({"learning_rate_scheduler": {"reduce_eval_split": "test"}}, "reduce_eval_split: test is not supported yet"),
        ({"validation_field": "nope"}, "'nope' is not an output feature"),
        ({"validation_metric": "accuracy"}, "'accuracy' is not reported for 'combined'"),
        ({"optimizer": {"type": "adam", "momentum": 0.9}}, "momentum"),
        ({"optimizer": {"type": "lbfgs"}, "gradient_accumulation_steps": 2}, "lbfgs"),
        ({"learning_rate": 0.1, "optimizer": {"type": "adam", "lr": 0.2}}, "the learning rate is set twice"),
    ],
)
def test_keys_not_supported_yet_are_refused_with_one_line(trainer, words):
    assert words in _refused(trainer)


def test_lbfgs_needs_one_worker_and_fsdp_takes_no_regularization():
    with pytest.raises(ValueError, match="lbfgs trains on one worker"):
        config({"optimizer": {"type": "lbfgs"}}, backend={"num_workers": 2})
    with pytest.raises(ValueError, match="regularization_lambda with backend.strategy: fsdp"):
        config({"regularization_lambda": 0.1}, backend={"num_workers": 2, "strategy": "fsdp"})


def test_the_report_logs_the_learning_rate_and_keeps_end_reason_out_of_the_metrics():
    from ludwig_hpo.train.report_keys import END_REASON, LEARNING_RATE, NOT_METRICS

    assert LEARNING_RATE not in NOT_METRICS and END_REASON in NOT_METRICS


def test_the_loader_shows_a_not_supported_key_as_one_located_line(tmp_path):
    from ludwig_hpo.config import load_sweep

    from ..conftest import SWEEPS

    text = (SWEEPS / "breast_cancer_tiny.yaml").read_text().replace("learning_rate: 1.0e-2", "learning_rate: auto")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    line = e.value.one_line()
    assert "\n" not in line and "trainer.learning_rate" in line and "not supported yet" in line


def test_lr_inside_the_optimizer_is_the_trainers_learning_rate():
    t = TrainerConfig.model_validate({"optimizer": {"type": "adam", "lr": 0.02}})
    assert t.learning_rate == 0.02 and "lr" not in t.optimizer.model_dump()


def test_train_steps_stops_at_exactly_that_many_optimizer_steps():
    reports, _ = run(config({"epochs": 50, "train_steps": STEPS_PER_EPOCH + 2}))
    assert [r["optimizer_steps"] for r in reports] == [STEPS_PER_EPOCH, STEPS_PER_EPOCH + 2]
    assert reports[-1]["end_reason"] == "last_epoch"


def test_evaluate_training_set_scores_the_training_split_each_epoch():
    without, _ = run(config({"epochs": 1}))
    assert not any(k.startswith("train/malignant/") for k in without[0])
    reports, _ = run(config({"epochs": 1, "evaluate_training_set": True}))
    assert {"train/malignant/loss", "train/malignant/accuracy", "train/combined/loss"} <= set(reports[0])


@pytest.mark.parametrize("value", [None, 0])
def test_eval_batch_size_null_or_0_is_the_training_batch_size(value):
    reports, _ = run(config({"epochs": 1, "eval_batch_size": value}))
    assert reports[0]["eval_batch_size"] == BATCH


def test_regularization_is_ludwigs_sum_over_every_weight():
    model = torch.nn.Linear(3, 2)
    w = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert regularization_loss(model, "l1", 0.1).item() == pytest.approx(0.1 * float(w.abs().sum()))
    assert regularization_loss(model, "l2", 0.1).item() == pytest.approx(0.1 * float(w.square().sum()))
    both = 0.1 * float(w.abs().sum() + w.square().sum())
    assert regularization_loss(model, "l1_l2", 0.1).item() == pytest.approx(both)
    assert regularization_loss(model, "l2", 0.0) is None and regularization_loss(model, None, 0.1) is None


def test_regularization_shrinks_the_trained_weights():
    norm = {}
    for lam in (0.0, 0.05):
        _, model = run(config({"epochs": 2, "regularization_type": "l1", "regularization_lambda": lam}))
        norm[lam] = sum(p.detach().abs().sum().item() for p in model.parameters())
    assert norm[0.05] < 0.8 * norm[0.0]


def test_gradient_clipping_follows_ludwigs_order():
    p = torch.nn.Parameter(torch.zeros(4))
    p.grad = torch.tensor([3.0, 4.0, 0.0, 0.0])  # norm 5
    from ludwig_hpo.config.optimizers import GradientClippingConfig

    clip_gradients([p], GradientClippingConfig())  # Ludwig's default: global norm 0.5
    assert float(p.grad.norm()) == pytest.approx(0.5)
    p.grad = torch.tensor([3.0, 4.0, 0.0, 0.0])
    clip_gradients([p], GradientClippingConfig(clipglobalnorm=None, clipvalue=1.0))
    assert p.grad.tolist() == [1.0, 1.0, 0.0, 0.0]
    p.grad = torch.tensor([3.0, 4.0, 0.0, 0.0])
    clip_gradients([p], GradientClippingConfig(clipglobalnorm=None))
    assert p.grad.tolist() == [3.0, 4.0, 0.0, 0.0]


def test_gradient_clipping_reaches_the_loop():
    runs = {}
    for clip in ({"clipglobalnorm": None}, {"clipglobalnorm": 1e-4}):
        runs[str(clip)], _ = run(config({"epochs": 1, "learning_rate": 0.05, "gradient_clipping": clip}))
    a, b = (r[0]["train/combined/running_loss"] for r in runs.values())
    assert a != b


def test_should_shuffle_false_keeps_the_split_order():
    import numpy as np

    rows = np.arange(10)
    assert ordered_shard(rows, rank=0, world_size=1).tolist() == list(range(10))
    assert ordered_shard(rows, rank=1, world_size=3).tolist() == [1, 4, 7, 0]
    ordered, _ = run(config({"epochs": 2, "should_shuffle": False}))
    shuffled, _ = run(config({"epochs": 2}))
    # the same seed, so the same initial weights: only the rows' order differs
    assert ordered[-1]["train/combined/running_loss"] != shuffled[-1]["train/combined/running_loss"]


def _precision_used(monkeypatch, device: torch.device) -> list[str]:
    import ludwig_hpo.train.loop as loop

    seen: list[str] = []
    real = loop.grad_scaler

    def spy(dev, precision):
        seen.append(precision)
        return real(dev, precision)

    monkeypatch.setattr(loop, "grad_scaler", spy)
    reports: list[dict] = []
    loop.train_loop(
        config({"epochs": 1, "use_mixed_precision": True}),
        data(),
        loop.Job(),
        lambda m, c: reports.append(m),
        device=device,
    )
    assert math.isfinite(reports[-1]["train/combined/running_loss"])
    return seen


def test_use_mixed_precision_trains_in_fp32_on_a_cpu(monkeypatch):
    assert _precision_used(monkeypatch, torch.device("cpu")) == ["fp32"]


@pytest.mark.gpu
def test_use_mixed_precision_is_fp16_autocast_with_a_scaler_on_a_gpu(monkeypatch):
    assert _precision_used(monkeypatch, torch.device("cuda")) == ["fp16"]


def test_use_mixed_precision_is_fp16_on_a_gpu_and_nothing_on_a_cpu():
    a, _ = run(config({"epochs": 1}))
    b, _ = run(config({"epochs": 1, "use_mixed_precision": True}))
    assert a[0]["objective"] == b[0]["objective"]  # a CPU trains in fp32, as Ludwig does
    assert "precision" in _refused({"use_mixed_precision": True, "precision": "bf16"})
