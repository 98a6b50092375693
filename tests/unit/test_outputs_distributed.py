"""Every output type's metrics scored by two gloo ranks, each on its shard, equal the metrics
one process scores over the whole split: the sums are all-reduced, ROC AUC's scores gathered."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist

from tests.ranks import spawn_ranks

OUTPUTS = [
    {"name": "klass", "type": "category", "top_k": 2},
    {"name": "flag", "type": "binary", "threshold": 0.4},
    {"name": "value", "type": "number"},
    {"name": "tags", "type": "set"},
    {"name": "vec", "type": "vector"},
]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 83  # a validation split of odd size: the shards differ by a row
    x = rng.normal(size=(n, 2))
    tokens = np.array(["a", "b", "c", "d"])
    return pd.DataFrame(
        {
            "x1": x[:, 0],
            "x2": x[:, 1],
            "klass": np.array(["p", "q", "r"])[rng.integers(0, 3, n)],
            "flag": (x[:, 0] + rng.normal(size=n) > 0).astype(int),
            "value": x[:, 0] * 3 + rng.normal(size=n),
            "tags": [" ".join(tokens[rng.random(4) > 0.5]) or "a" for _ in range(n)],
            "vec": [" ".join(f"{v:.3f}" for v in rng.random(3)) for _ in range(n)],
        }
    )


def _scores(rank: int, world: int, folder: str) -> dict[str, float]:
    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate
    from tests.unit.conftest import _sweep_dict

    inputs = [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}]
    cfg = SweepConfig.model_validate(_sweep_dict(inputs, OUTPUTS))
    data = prepare(_frame(), cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    return evaluate(model, cfg, DeviceData(data, torch.device("cpu")), data.splits["validation"], "validation", 5)


def _rank(rank: int, world: int, folder: str) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        out = _scores(rank, world, folder)
        Path(folder, f"rank{rank}.json").write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(240)
def test_two_ranks_report_the_metrics_of_one_process(tmp_path):
    spawn_ranks(_rank, (2, str(tmp_path)), 2)
    alone = _scores(0, 1, str(tmp_path))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0] == ranks[1]
    assert set(ranks[0]) == set(alone)
    for key, value in alone.items():
        assert ranks[0][key] == pytest.approx(value, rel=1e-5, abs=1e-9), key
    assert {k.split("/")[-1] for k in alone} >= {"hits_at_k", "jaccard", "r2", "specificity", "roc_auc"}
