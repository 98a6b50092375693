"""On CUDA: bf16/fp16 autocast training (fp16 with a gradient scaler) in one process, and
2-rank NCCL DDP in every precision (needs 2 GPUs). Needs only torch, pandas and
scikit-learn, not Ray, Optuna or MLflow: ``python -m pytest tests/gpu`` on a bare GPU machine."""

from __future__ import annotations

import math
import os

import pytest
import torch

from tests.ranks import free_port, spawn_ranks

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]

PRECISIONS = ["fp32", "bf16", "fp16"]


def _config(precision: str, num_workers: int):
    from ludwig_hpo.config.schema import SweepConfig

    return SweepConfig.model_validate(
        {
            "name": "gpu-precision",
            "dataset": {"source": "sklearn:breast_cancer"},
            "input_features": [
                {"name": n, "type": "number"}
                for n in ("mean_radius", "mean_texture", "mean_perimeter", "mean_area", "mean_smoothness")
            ],
            "output_features": [{"name": "malignant", "type": "binary"}],
            "combiner": {"type": "concat", "num_fc_layers": 2, "output_size": 64},
            "trainer": {"epochs": 4, "batch_size": 16, "learning_rate": 3e-3, "precision": precision},
            "backend": {"num_workers": num_workers},
            "hyperopt": {
                "goal": "minimize",
                "metric": "loss",
                "output_feature": "malignant",
                "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}},
            },
        }
    )


def _train(precision: str, num_workers: int, device: torch.device) -> tuple[list[dict], torch.nn.Module]:
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.train.loop import Job, train_loop

    cfg = _config(precision, num_workers)
    data = prepare(load_dataframe(cfg.dataset.source, None), cfg)
    reports: list[dict] = []
    model = train_loop(cfg, data, Job(), lambda m, c: reports.append(m), device=device)
    return reports, model


@pytest.mark.parametrize("precision", PRECISIONS)
def test_autocast_training_on_one_gpu(precision):
    reports, model = _train(precision, 1, torch.device("cuda", 0))
    losses = [m["train/combined/running_loss"] for m in reports]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses
    assert all(p.dtype == torch.float32 and p.is_cuda for p in model.parameters())  # autocast, not a cast model


def test_cuda_autocast_dtypes_and_scaler():
    from ludwig_hpo.train.strategy import autocast, grad_scaler

    x = torch.randn(8, 8, device="cuda")
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
        with autocast(x.device, precision):
            assert (x @ x).dtype == dtype
    assert grad_scaler(x.device, "fp16").is_enabled() and not grad_scaler(x.device, "bf16").is_enabled()


def _rank(rank: int, world: int, port: int, precision: str, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    try:
        reports, model = _train(precision, world, torch.device("cuda", rank))
        torch.save(
            {"reports": reports, "state": {k: v.cpu() for k, v in model.state_dict().items()}},
            os.path.join(out, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_nccl_ddp_in_every_precision(tmp_path, precision):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs for 2 NCCL ranks")
    spawn_ranks(_rank, (2, free_port(), precision, str(tmp_path)), 2)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    for k in r0["state"]:
        torch.testing.assert_close(r0["state"][k], r1["state"][k], rtol=0, atol=0)
    losses = [m["train/combined/running_loss"] for m in r0["reports"]]
    assert losses[-1] < losses[0], losses
    assert r0["reports"][-1]["objective"] == r1["reports"][-1]["objective"]
