"""The parts of the benches' hand-written training loops (what a user writes without the
platform) that are the same for every model: the shuffled batches of an epoch and one
optimizer step with the trainer's gradient clipping. Run in the bench's own process."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from typing import Any

import torch


def epoch_batches(train: torch.Tensor, batch_size: int) -> Iterator[torch.Tensor]:
    """The training row indices ``train`` (N,) shuffled, in batches of ``batch_size`` rows; a
    last batch of one row is dropped, as the worker loop drops it (batch norm needs two)."""
    perm = train[torch.randperm(len(train))]
    for i in range(0, len(perm) - (1 if len(perm) % batch_size == 1 else 0), batch_size):
        yield perm[i : i + batch_size]


def optimizer_step(opt: torch.optim.Optimizer, params: list[torch.nn.Parameter], loss: torch.Tensor, clip: Any) -> None:
    """Back-propagate ``loss`` (a scalar) and step ``opt``, clipping the gradients of ``params``
    as ``trainer.gradient_clipping`` (``clip``) says, in Ludwig's order: global norm, norm, value
    (Ludwig's default recipe clips the global norm at 0.5: a user's loop would too)."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip.clipglobalnorm is not None:
        torch.nn.utils.clip_grad_norm_(params, clip.clipglobalnorm)
    if clip.clipnorm is not None:
        torch.nn.utils.clip_grad_norm_(params, clip.clipnorm)
    if clip.clipvalue is not None:
        torch.nn.utils.clip_grad_value_(params, clip.clipvalue)
    opt.step()


def paired_runs(
    ours: Callable[[Any, Any], float], plain: Callable[[Any, Any], float], cfg: Any, data: Any, repeats: int
) -> tuple[dict[str, list[float]], list[float]]:
    """Time the platform's run (``ours``) against the hand-written one (``plain``), each
    ``(cfg, data) -> wall seconds``: one warm-up run of each (lazy imports, caches, the
    allocator), then ``repeats`` back-to-back pairs in alternating order (so neither always
    runs second). Returns the seconds of each (``{"ours": [...], "plain": [...]}``) and each
    pair's ``plain / ours`` seconds ratio (the pair's throughput ratio)."""
    ours(cfg, data), plain(cfg, data)
    times: dict[str, list[float]] = {"ours": [], "plain": []}
    pair_ratios = []
    for i in range(repeats):
        order = ("ours", "plain") if i % 2 == 0 else ("plain", "ours")
        pair = {name: (ours if name == "ours" else plain)(cfg, data) for name in order}
        for k, v in pair.items():
            times[k].append(v)
        pair_ratios.append(pair["plain"] / pair["ours"])
    return times, pair_ratios


def ratio_quartiles(pair_ratios: list[float]) -> tuple[float, float, float]:
    """The median of the pairs' ratios and its first and third quartiles (one pair's are its ratio)."""
    ratio = statistics.median(pair_ratios)
    q1, _, q3 = statistics.quantiles(pair_ratios, n=4) if len(pair_ratios) > 1 else (ratio, ratio, ratio)
    return ratio, q1, q3
