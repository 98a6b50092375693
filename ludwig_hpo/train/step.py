"""What one training step optimizes: the optimizer of ``trainer.optimizer`` and the combined loss."""

from __future__ import annotations

from typing import Any

import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.model.combiners import AUX_LOSS
from ludwig_hpo.model.losses import OutputLosses


def make_optimizer(cfg: SweepConfig, params: Any, lr: float) -> torch.optim.Optimizer:
    """``trainer.optimizer`` over ``params`` at learning rate ``lr``: :func:`ludwig_hpo.train.optim.make_optimizer`."""
    from ludwig_hpo.train.optim import make_optimizer as make

    return make(cfg, params, lr)


def combined_loss(
    cfg: SweepConfig,
    logits: dict[str, torch.Tensor],
    targets: dict[str, torch.Tensor],
    losses: OutputLosses | None = None,
) -> torch.Tensor:
    """Ludwig's combined loss: the ``loss.weight``-weighted sum of the output losses (a 0-dim
    tensor). ``losses`` are the outputs' losses resolved against the data (class weights by
    name, similarity matrices: :class:`~ludwig_hpo.model.losses.OutputLosses` of the data's
    metadata); without them each loss is made from the config alone. A combiner's auxiliary
    loss (``logits[AUX_LOSS]``, TabNet's sparsity loss while training) is added as Ludwig adds
    it. A weight of 1 and a single output add no autograd node. Every rank."""
    total = (losses or OutputLosses(cfg.output_features, None))(logits, targets)
    aux = logits.get(AUX_LOSS)
    return total if aux is None else total + aux
