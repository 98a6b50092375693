"""On CUDA: text and RGB image models with transformer blocks in bf16, with gradient
checkpointing, FSDP's per-block units and (with 2 GPUs) NCCL DDP and FSDP through the worker
loop. Needs torch, pandas, pydantic and transformers, not Ray, Optuna or MLflow:
``tests/gpu/run_all.sh`` on a bare GPU machine.

Models: our ``transformer`` sequence encoder on :mod:`tests.token_data`'s task, a tiny BERT
(``text``, ``bert`` encoder, ``trainable: true``) and a tiny ViT (``image``, ``auto_transformer``)
from :mod:`tests.hf_models`, and an RGB ``stacked_cnn``; images are seeded (H, W, 3) uint8
arrays labelled by brightness.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from tests.ranks import free_port, spawn_ranks

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]

HYPEROPT = {
    "goal": "minimize",
    "metric": "loss",
    "output_feature": "label",
    "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}},
}


def rgb_frame(rows: int = 96, size: int = 32, seed: int = 0) -> pd.DataFrame:
    """(size, size, 3) uint8 images, ``bright`` or ``dark`` by their mean."""
    rng = np.random.default_rng(seed)
    shift = rng.integers(-60, 61, rows)
    images = [np.clip(rng.integers(60, 196, (size, size, 3)) + s, 0, 255).astype(np.uint8) for s in shift]
    return pd.DataFrame({"image": images, "label": ["bright" if s > 0 else "dark" for s in shift]})


def model_case(name: str, trainer: dict[str, Any], backend: dict[str, Any] | None, hf_dirs: dict[str, Path]):
    """(config, prepared data) of one model: ``transformer``, ``bert``, ``vit`` or ``cnn``."""
    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.data import prepare

    from ..token_data import token_config, token_frame

    trainer = {"epochs": 3, "batch_size": 16, "learning_rate": 3e-3, **trainer}
    if name == "transformer":
        cfg = token_config(trainer, backend=backend)
        return cfg, prepare(token_frame(rows=160), cfg)
    if name == "bert":
        feature = {
            "name": "tokens",
            "type": "text",
            "preprocessing": {"max_sequence_length": 16},
            "encoder": {
                "type": "bert",
                "pretrained_model_name_or_path": str(hf_dirs["bert"]),
                "trainable": True,
                "reduce_output": "mean",
            },
        }
        frame = token_frame(rows=160)
    else:
        encoder = (
            {"type": "auto_transformer", "pretrained_model_name_or_path": str(hf_dirs["vit"]), "trainable": True}
            if name == "vit"
            else {"type": "stacked_cnn", "num_conv_layers": 2, "out_channels": 8}
        )
        feature = {
            "name": "image",
            "type": "image",
            "preprocessing": {"num_channels": 3, "height": 32, "width": 32},
            "encoder": encoder,
        }
        frame = rgb_frame()
    raw = {
        "name": f"gpu-{name}",
        "dataset": {"source": "rows.csv"},
        "input_features": [feature],
        "output_features": [{"name": "label", "type": "category"}],
        "trainer": trainer,
        "hyperopt": HYPEROPT,
    }
    if backend:
        raw["backend"] = backend
    cfg = SweepConfig.model_validate(raw)
    return cfg, prepare(frame, cfg)


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("transformers")
    from ..hf_models import save_tiny_bert, save_tiny_vit
    from ..token_data import WORDS

    root = tmp_path_factory.mktemp("hf")
    sentences = [" ".join(WORDS[i : i + 6]) for i in range(0, len(WORDS), 3)]
    return {"bert": save_tiny_bert(root / "bert", sentences), "vit": save_tiny_vit(root / "vit")}


def _train(cfg, data, device: torch.device) -> tuple[list[dict], torch.nn.Module]:
    from ludwig_hpo.train.loop import Job, train_loop

    reports: list[dict] = []
    model = train_loop(cfg, data, Job(), lambda m, c: reports.append(m), device=device)
    return reports, model


MODELS = ["transformer", "bert", "vit", "cnn"]


@pytest.mark.parametrize("name", MODELS)
def test_bf16_training_on_one_gpu(name, hf_dirs):
    recompute = name != "cnn"  # a CNN has no transformer block (it refuses the key)
    cfg, data = model_case(name, {"precision": "bf16", "enable_gradient_checkpointing": recompute}, None, hf_dirs)
    reports, model = _train(cfg, data, torch.device("cuda", 0))
    losses = [m["train/combined/running_loss"] for m in reports]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses
    assert all(p.dtype == torch.float32 and p.is_cuda for p in model.parameters())  # autocast, not a cast model


@pytest.mark.parametrize("name", ["transformer", "bert", "vit"])
def test_gradient_checkpointing_in_bf16_gives_the_same_gradients_with_less_memory(name, hf_dirs):
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.losses import OutputLosses
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.recompute import enable_gradient_checkpointing
    from ludwig_hpo.train.step import combined_loss
    from ludwig_hpo.train.strategy import autocast

    device = torch.device("cuda", 0)
    cfg, data = model_case(name, {"precision": "bf16"}, None, hf_dirs)
    dd = DeviceData(data, device)
    x, y = dd.batch(torch.arange(64, device=device))
    losses = OutputLosses(cfg.output_features, data.meta)
    grads, peaks = [], []
    for recompute in (False, True):
        torch.manual_seed(0)
        model = build_model(cfg, data.meta).to(device).train()
        if recompute:
            assert enable_gradient_checkpointing(model) >= 2
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        torch.manual_seed(1)
        with autocast(device, "bf16"):
            loss = combined_loss(cfg, model(x), y, losses)
        loss.backward()
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated(device) - base)
        grads.append({k: p.grad.float().clone() for k, p in model.named_parameters() if p.grad is not None})
    assert peaks[1] < peaks[0], peaks  # activations inside the blocks were not kept
    for k in grads[0]:
        torch.testing.assert_close(grads[1][k], grads[0][k], rtol=2e-2, atol=2e-3, msg=k)


def _fsdp_one_rank(rank: int, port: int, names: list[str], dirs: dict[str, str], out: str) -> None:
    """One NCCL rank: each model sharded by the product's units (``fsdp_units``), trained a few
    bf16 steps with gradient checkpointing, against the same steps unsharded."""
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule, fully_shard

    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.losses import OutputLosses
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.recompute import enable_gradient_checkpointing
    from ludwig_hpo.train.step import combined_loss
    from ludwig_hpo.train.strategy import autocast, fsdp_units, full_state_dict, transformer_blocks

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    results: dict[str, Any] = {}
    try:
        for name in names:
            cfg, data = model_case(name, {"precision": "bf16"}, None, {k: Path(v) for k, v in dirs.items()})
            dd = DeviceData(data, device)
            losses = OutputLosses(cfg.output_features, data.meta)
            states = []
            for shard in (False, True):
                torch.manual_seed(0)
                model = build_model(cfg, data.meta).to(device).train()
                enable_gradient_checkpointing(model)
                if shard:
                    for unit in fsdp_units(model):
                        fully_shard(unit)
                    fully_shard(model)
                    results[f"{name}/blocks_sharded"] = all(
                        isinstance(b, FSDPModule) for b in transformer_blocks(model)
                    )
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
                torch.manual_seed(1)
                for step in range(3):
                    x, y = dd.batch(torch.arange(step * 16, step * 16 + 16, device=device))
                    with autocast(device, "bf16"):
                        loss = combined_loss(cfg, model(x), y, losses)
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                states.append(full_state_dict(model))
            results[name] = max(float((states[1][k] - v).abs().max()) for k, v in states[0].items())
        torch.save(results, os.path.join(out, "fsdp.pt"))
    finally:
        dist.destroy_process_group()


def test_fsdp_units_with_checkpointing_in_bf16_train_as_the_unsharded_model(tmp_path, hf_dirs):
    names = ["transformer", "bert", "vit"]
    dirs = {k: str(v) for k, v in hf_dirs.items()}
    spawn_ranks(_fsdp_one_rank, (free_port(), names, dirs, str(tmp_path)), 1)
    results = torch.load(tmp_path / "fsdp.pt")
    for name in names:
        assert results[f"{name}/blocks_sharded"], name
        assert results[name] < 1e-2, (name, results[name])


def _loop_rank(rank: int, world: int, port: int, name: str, strategy: str, dirs: dict[str, str], out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    try:
        trainer = {"precision": "bf16", "enable_gradient_checkpointing": name != "cnn"}
        backend = {"num_workers": world, "strategy": strategy}
        cfg, data = model_case(name, trainer, backend, {k: Path(v) for k, v in dirs.items()})
        reports, model = _train(cfg, data, device)
        torch.save(
            {"reports": reports, "state": {k: v.cpu() for k, v in model.state_dict().items()}},
            os.path.join(out, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
@pytest.mark.parametrize("name", MODELS)
def test_nccl_two_ranks_bf16(tmp_path, name, strategy, hf_dirs):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs for 2 NCCL ranks")
    dirs = {k: str(v) for k, v in hf_dirs.items()}
    spawn_ranks(_loop_rank, (2, free_port(), name, strategy, dirs, str(tmp_path)), 2)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    for k in r0["state"]:
        torch.testing.assert_close(r0["state"][k], r1["state"][k], rtol=0, atol=0, msg=k)
    losses = [m["train/combined/running_loss"] for m in r0["reports"]]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses
    assert r0["reports"][-1]["objective"] == r1["reports"][-1]["objective"]
