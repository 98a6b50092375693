"""An llm config's LoRA fine-tuning through the real worker loop on 2 gloo ranks
(torch.multiprocessing, no Ray): DDP, and FSDP (one unit per decoder block) with gradient
checkpointing and gradient accumulation, end with the same adapter weights on both ranks,
metrics agree, and the training loss goes down.

The tiny random Llama of ``tests/hf_models.py`` on 40 rows of lemma -> gloss.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
import torch
import torch.distributed as dist

from tests.llm_configs import LORA, llm_raw
from tests.ranks import free_port, spawn_ranks

pytest.importorskip("peft")

GLOSSES = [
    ("cat", "a small animal"),
    ("dog", "a loyal friend of man"),
    ("oak", "a tall tree"),
    ("rain", "water falling from the sky"),
    ("fox", "a quick brown animal"),
    ("sun", "the star of the day"),
    ("moon", "it shines at night"),
    ("bird", "it sings in the morning"),
]


def _raw(base: str, strategy: str) -> dict:
    # FSDP also recomputes each decoder block and accumulates 2 batches per step
    fsdp = {"enable_gradient_checkpointing": True, "gradient_accumulation_steps": 2} if strategy == "fsdp" else {}
    return llm_raw(
        base,
        name="llm-ddp",
        split=(0.7, 0.2, 0.1, 3),
        template="Define {lemma}:",
        trainer={"epochs": 2, "batch_size": 4, "learning_rate": 0.02, "eval_generation_samples": 0, **fsdp},
        adapter={**LORA, "dropout": 0.1},
        backend={"num_workers": 2, "strategy": strategy},
    )


def _worker(rank: int, world: int, port: int, base: str, strategy: str, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from ludwig_hpo.config.schema import SweepConfig
        from ludwig_hpo.data import prepare
        from ludwig_hpo.train.loop import Job, train_loop

        cfg = SweepConfig.model_validate(_raw(base, strategy))
        rows = pd.DataFrame(GLOSSES * 5, columns=["lemma", "gloss"])
        data = prepare(rows, cfg)
        reports: list[dict] = []
        model = train_loop(cfg, data, Job(), lambda m, c: reports.append(m))
        torch.save(
            {"adapter": model.trainable_state_dict(), "reports": reports}, os.path.join(out_dir, f"rank{rank}.pt")
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_lora_ranks_end_with_identical_adapters_and_the_loss_goes_down(tmp_path, tiny_llama_dir, strategy):
    spawn_ranks(_worker, (2, free_port(), str(tiny_llama_dir), strategy, str(tmp_path)), 2)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    assert r0["adapter"] and all("lora_" in k for k in r0["adapter"])  # the adapter only
    for k, v in r0["adapter"].items():
        torch.testing.assert_close(v, r1["adapter"][k], rtol=0, atol=0, msg=f"rank adapters differ: {k}")
    assert any(v.abs().sum() > 0 for k, v in r0["adapter"].items() if "lora_B" in k)  # it trained
    assert [m["epoch"] for m in r0["reports"]] == [1, 2]
    for a, b in zip(r0["reports"], r1["reports"], strict=True):
        for key in ("objective", "validation/gloss/loss", "validation/gloss/token_accuracy", "world_size"):
            assert a[key] == b[key], key
    assert r0["reports"][0]["world_size"] == 2
    losses = [m["train/combined/running_loss"] for m in r0["reports"]]
    assert losses[-1] < losses[0]
    assert r0["reports"][-1]["validation/gloss/perplexity"] > 1.0
