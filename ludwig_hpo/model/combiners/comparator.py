"""Ludwig's ``comparator`` combiner: two entities, each a list of input features, compared."""

from __future__ import annotations

import torch
from torch import nn

from ludwig_hpo.config.combiners import ComparatorCombiner as ComparatorConfig
from ludwig_hpo.model.combiners.base import EncodedInput, flatten
from ludwig_hpo.model.combiners.fc import FCStack, layer_specs


class ComparatorCombiner(nn.Module):
    """Each entity's encodings flattened and concatenated, through its own fully connected
    stack (the same layer settings, separate weights), to ``e1`` and ``e2`` of width ``w``; the
    output is [e1 . e2, e1 * e2, |e1 - e2|, e1 W e2] of width 2 w + 2 (batch, 2 w + 2).

    ``W`` (w, w) is drawn from a standard normal at build time and is not trained: in Ludwig it
    is a buffer, not a parameter; it is in the state dict.
    """

    ludwig_initialized = True
    sequence = False

    def __init__(self, cfg: ComparatorConfig, inputs: list[EncodedInput]) -> None:
        super().__init__()
        by_name = {i.name: i for i in inputs}
        self.entity_1, self.entity_2 = list(cfg.entity_1), list(cfg.entity_2)
        defaults = {
            "output_size": cfg.output_size,
            "use_bias": cfg.use_bias,
            "weights_initializer": cfg.weights_initializer,
            "bias_initializer": cfg.bias_initializer,
            "norm": cfg.norm,
            "norm_params": cfg.norm_params,
            "activation": cfg.activation,
            "dropout": cfg.dropout,
        }
        specs = layer_specs(cfg.fc_layers, cfg.num_fc_layers, defaults)
        self.e1_fc_stack = FCStack(sum(by_name[n].flat_size for n in self.entity_1), specs)
        self.e2_fc_stack = FCStack(sum(by_name[n].flat_size for n in self.entity_2), specs)
        width = self.e1_fc_stack.output_size
        self.register_buffer("bilinear_weights", torch.randn(width, width))
        self.output_size = 2 * width + 2

    @staticmethod
    def _join(encodings: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
        parts = [flatten(encodings[n]) for n in names]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def forward(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        e1 = self.e1_fc_stack(self._join(encodings, self.entity_1))
        e2 = self.e2_fc_stack(self._join(encodings, self.entity_2))
        product = e1 * e2
        dot = product.sum(dim=1, keepdim=True)
        bilinear = ((e1 @ self.bilinear_weights) * e2).sum(dim=1, keepdim=True)
        return torch.cat([dot, product, (e1 - e2).abs(), bilinear], dim=1)
