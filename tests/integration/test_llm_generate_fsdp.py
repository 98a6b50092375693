"""An llm's generated-output metrics under FSDP on 2 gloo ranks (torch.multiprocessing, no Ray):
the ranks answer their shares of the sample in lockstep (a rank one prompt short answers a
filler), generate gathers the root's sharded weights even before any forward, and the scores
and kept rows equal one process's (greedy generation)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tests.ranks import spawn_ranks

pytestmark = pytest.mark.timeout(300)

SAMPLES = 3  # shards of 2 and 1 prompts: one filler call on rank 1


def _scores(rank: int, world: int, folder: str, base: str) -> dict:
    from ludwig_hpo.data.preprocess import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate
    from ludwig_hpo.train.generate_eval import generation_metrics
    from ludwig_hpo.train.strategy import wrap
    from tests.unit.test_generate_eval import _llm_cfg

    cfg, rows = _llm_cfg(base, eval_generation_samples=SAMPLES)
    cfg = cfg.model_copy(update={"generation": cfg.generation.model_copy(update={"do_sample": False})})
    data = prepare(rows, cfg)
    torch.manual_seed(0)
    model = wrap(build_model(cfg, data.meta), "fsdp", torch.device("cpu"), world)
    dd, val = DeviceData(data, torch.device("cpu")), data.splits["validation"]
    kept: list = []
    model.eval()
    # before any forward: the root's weights are still sharded
    first = generation_metrics(model, cfg, dd, val, "validation", 2, lockstep=world > 1, kept=kept)
    scored = evaluate(model, cfg, dd, val, "validation", 2, lockstep=world > 1)
    return {"first": first, "kept": [[k.prompt, k.reference, k.generated] for k in kept], "scored": scored}


def _rank(rank: int, world: int, folder: str, base: str) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        Path(folder, f"rank{rank}.json").write_text(json.dumps(_scores(rank, world, folder, base)))
    finally:
        dist.destroy_process_group()


def test_fsdp_ranks_generate_in_lockstep_as_one_process_does(tmp_path, tiny_llama_dir):
    pytest.importorskip("peft")
    spawn_ranks(_rank, (2, str(tmp_path), str(tiny_llama_dir)), 2)
    alone = _scores(0, 1, str(tmp_path), str(tiny_llama_dir))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0] == ranks[1]
    assert len(alone["kept"]) == SAMPLES
    assert ranks[0]["kept"] == alone["kept"]  # every prompt answered as one process answers it
    assert ranks[0]["first"] == pytest.approx(alone["first"])
    for key in ("validation/gloss/exact_match", "validation/gloss/rouge_l", "validation/gloss/loss"):
        assert ranks[0]["scored"][key] == pytest.approx(alone["scored"][key], rel=1e-5), key
