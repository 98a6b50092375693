"""The parts of the benches' hand-written training loops (what a user writes without the
platform) that are the same for every model: the shuffled batches of an epoch and one
optimizer step with the trainer's gradient clipping. Run in the bench's own process."""

from __future__ import annotations

from collections.abc import Iterator
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
