"""Scoring a model on a split, identically on every rank (sums all-reduced, ROC AUC gathered)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.model.outputs import SUMMED_METRICS, metric_sums, roc_auc
from ludwig_hpo.train.data import DeviceData, batches, eval_shard
from ludwig_hpo.train.strategy import AUTOCAST_DTYPES, autocast
from ludwig_hpo.train.strategy import world as _world


def all_reduce(t: torch.Tensor, op: Any = None) -> torch.Tensor:
    """``t`` summed (or reduced by ``op``) over the ranks, in place; ``t`` itself in one process."""
    if _world()[1] > 1:
        dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
    return t


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    cfg: SweepConfig,
    dd: DeviceData,
    rows: np.ndarray,
    split: str,
    batch_size: int,
    *,
    lockstep: bool = False,
) -> dict[str, float]:
    """Metrics of ``model`` over all ``rows``, identical on every rank.

    Each rank scores its shard (``rows[rank::world]``, no padding); sums are all-reduced, so
    every row counts exactly once. ROC AUC (binary outputs) gathers all scores. Keys:
    ``"<split>/<feature>/<metric>"`` and ``"<split>/combined/loss"`` (the loss-weighted sum
    of the output losses).

    Args:
        lockstep: every rank runs the same number of forward passes (an FSDP forward is a
            collective); a rank whose shard is one batch short scores a filler batch and
            discards it.
    """
    rank, world = _world()
    model.eval()
    shard = eval_shard(rows, rank=rank, world_size=world)
    outputs = cfg.output_features
    amp = AUTOCAST_DTYPES[cfg.trainer.precision] is not None
    #: per-sample sums of each "<feature>/<metric>", added batch after batch (float64)
    sums: dict[str, torch.Tensor] = {}
    scores: dict[str, list[torch.Tensor]] = {f.name: [] for f in outputs if f.type == "binary"}
    labels: dict[str, list[torch.Tensor]] = {k: [] for k in scores}
    own = list(batches(shard, batch_size, dd.device, drop_last=False))
    if lockstep:
        most = math.ceil(math.ceil(len(rows) / world) / batch_size)
        filler = torch.as_tensor(rows[:1], dtype=torch.int64).to(dd.device)
        for _ in range(most - len(own)):
            with autocast(dd.device, cfg.trainer.precision):
                model(dd.batch(filler)[0])
    for idx in own:
        x, y = dd.batch(idx)
        if amp:
            with autocast(dd.device, cfg.trainer.precision):
                out = model(x)
        else:
            out = model(x)
        for f in outputs:
            logits = out[f.name].float()
            for m, v in metric_sums(f.type, logits, y[f.name]).items():
                k = f"{f.name}/{m}"
                sums[k] = sums[k] + v if k in sums else v
            if f.name in scores:
                scores[f.name].append(logits.cpu())
                labels[f.name].append(y[f.name].cpu())
    names = [f"{f.name}/{m}" for f in outputs for m in SUMMED_METRICS[f.type]]
    count = torch.tensor(float(len(shard)), dtype=torch.float64, device=dd.device)
    zero = torch.zeros((), dtype=torch.float64, device=dd.device)
    # one vector, one all-reduce and one copy to the host for every summed metric
    vec = all_reduce(torch.stack([sums.get(k, zero) for k in names] + [count])).tolist()
    n = max(vec[-1], 1.0)
    out_metrics = {f"{split}/{k}": vec[i] / n for i, k in enumerate(names)}
    for name in scores:
        local = (
            torch.cat(scores[name]) if scores[name] else torch.zeros(0),
            torch.cat(labels[name]) if labels[name] else torch.zeros(0),
        )
        gathered: list[Any] = [local]
        if world > 1:
            gathered = [None] * world
            dist.all_gather_object(gathered, local)
        s = torch.cat([g[0] for g in gathered]).numpy() if world > 1 else local[0].numpy()
        truth = torch.cat([g[1] for g in gathered]).numpy() if world > 1 else local[1].numpy()
        out_metrics[f"{split}/{name}/roc_auc"] = roc_auc(s, truth)
    out_metrics[f"{split}/combined/loss"] = sum(f.loss_weight * out_metrics[f"{split}/{f.name}/loss"] for f in outputs)
    model.train()
    return out_metrics
