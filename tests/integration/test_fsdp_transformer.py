"""FSDP over a transformer model on 2 gloo ranks (torch.multiprocessing, no Ray): each
transformer block is one FSDP unit, and the worker loop trains it with gradient checkpointing
to the same numbers as without. One spawn runs every scenario (process start-up dominates)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from tests.ranks import free_port, spawn_ranks

pytestmark = pytest.mark.timeout(300)


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    from torch.distributed.fsdp import FSDPModule

    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.combiners.transformer import TransformerBlock
    from ludwig_hpo.train.loop import Job, train_loop
    from ludwig_hpo.train.strategy import wrap

    from ..token_data import token_config, token_frame

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        out: dict = {}
        frame = token_frame(rows=160)
        base = {"epochs": 2, "batch_size": 8, "learning_rate": 3e-3}
        cfg = token_config(base, backend={"num_workers": world, "strategy": "fsdp"})
        data = prepare(frame, cfg)
        torch.manual_seed(0)
        sharded = wrap(build_model(cfg, data.meta), "fsdp", torch.device("cpu"), world)
        blocks = [m for m in sharded.modules() if isinstance(m, TransformerBlock)]
        out["blocks_sharded"] = [isinstance(b, FSDPModule) for b in blocks]
        out["inside_sharded"] = [isinstance(m, FSDPModule) for b in blocks for m in b.modules() if m is not b]
        for recompute in (False, True):
            cfg = token_config(
                {**base, "enable_gradient_checkpointing": recompute}, backend={"num_workers": world, "strategy": "fsdp"}
            )
            reports: list[dict] = []
            model = train_loop(cfg, data, Job(), lambda m, c, r=reports: r.append(m))
            out[recompute] = {"reports": reports, "state": {k: v.cpu() for k, v in model.state_dict().items()}}
        torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp_transformer")
    spawn_ranks(_worker, (2, free_port(), str(out)), 2)
    return [torch.load(out / f"rank{r}.pt") for r in range(2)]


def test_each_transformer_block_is_one_fsdp_unit(ranks):
    for r in ranks:
        assert r["blocks_sharded"] == [True, True]
        assert not any(r["inside_sharded"])  # its linear layers and norms are gathered with it


def test_fsdp_with_gradient_checkpointing_trains_to_the_same_numbers(ranks):
    for r in ranks:
        plain, recomputed = r[False], r[True]
        assert [m["epoch"] for m in recomputed["reports"]] == [1, 2]
        for a, b in zip(plain["reports"], recomputed["reports"], strict=True):
            for key in ("train/combined/running_loss", "objective"):
                assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), key
        for k, v in plain["state"].items():
            torch.testing.assert_close(recomputed["state"][k], v, rtol=1e-5, atol=1e-6, msg=k)
    for k, v in ranks[0][True]["state"].items():  # the gathered whole model, the same on both ranks
        torch.testing.assert_close(ranks[1][True]["state"][k], v, rtol=0, atol=0, msg=k)
