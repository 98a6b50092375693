"""The worker loop under real DDP (2 gloo processes, torch.multiprocessing, no Ray) with a
pretrained image encoder on a slice of the shipped colour icons: a tiny transformers ViT read
from a saved folder (``_vit_legacy``, the path a user's ``pretrained_model`` takes) on every
rank; both ranks end with the same weights and the training loss falls."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from tests.ranks import free_port, spawn_ranks

from ..conftest import SWEEPS

#: Rows per icon context in the slice.
PER_CONTEXT = 12


def _worker(rank: int, port: int, out_dir: str, encoder: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        import pandas as pd
        import yaml

        from ludwig_hpo.config.schema import SweepConfig
        from ludwig_hpo.data import prepare
        from ludwig_hpo.train.loop import Job, train_loop

        raw = yaml.safe_load((SWEEPS / "images_rgb.yaml").read_text())
        raw["input_features"][0]["encoder"] = encoder
        raw["input_features"][0].pop("augmentation")
        raw["trainer"].update(epochs=3, batch_size=8, learning_rate=3.0e-3)
        raw["hyperopt"]["scheduler"] = {"type": "fifo"}
        cfg = SweepConfig.model_validate(raw)
        df = pd.read_csv(SWEEPS / "data" / "icons_rgb.csv").groupby("context").head(PER_CONTEXT)
        data = prepare(df.reset_index(drop=True), cfg, data_dir=SWEEPS / "data")
        reports: list[dict] = []
        model = train_loop(cfg, data, Job(), lambda m, c: reports.append(m), device=torch.device("cpu"))
        torch.save(
            {"state": {k: v.cpu() for k, v in model.state_dict().items()}, "reports": reports},
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


def _run(tmp_path, encoder: dict) -> list[dict]:
    spawn_ranks(_worker, (free_port(), str(tmp_path), encoder), 2)
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]


@pytest.mark.timeout(240)
def test_a_pretrained_vit_trains_under_ddp(tmp_path, tiny_vit_dir):
    r0, r1 = _run(tmp_path, {"type": "_vit_legacy", "pretrained_model": str(tiny_vit_dir)})
    assert r0["state"].keys() == r1["state"].keys()
    for k in r0["state"]:
        torch.testing.assert_close(r0["state"][k], r1["state"][k], rtol=0, atol=0, msg=f"rank weights differ: {k}")
    losses = [m["train/combined/running_loss"] for m in r0["reports"]]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert any(k.endswith(".model.layers.1.mlp.fc2.weight") for k in r0["state"])
