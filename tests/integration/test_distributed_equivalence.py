"""Distributed training is the same training: 2 gloo ranks (torch.multiprocessing, no Ray)
against one process on the same samples.

One spawn of 2 ranks runs every scenario (process start-up dominates); the single-process
references run in the test process. Dropout is off and the optimizer is plain SGD, so the
only differences are floating-point summation order.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
import torch.distributed as dist

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.model import build_model
from ludwig_hpo.train.data import DeviceData
from ludwig_hpo.train.evaluate import evaluate
from ludwig_hpo.train.loop import Job, train_loop
from tests.ranks import free_port, spawn_ranks

from ..conftest import SWEEPS

TRAIN_ROWS = 32  # one optimizer step per epoch in every scenario below
VALIDATION_ROWS = 41  # odd: the ranks score 21 and 20 rows

# name -> trainer overrides of the 2-rank run, trainer overrides of the 1-process reference
SCENARIOS = {
    # global batch 32 = 2 workers x 16 vs one worker x 32
    "ddp_step": ({"batch_size": 16}, {"batch_size": 32}),
    # 2 workers x 2 accumulated batches of 8 (gradients synchronized once) vs one batch of 32
    "ddp_accumulate": ({"batch_size": 8, "gradient_accumulation_steps": 2}, {"batch_size": 32}),
    # linear scaling: 0.05 x 2 workers trains like 0.1 in one process
    "ddp_linear_lr": (
        {"batch_size": 16, "learning_rate": 0.05, "learning_rate_scaling": "linear"},
        {"batch_size": 32, "learning_rate": 0.1},
    ),
    # parameters sharded across the 2 ranks
    "fsdp_step": ({"batch_size": 16}, {"batch_size": 32}),
    # clipping to a global norm (small enough to clip every step) of the all-reduced or sharded gradients
    "ddp_clipped": (
        {"batch_size": 16, "gradient_clipping": {"clipglobalnorm": 0.01}},
        {"batch_size": 32, "gradient_clipping": {"clipglobalnorm": 0.01}},
    ),
    "fsdp_clipped": (
        {"batch_size": 16, "gradient_clipping": {"clipglobalnorm": 0.01}},
        {"batch_size": 32, "gradient_clipping": {"clipglobalnorm": 0.01}},
    ),
}
EPOCHS = 3
BASE_TRAINER = {
    "epochs": EPOCHS,
    "learning_rate": 0.1,
    "optimizer": {"type": "sgd", "momentum": 0.0},
    "eval_batch_size": 8,
    "learning_rate_scaling": "constant",  # the cases that scale say so (Ludwig's default is linear)
    "gradient_clipping": {"clipglobalnorm": None},
}


def _config(trainer: dict, strategy: str = "ddp", num_workers: int = 2) -> tuple[SweepConfig, object]:
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    raw = {
        **loaded.raw,
        "trainer": {**BASE_TRAINER, **trainer},
        "combiner": {"type": "concat", "num_fc_layers": 2, "output_size": 16, "dropout": 0.0},
        "backend": {"num_workers": num_workers, "strategy": strategy},
    }
    return SweepConfig.model_validate(raw), loaded


def _data(cfg: SweepConfig, loaded):
    data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
    return dataclasses.replace(
        data,
        splits={
            **data.splits,
            "train": data.splits["train"][:TRAIN_ROWS],
            "validation": data.splits["validation"][:VALIDATION_ROWS],
        },
    )


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = {}
        for name, (distributed, _) in SCENARIOS.items():
            cfg, loaded = _config(distributed, strategy="fsdp" if name.startswith("fsdp") else "ddp")
            reports: list[dict] = []
            model = train_loop(cfg, _data(cfg, loaded), Job(), lambda m, c, out=reports: out.append(m))
            results[name] = {"state": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "reports": reports}
        # a NaN in one training row: only the rank whose batch holds it sees a NaN loss, yet
        # both skip that step (its gradients were all-reduced) and stay identical
        cfg, loaded = _config({"batch_size": 16, "nan_policy": "skip_batch"})
        data = _data(cfg, loaded)
        name = next(iter(data.inputs))
        poisoned = data.inputs[name].copy()
        poisoned[data.splits["train"][3]] = float("nan")
        data = dataclasses.replace(data, inputs={**data.inputs, name: poisoned})
        reports = []
        model = train_loop(cfg, data, Job(), lambda m, c, out=reports: out.append(m))
        results["skip_nan"] = {
            "state": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "reports": reports,
        }
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[dict, dict, dict]:
    """(rank 0 results, rank 1 results, single-process references) per scenario."""
    out = tmp_path_factory.mktemp("ranks")
    spawn_ranks(_worker, (2, free_port(), str(out)), 2)
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
    single = {}
    for name, (_, reference) in SCENARIOS.items():
        cfg, loaded = _config(reference, num_workers=1)
        reports: list[dict] = []
        model = train_loop(cfg, _data(cfg, loaded), Job(), lambda m, c, out=reports: out.append(m))
        single[name] = {"state": model.state_dict(), "reports": reports}
    return ranks[0], ranks[1], single


def _max_abs_diff(a: dict, b: dict) -> float:
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_two_workers_train_like_one_worker_on_the_same_samples(runs, name):
    r0, r1, single = runs
    assert _max_abs_diff(r0[name]["state"], r1[name]["state"]) == 0.0, "ranks hold different weights"
    diff = _max_abs_diff(r0[name]["state"], single[name]["state"])
    print(f"{name}: max |w_2workers - w_1worker| after {EPOCHS} steps = {diff:.3g}")
    assert diff < 1e-5
    assert [m["optimizer_steps"] for m in r0[name]["reports"]] == list(range(1, EPOCHS + 1))
    # and the weights moved: the comparison is not between two untrained models
    cfg, loaded = _config({})
    torch.manual_seed(cfg.trainer.seed)
    init = build_model(cfg, _data(cfg, loaded).meta).state_dict()
    assert _max_abs_diff(init, single[name]["state"]) > 1e-3
    for a, b in zip(r0[name]["reports"], single[name]["reports"], strict=True):
        assert a["train/combined/running_loss"] == pytest.approx(b["train/combined/running_loss"], rel=1e-5)


@pytest.mark.timeout(300)
def test_linear_scaling_doubles_the_reported_learning_rate_at_two_workers(runs):
    r0, _, single = runs
    assert r0["ddp_linear_lr"]["reports"][0]["effective_learning_rate"] == pytest.approx(0.1)
    assert r0["ddp_step"]["reports"][0]["effective_learning_rate"] == pytest.approx(0.1)
    assert single["ddp_linear_lr"]["reports"][0]["effective_learning_rate"] == pytest.approx(0.1)
    assert r0["ddp_accumulate"]["reports"][0]["global_batch_size"] == 32


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["ddp_step", "fsdp_step"])
def test_validation_metrics_count_each_row_once_on_an_odd_sized_split(runs, name):
    r0, r1, _ = runs
    cfg, loaded = _config({"batch_size": 16})
    data = _data(cfg, loaded)
    model = build_model(cfg, data.meta)
    model.load_state_dict(r0[name]["state"])
    alone = evaluate(model, cfg, DeviceData(data, torch.device("cpu")), data.splits["validation"], "validation", 8)
    reported = r0[name]["reports"][-1]
    assert len(data.splits["validation"]) == VALIDATION_ROWS
    for key, value in alone.items():
        assert reported[key] == pytest.approx(value, rel=1e-6, abs=1e-9), (
            key
        )  # float32 batch sums; a duplicated row would move it ~1/41
        assert r1[name]["reports"][-1][key] == reported[key]


@pytest.mark.timeout(300)
def test_a_nan_batch_on_one_rank_is_skipped_on_both(runs):
    r0, r1, _ = runs
    assert _max_abs_diff(r0["skip_nan"]["state"], r1["skip_nan"]["state"]) == 0.0
    assert all(torch.isfinite(v).all() for v in r0["skip_nan"]["state"].values())
    reports = r0["skip_nan"]["reports"]
    # one step per epoch (32 rows, global batch 32) and it always holds the NaN row: no step taken
    assert [r["optimizer_steps"] for r in reports] == [0] * EPOCHS
    assert [r["nonfinite_batches"] for r in reports] == list(range(1, EPOCHS + 1))
