"""Ludwig's ``tabnet`` combiner: TabNet (Arik and Pfister, 2019) as ``ludwig/modules/tabnet_modules.py``
builds it, over the concatenated encodings.

Per step: an attentive transformer turns the previous step's attentive part into a feature mask
(sparsemax / entmax of its logits times the prior scales), the masked features pass a feature
transformer (GLU blocks, the first ``num_shared_blocks`` of them shared by every step), and the
ReLU of the decision part is summed over the steps; a final Linear projects the sum. The mask
entropy, times ``sparsity``, is the combiner's auxiliary loss (Ludwig adds it to the training loss).
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from ludwig_hpo.config.combiners import TabNetCombiner as TabNetConfig
from ludwig_hpo.model.combiners.base import EncodedInput, flatten, refuse_sequences
from ludwig_hpo.model.combiners.entmax import entmax15, entmax_bisect, sparsemax


class GhostBatchNorm(nn.Module):
    """Ludwig's ``GhostBatchNormalization``: in training, BatchNorm1d over ``ceil(batch /
    virtual_batch_size)`` chunks (``torch.chunk``), a chunk of one row passing unchanged;
    in evaluation (or without a virtual batch size) plain BatchNorm1d."""

    def __init__(self, width: int, momentum: float, eps: float, virtual_batch_size: int | None) -> None:
        super().__init__()
        self.virtual_batch_size = virtual_batch_size
        self.bn = nn.BatchNorm1d(width, momentum=momentum, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        if self.training and self.virtual_batch_size:
            if n == 1:
                return x
            chunks = x.chunk(math.ceil(n / self.virtual_batch_size), 0)
            return torch.cat([self.bn(c) if c.shape[0] > 1 else c for c in chunks], 0)
        if n != 1 or not self.training:
            return self.bn(x)
        return x


class FeatureBlock(nn.Module):
    """Linear (no bias) -> ghost batch norm -> GLU: (batch, in_size) -> (batch, size); without
    GLU the Linear is ``size`` wide."""

    def __init__(self, in_size: int, size: int, cfg: TabNetConfig, glu: bool = True, shared: nn.Linear | None = None):
        super().__init__()
        units = size * 2 if glu else size
        self.glu = glu
        self.fc_layer = shared if shared is not None else nn.Linear(in_size, units, bias=False)
        self.batch_norm = GhostBatchNorm(units, cfg.bn_momentum, cfg.bn_epsilon, cfg.bn_virtual_bs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.batch_norm(self.fc_layer(x))
        return nn.functional.glu(h, dim=-1) if self.glu else h


class FeatureTransformer(nn.Module):
    """``num_total_blocks`` feature blocks, each after the first added to its input and scaled by
    sqrt(1/2): (batch, in_size) -> (batch, size). ``shared`` are the first blocks' Linear layers."""

    def __init__(self, in_size: int, size: int, cfg: TabNetConfig, shared: list[nn.Linear]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            FeatureBlock(in_size if n == 0 else size, size, cfg, shared=shared[n] if n < len(shared) else None)
            for n in range(cfg.num_total_blocks)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.blocks[0](x)
        for block in self.blocks[1:]:
            h = (block(h) + h) * math.sqrt(0.5)
        return h


class AttentiveTransformer(nn.Module):
    """(batch, size) attentive part, (batch, features) prior scales -> (batch, features) mask:
    the entmax of Linear -> ghost batch norm, times the prior scales."""

    def __init__(self, size: int, n_features: int, cfg: TabNetConfig) -> None:
        super().__init__()
        self.feature_block = FeatureBlock(size, n_features, cfg, glu=False)
        self.mode = cfg.entmax_mode
        self.alpha = cfg.entmax_alpha

    def forward(self, x: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
        h = self.feature_block(x) * prior
        if self.mode == "sparsemax":
            return sparsemax(h)
        if self.mode == "entmax15":
            return entmax15(h)
        return entmax_bisect(h, self.alpha)


class TabNet(nn.Module):
    """(batch, n_features) -> ((batch, output_size), auxiliary loss, (batch, n_features)
    aggregated mask)."""

    def __init__(self, n_features: int, cfg: TabNetConfig) -> None:
        super().__init__()
        self.output_size = cfg.output_size
        self.num_steps = cfg.num_steps
        self.relaxation_factor = cfg.relaxation_factor
        self.sparsity = cfg.sparsity
        self.batch_norm = nn.BatchNorm1d(n_features, momentum=cfg.bn_momentum, eps=cfg.bn_epsilon)
        width = cfg.size + cfg.output_size
        first = FeatureTransformer(n_features, width, cfg, shared=[])
        shared = [cast(FeatureBlock, b).fc_layer for b in first.blocks[: cfg.num_shared_blocks]]
        self.feature_transforms = nn.ModuleList(
            [first, *(FeatureTransformer(n_features, width, cfg, shared) for _ in range(cfg.num_steps))]
        )
        self.attentive_transforms = nn.ModuleList(
            AttentiveTransformer(cfg.size, n_features, cfg) for _ in range(cfg.num_steps)
        )
        self.final_projection = nn.Linear(cfg.output_size, cfg.output_size)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = features.shape[0]
        if self.training and n == 1:  # batch statistics of one row: the running ones instead
            self.batch_norm.eval()
            features = self.batch_norm(features)
            self.batch_norm.train()
        else:
            features = self.batch_norm(features)
        prior = torch.ones_like(features)
        acc = features.new_zeros(n, self.output_size)
        aggregated = torch.zeros_like(features)
        entropy = features.new_zeros(())
        x = self.feature_transforms[0](features)
        for step in range(self.num_steps):
            mask = self.attentive_transforms[step](x[:, self.output_size :], prior)
            prior = prior * (self.relaxation_factor - mask)
            if self.sparsity != 0.0:
                entropy = entropy + (-mask * torch.log(mask + 1e-5)).sum(dim=1).mean() / self.num_steps
            x = self.feature_transforms[step + 1](mask * features)
            out = torch.relu(x[:, : self.output_size])
            acc = acc + out
            aggregated = aggregated + mask * out.sum(dim=1, keepdim=True) / self.num_steps
        return self.final_projection(acc), self.sparsity * entropy, aggregated


class TabNetCombiner(nn.Module):
    """The encodings flattened and concatenated, TabNet, then dropout when > 0: (batch,
    ``output_size``). ``aux_loss`` after a forward is the sparsity loss of that batch."""

    ludwig_initialized = True
    sequence = False

    def __init__(self, cfg: TabNetConfig, inputs: list[EncodedInput]) -> None:
        super().__init__()
        refuse_sequences("tabnet", inputs)
        self.names = [i.name for i in inputs]
        self.tabnet = TabNet(sum(i.flat_size for i in inputs), cfg)
        self.dropout = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else None
        self.output_size = cfg.output_size

    def forward_with_loss(self, encodings: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden (batch, output_size), sparsity loss (0-dim))."""
        parts = [flatten(encodings[n]) for n in self.names]
        hidden, loss, _ = self.tabnet(parts[0] if len(parts) == 1 else torch.cat(parts, dim=1))
        return (self.dropout(hidden) if self.dropout is not None else hidden), loss

    def forward(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.forward_with_loss(encodings)[0]
