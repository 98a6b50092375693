"""What one training step optimizes: the optimizer of ``trainer.optimizer`` and the combined loss."""

from __future__ import annotations

from typing import Any

import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.model.outputs import loss as loss_fn


def make_optimizer(cfg: SweepConfig, params: Any, lr: float) -> torch.optim.Optimizer:
    """``trainer.optimizer`` over ``params`` at learning rate ``lr`` (after any scaling). Every rank."""
    o = cfg.trainer.optimizer
    if o.type == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=o.momentum, weight_decay=o.weight_decay)
    cls = torch.optim.AdamW if o.type == "adamw" else torch.optim.Adam
    return cls(params, lr=lr, weight_decay=o.weight_decay)


def combined_loss(cfg: SweepConfig, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> torch.Tensor:
    """The loss-weighted sum of the output losses (a 0-dim tensor). A weight of 1 and a single
    output add no autograd node (the value is the same: ``1.0 * x + 0`` is ``x`` exactly)."""
    total: torch.Tensor | None = None
    for f in cfg.output_features:
        part = loss_fn(f.type, logits[f.name], targets[f.name])
        if f.loss_weight != 1:
            part = f.loss_weight * part
        total = part if total is None else total + part
    if total is None:  # the schema requires at least one output feature
        raise ValueError("the config has no output feature")
    return total
