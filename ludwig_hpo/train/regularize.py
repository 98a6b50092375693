"""Ludwig's weight regularization (``trainer.regularization_type`` and
``regularization_lambda``), added to the training loss. Every rank."""

from __future__ import annotations

import torch


def regularization_loss(model: torch.nn.Module, kind: str | None, strength: float) -> torch.Tensor | None:
    """``strength`` x the sum over all parameters of their absolute values (``l1``), squares
    (``l2``) or both (``l1_l2``), as Ludwig adds it to the training loss (a 0-dim tensor); None
    when there is nothing to add (no type, or a strength of 0), so the loss keeps no extra node.
    """
    if kind is None or strength == 0:
        return None
    params = list(model.parameters())
    total = torch.zeros((), device=params[0].device) if params else torch.zeros(())
    if kind in ("l1", "l1_l2"):
        total = total + strength * sum(p.abs().sum() for p in params)
    if kind in ("l2", "l1_l2"):
        total = total + strength * sum(p.square().sum() for p in params)
    return total
