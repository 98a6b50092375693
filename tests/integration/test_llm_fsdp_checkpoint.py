"""An FSDP llm trial's checkpoints on 2 gloo ranks (torch.multiprocessing, no Ray): the gathered
checkpoint holds the adapter only, under the same names as a one-process trial's, and a trial
resumed from it (the base loaded again, the adapter and its moments loaded into the shards)
reports what the uninterrupted trial reported. One spawn runs both runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.distributed as dist

from tests.llm_configs import checkpointed_llm_raw
from tests.ranks import free_port, spawn_ranks

pytestmark = pytest.mark.timeout(600)

pytest.importorskip("peft")

ROWS = pd.DataFrame(
    {
        "lemma": [f"word{i}" for i in range(24)],
        "pos": ["noun"] * 24,
        "gloss": [f"the meaning of word {i}" for i in range(24)],
    }
)
KEYS = ("objective", "train/combined/running_loss", "validation/gloss/token_accuracy", "optimizer_steps")


def _raw(base: str, strategy: str, world: int) -> dict:
    return checkpointed_llm_raw(base, name="llm-fsdp", backend={"num_workers": world, "strategy": strategy})


def _worker(rank: int, world: int, port: int, base: str, out_dir: str) -> None:
    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.data import prepare
    from ludwig_hpo.train.loop import Job, train_loop

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        cfg = SweepConfig.model_validate(_raw(base, "fsdp", world))
        data = prepare(ROWS, cfg)
        out: dict = {}
        whole: list[dict] = []

        def keep(metrics, ckpt):
            whole.append(dict(metrics))
            if ckpt is not None and rank == 0 and metrics["epoch"] == 1:
                shutil.copytree(ckpt, os.path.join(out_dir, "epoch_1"))

        train_loop(cfg, data, Job(checkpoint_every=1), keep)
        dist.barrier()  # rank 0 copied the checkpoint before any rank reads it
        rest: list[dict] = []
        resumed = Job(checkpoint_every=1, resume_from=os.path.join(out_dir, "epoch_1"))
        train_loop(cfg, data, resumed, lambda metrics, ckpt: rest.append(dict(metrics)))
        out["whole"], out["rest"] = whole, rest
        torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tiny_llama_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("llm-fsdp")
    spawn_ranks(_worker, (2, free_port(), str(tiny_llama_dir), str(out)), 2)
    return out, [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(2)]


def test_an_fsdp_llm_checkpoint_holds_the_adapter_under_the_one_process_names(ranks, tiny_llama_dir):
    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.saved_weights import saved_state_dict
    from ludwig_hpo.train.report_keys import MODEL_FILE

    out, _ = ranks
    saved = torch.load(Path(out) / "epoch_1" / MODEL_FILE, weights_only=True)["state_dict"]
    cfg = SweepConfig.model_validate(_raw(str(tiny_llama_dir), "ddp", 1))
    model = build_model(cfg, prepare(ROWS, cfg).meta)
    assert set(saved) == set(saved_state_dict(model)) and all("lora_" in k for k in saved)


def test_an_fsdp_llm_trial_resumed_from_its_adapter_checkpoint_reports_as_the_uninterrupted_one(ranks):
    _, results = ranks
    for r in results:
        assert [m["epoch"] for m in r["rest"]] == [2, 3]
        for a, b in zip(r["whole"][1:], r["rest"], strict=True):
            for key in KEYS:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-8), key
