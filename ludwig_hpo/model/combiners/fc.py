"""Ludwig's fully connected stack (``FCStack``): Linear -> norm -> activation -> dropout per layer.

Runs on every rank; parameters come from torch's global RNG in construction order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ludwig_hpo.config.fc import FCLayerConfig
from ludwig_hpo.model.init import init_linear

#: Ludwig's activations (``ludwig/utils/torch_utils.activations``); None is the identity.
ACTIVATIONS: dict[str | None, type[nn.Module]] = {
    "elu": nn.ELU,
    "leakyRelu": nn.LeakyReLU,
    "logSigmoid": nn.LogSigmoid,
    "relu": nn.ReLU,
    "sigmoid": nn.Sigmoid,
    "tanh": nn.Tanh,
    "softmax": nn.Softmax,
    None: nn.Identity,
}
#: The keys of one layer that the section's values of the same name fill in.
_LAYER_KEYS = (
    "output_size",
    "use_bias",
    "weights_initializer",
    "bias_initializer",
    "norm",
    "norm_params",
    "activation",
    "dropout",
)


def activation(name: str | None) -> nn.Module:
    """Ludwig's activation module of that name (softmax over the last axis)."""
    return nn.Softmax(dim=-1) if name == "softmax" else ACTIVATIONS[name]()


class FCLayer(nn.Module):
    """(batch, in_size) -> (batch, output_size): Linear (Ludwig's initializers), then the norm
    (``batch``: BatchNorm1d, ``layer``: LayerNorm), the activation, and dropout when > 0."""

    def __init__(self, in_size: int, spec: dict[str, Any]) -> None:
        super().__init__()
        self.output_size = int(spec["output_size"])
        self.linear = nn.Linear(in_size, self.output_size, bias=bool(spec["use_bias"]))
        init_linear(self.linear, spec["weights_initializer"], spec["bias_initializer"])
        params = dict(spec["norm_params"] or {})
        self.norm: nn.Module | None = None
        if spec["norm"] == "batch":
            self.norm = nn.BatchNorm1d(self.output_size, **params)
        elif spec["norm"] == "layer":
            self.norm = nn.LayerNorm(self.output_size, **params)
        self.act = activation(spec["activation"])
        self.dropout = nn.Dropout(spec["dropout"]) if spec["dropout"] > 0 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if self.norm is not None:
            h = self.norm(h)
        h = self.act(h)
        return self.dropout(h) if self.dropout is not None else h


def layer_specs(
    fc_layers: Sequence[FCLayerConfig] | None, num_fc_layers: int, defaults: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every layer's settings as Ludwig's ``FCStack`` resolves them: ``fc_layers`` when given
    (each key written wins; a key left out takes ``defaults``; ``[]`` is no layer), else
    ``num_fc_layers`` layers of ``defaults``. ``defaults`` holds every key of :data:`_LAYER_KEYS`."""
    if fc_layers is None:
        return [dict(defaults) for _ in range(num_fc_layers)]
    out = []
    for layer in fc_layers:
        written = {k: getattr(layer, k) for k in layer.model_fields_set if k in _LAYER_KEYS}
        out.append({**defaults, **written})
    return out


class FCStack(nn.Module):
    """(batch, in_size) -> (batch, output_size), a stack of :class:`FCLayer`; no layers is the
    identity (``output_size == in_size``). With ``residual``, a layer whose output is as wide as
    its input adds its input (Ludwig's rule)."""

    def __init__(self, in_size: int, specs: list[dict[str, Any]], residual: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        width = in_size
        for spec in specs:
            self.layers.append(FCLayer(width, spec))
            width = int(spec["output_size"])
        self.output_size = width
        self.in_size = in_size
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in self.layers:
            out = layer(h)
            h = h + out if self.residual and out.shape[-1] == h.shape[-1] else out
        return h


def fc_stack(section: Any, in_size: int, *, activation_key: str, dropout_key: str, residual: bool) -> FCStack:
    """The fully connected stack of a combiner section (``fc_layers``, ``num_fc_layers``,
    ``output_size``, ``use_bias``, the initializers, ``norm``/``norm_params`` and the section's
    activation and dropout under ``activation_key``/``dropout_key``)."""
    defaults = {
        "output_size": section.output_size,
        "use_bias": section.use_bias,
        "weights_initializer": section.weights_initializer,
        "bias_initializer": section.bias_initializer,
        "norm": section.norm,
        "norm_params": section.norm_params,
        "activation": getattr(section, activation_key),
        "dropout": getattr(section, dropout_key),
    }
    return FCStack(in_size, layer_specs(section.fc_layers, section.num_fc_layers, defaults), residual=residual)
