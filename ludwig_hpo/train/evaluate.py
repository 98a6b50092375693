"""Scoring a model on a split, identically on every rank (sums all-reduced, ROC AUC gathered)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.model.losses import OutputLoss
from ludwig_hpo.model.metrics import OutputMetrics
from ludwig_hpo.train.data import DeviceData, batches, eval_shard
from ludwig_hpo.train.generate_eval import GeneratedRow, generation_metrics
from ludwig_hpo.train.strategy import AUTOCAST_DTYPES, autocast
from ludwig_hpo.train.strategy import world as _world
from ludwig_hpo.train.stream_feed import StreamScorer


def all_reduce(t: torch.Tensor, op: Any = None) -> torch.Tensor:
    """``t`` summed (or reduced by ``op``) over the ranks, in place; ``t`` itself in one process."""
    if _world()[1] > 1:
        dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
    return t


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    cfg: SweepConfig,
    dd: DeviceData | StreamScorer,
    rows: np.ndarray,
    split: str,
    batch_size: int,
    *,
    lockstep: bool = False,
    kept: list[GeneratedRow] | None = None,
) -> dict[str, float]:
    """Metrics of ``model`` over all ``rows``, identical on every rank.

    Each rank scores its shard (``rows[rank::world]``, no padding); sums are all-reduced, so
    every row counts exactly once. ROC AUC (binary and category outputs) gathers all scores.
    Keys: ``"<split>/<feature>/<metric>"`` for every metric of the output's type
    (:data:`~ludwig_hpo.config.metrics.METRICS`) and ``"<split>/combined/loss"`` (the
    loss-weighted sum of the output losses).

    Args:
        dd: the rows in memory, or a streamed split's shard on this rank (``rows`` unused).
        lockstep: every rank runs the same number of forward passes (an FSDP forward is a
            collective); a rank whose shard is one batch short scores a filler batch and
            discards it.
        kept: an llm config's: receives the first rows of the generated sample with their
            texts (:func:`~ludwig_hpo.train.generate_eval.generation_metrics`).

    An llm config's text output also gets ``exact_match`` and ``rouge_l``, scored on the text
    generated for the first ``trainer.eval_generation_samples`` rows.
    """
    rank, world = _world()
    model.eval()
    shard = eval_shard(rows, rank=rank, world_size=world)
    outputs = cfg.output_features
    scorers = output_metrics(model, cfg)
    amp = AUTOCAST_DTYPES[cfg.trainer.precision] is not None
    #: each output's per-sample sums, added batch after batch (float64)
    sums: dict[str, torch.Tensor] = {}
    scores: dict[str, list[torch.Tensor]] = {f.name: [] for f in outputs if scorers[f.name].gathers}
    labels: dict[str, list[torch.Tensor]] = {k: [] for k in scores}
    if isinstance(dd, StreamScorer):  # a streamed split: this rank's shard, read as it is scored
        pairs: Iterable[tuple[dict, dict]] = _streamed_pairs(model, cfg, dd, batch_size, lockstep=lockstep)
    else:
        own = list(batches(shard, batch_size, dd.device, drop_last=False))
        if lockstep:
            most = math.ceil(math.ceil(len(rows) / world) / batch_size)
            filler = torch.as_tensor(rows[:1], dtype=torch.int64).to(dd.device)
            for _ in range(most - len(own)):
                with autocast(dd.device, cfg.trainer.precision):
                    model(dd.batch(filler)[0])
        pairs = (dd.batch(idx) for idx in own)
    scored = 0
    for x, y in pairs:
        scored += len(next(iter(y.values())))
        if amp:
            with autocast(dd.device, cfg.trainer.precision):
                out = model(x)
        else:
            out = model(x)
        for f in outputs:
            logits = out[f.name].float()
            v = scorers[f.name].sums(logits, y[f.name])
            sums[f.name] = sums[f.name] + v if f.name in sums else v
            if f.name in scores:
                scores[f.name].append(scorers[f.name].scores(logits))  # to the host once, at the end
                labels[f.name].append(y[f.name])
    sizes = [scorers[f.name].size for f in outputs]
    count = torch.tensor([float(scored)], dtype=torch.float64, device=dd.device)
    parts = [
        sums.get(f.name, torch.zeros(n, dtype=torch.float64, device=dd.device))
        for f, n in zip(outputs, sizes, strict=True)
    ]
    # one vector, one all-reduce and one copy to the host for every summed metric
    vec = all_reduce(torch.cat([*parts, count])).tolist()
    n = vec[-1]
    out_metrics: dict[str, float] = {}
    at = 0
    for f, size in zip(outputs, sizes, strict=True):
        gathered = _gather(scores[f.name], labels[f.name], world) if f.name in scores else None
        for m, value in scorers[f.name].finish(vec[at : at + size], n, gathered).items():
            out_metrics[f"{split}/{f.name}/{m}"] = value
        at += size
    out_metrics[f"{split}/combined/loss"] = sum(f.loss_weight * out_metrics[f"{split}/{f.name}/loss"] for f in outputs)
    if cfg.is_llm and isinstance(dd, DeviceData):  # the generated outputs of a bounded sample
        out_metrics.update(generation_metrics(model, cfg, dd, rows, split, batch_size, lockstep=lockstep, kept=kept))
    model.train()
    return out_metrics


def _streamed_pairs(
    model: torch.nn.Module, cfg: SweepConfig, dd: StreamScorer, batch_size: int, *, lockstep: bool
) -> Iterator[tuple[dict, dict]]:
    """A streamed shard's batches; under ``lockstep`` the shard is read whole first (the ranks'
    shard sizes are known only then) and filler forwards of its first batch even the counts.

    Raises:
        RuntimeError: under ``lockstep``, this rank's shard is empty (no batch to fill with).
    """
    if not lockstep:
        yield from dd.eval_batches(batch_size)
        return
    own = list(dd.eval_batches(batch_size))
    most = int(all_reduce(torch.tensor([float(len(own))], device=dd.device), op=dist.ReduceOp.MAX).item())
    if most and not own:
        raise RuntimeError("a rank's shard of a streamed scored split is empty: use fewer workers per trial")
    for _ in range(most - len(own)):
        with autocast(dd.device, cfg.trainer.precision):
            model(own[0][0])
    yield from own


def output_metrics(model: torch.nn.Module, cfg: SweepConfig) -> dict[str, OutputMetrics]:
    """Each output's :class:`OutputMetrics`: the model's heads' (resolved against the data when
    the model was built), else made from the config alone (a model pickled without them). An
    llm model carries its own (:class:`~ludwig_hpo.model.llm_metrics.LLMMetrics`)."""
    own = getattr(getattr(model, "module", model), "output_metrics", None)
    if isinstance(own, dict) and all(f.name in own for f in cfg.output_features):
        return own
    heads = getattr(getattr(model, "module", model), "heads", None)
    found = heads.__dict__.get("output_metrics") if isinstance(heads, torch.nn.Module) else None
    if isinstance(found, dict) and all(f.name in found for f in cfg.output_features):
        return found
    return {f.name: OutputMetrics(f, None, OutputLoss(f, None)) for f in cfg.output_features}


def _gather(scores: list[torch.Tensor], labels: list[torch.Tensor], world: int) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's scores and targets, concatenated in rank order (the same on every rank)."""
    local = (
        torch.cat(scores).cpu() if scores else torch.zeros(0),
        torch.cat(labels).cpu() if labels else torch.zeros(0),
    )
    if world == 1:
        return local[0].numpy(), local[1].numpy()
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, local)
    parts = [g for g in gathered if len(g[0])]
    if not parts:
        return local[0].numpy(), local[1].numpy()
    return torch.cat([g[0] for g in parts]).numpy(), torch.cat([g[1] for g in parts]).numpy()
