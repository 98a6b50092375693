"""The worker loop under real DDP: 2 gloo processes (torch.multiprocessing, no Ray), as
Ray Train runs it, and the same loop on CUDA/NCCL where a GPU is present."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.train.loop import Job, train_loop
from tests.ranks import free_port, spawn_ranks

from ..conftest import SWEEPS


def _worker(
    rank: int, world: int, port: int, backend: str, out_dir: str, batch_size, oom_rank1_from=None, strategy: str = "ddp"
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world)
    if oom_rank1_from and rank == 1:
        # Only this rank "runs out of memory" from that batch size on, mid-step (after the
        # forward pass): the other rank must not be left waiting in a collective.
        from ludwig_hpo.train import probe

        real = probe._timed

        def fake(step, dd, rows, rng, size, warmup, steps, *rest):
            if size >= oom_rank1_from:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (fake, rank 1 only)")
            return real(step, dd, rows, rng, size, warmup, steps, *rest)

        probe._timed = fake
    try:
        loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
        raw = {
            **loaded.raw,
            "trainer": {**loaded.raw["trainer"], "epochs": 3, "batch_size": batch_size},
            "backend": {**loaded.raw["backend"], "strategy": strategy},
        }
        from ludwig_hpo.config.schema import SweepConfig

        cfg = SweepConfig.model_validate(raw)
        data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
        reports = []
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if backend == "nccl":
            torch.cuda.set_device(device)
        model = train_loop(cfg, data, Job(), lambda m, c: reports.append(m), device=device)
        torch.save(
            {"state": {k: v.cpu() for k, v in model.state_dict().items()}, "reports": reports},
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


def _run(tmp_path, backend: str, batch_size="auto", oom_rank1_from=None, strategy="ddp") -> list[dict]:
    spawn_ranks(_worker, (2, free_port(), backend, str(tmp_path), batch_size, oom_rank1_from, strategy), 2)
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_ddp_ranks_hold_identical_weights_and_agree_on_metrics(tmp_path, device):
    if device == "cuda" and torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs for 2 NCCL ranks")
    r0, r1 = _run(tmp_path, "gloo" if device == "cpu" else "nccl")
    assert r0["state"].keys() == r1["state"].keys()
    for k in r0["state"]:
        torch.testing.assert_close(r0["state"][k], r1["state"][k], rtol=0, atol=0, msg=f"rank weights differ: {k}")
    # Reduced metrics are identical on both ranks, every epoch; the batch size was agreed.
    assert [m["epoch"] for m in r0["reports"]] == [1, 2, 3]
    for a, b in zip(r0["reports"], r1["reports"], strict=True):
        for key in ("objective", "validation/malignant/loss", "train/combined/running_loss", "batch_size"):
            assert a[key] == b[key], key
    assert r0["reports"][0]["world_size"] == 2
    assert r0["reports"][0]["global_batch_size"] == 2 * r0["reports"][0]["batch_size"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_training_lowers_the_loss(tmp_path, strategy):
    r0, r1 = _run(tmp_path, "gloo", batch_size=16, strategy=strategy)
    losses = [m["train/combined/running_loss"] for m in r0["reports"]]
    assert losses[-1] < losses[0]
    for k in r0["state"]:  # FSDP: the gathered whole model, the same on both ranks
        torch.testing.assert_close(r0["state"][k], r1["state"][k], rtol=0, atol=0)


@pytest.mark.timeout(240)
def test_when_one_rank_runs_out_of_memory_first_both_ranks_choose_the_same_smaller_size(tmp_path):
    r0, r1 = _run(tmp_path, "gloo", oom_rank1_from=8)
    b0, b1 = r0["reports"][0]["batch_size"], r1["reports"][0]["batch_size"]
    assert b0 == b1 and b0 < 8
    assert r0["reports"][0]["batch_size_tried"] == r1["reports"][0]["batch_size_tried"]
    assert "8:oom" in r0["reports"][0]["batch_size_tried"]
    assert [m["epoch"] for m in r0["reports"]] == [1, 2, 3]  # and training went on without a deadlock
