"""Mixed precision and gradient accumulation in one process (CPU autocast; the CUDA
variants are in tests/gpu)."""

from __future__ import annotations

import math

import pytest
import torch

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.strategy import autocast, effective_learning_rate, grad_scaler

from ..conftest import SWEEPS


def _train(**trainer) -> list[dict]:
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    raw = {
        **loaded.raw,
        "trainer": {**loaded.raw["trainer"], "epochs": 3, "batch_size": 16, **trainer},
        "backend": {"num_workers": 1},
    }
    cfg = SweepConfig.model_validate(raw)
    data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
    reports: list[dict] = []
    train_loop(cfg, data, Job(), lambda m, c: reports.append(m))
    return reports


@pytest.fixture(scope="module")
def runs() -> dict[str, list[dict]]:
    """Reports of each training run (trained once per module: torch sets process-wide
    environment on its first optimizer step, which the per-test hygiene check would flag)."""
    return {
        "bf16": _train(precision="bf16"),
        "fp16": _train(precision="fp16"),
        "plain": _train(),
        "accumulate": _train(gradient_accumulation_steps=4),
    }


@pytest.mark.timeout(120)
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_autocast_training_lowers_the_loss(runs, precision):
    reports = runs[precision]
    losses = [m["train/combined/running_loss"] for m in reports]
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]
    assert math.isfinite(reports[-1]["objective"])


@pytest.mark.timeout(120)
def test_accumulation_counts_optimizer_steps(runs):
    plain, accumulated = runs["plain"], runs["accumulate"]
    steps = plain[0]["optimizer_steps"]
    assert accumulated[0]["optimizer_steps"] == math.ceil(steps / 4)
    assert accumulated[0]["global_batch_size"] == 64


def test_autocast_runs_matmuls_in_the_requested_dtype():
    x = torch.randn(4, 4)
    with autocast(torch.device("cpu"), "bf16"):
        assert (x @ x).dtype == torch.bfloat16
    with autocast(torch.device("cpu"), "fp32"):
        assert (x @ x).dtype == torch.float32
    assert grad_scaler(torch.device("cpu"), "fp16").is_enabled()
    assert not grad_scaler(torch.device("cpu"), "bf16").is_enabled()


@pytest.mark.parametrize(
    ("scaling", "world", "lr"), [("constant", 4, 0.01), ("linear", 2, 0.02), ("linear", 1, 0.01), ("sqrt", 4, 0.02)]
)
def test_effective_learning_rate(scaling, world, lr):
    assert effective_learning_rate(0.01, scaling, world) == pytest.approx(lr)
