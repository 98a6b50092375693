"""The declarative model: encoders -> concat combiner -> output heads (Ludwig's ECD)."""

from __future__ import annotations

import torch
from torch import nn

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.encoders import build_encoder
from ludwig_hpo.model.outputs import OutputHead


class ECDModel(nn.Module):
    """Encoder-combiner-decoder model built from a sweep config.

    ``forward(inputs)`` takes ``{input feature name: batch tensor}`` (shapes as in
    :class:`~ludwig_hpo.data.PreparedData`) and returns ``{output feature name: logits}``.
    """

    def __init__(self, cfg: SweepConfig, meta: dict[str, FeatureMeta]) -> None:
        super().__init__()
        self.input_names = [f.name for f in cfg.input_features]
        self.encoders = nn.ModuleDict({f.name: build_encoder(f, meta[f.name]) for f in cfg.input_features})
        width = sum(e.output_size for e in self.encoders.values())
        c = cfg.combiner
        layers: list[nn.Module] = []
        for _ in range(c.num_fc_layers):
            layers += [nn.Linear(width, c.output_size), nn.ReLU(), nn.Dropout(c.dropout)]
            width = c.output_size
        self.combiner = nn.Sequential(*layers)
        self.heads = nn.ModuleDict({f.name: OutputHead(f, meta[f.name], width) for f in cfg.output_features})

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        h = torch.cat([self.encoders[n](inputs[n]) for n in self.input_names], dim=-1)
        h = self.combiner(h)
        return {name: head(h) for name, head in self.heads.items()}


def build_model(cfg: SweepConfig, meta: dict[str, FeatureMeta]) -> ECDModel:
    """Build the model of one trial's config; parameters are initialized from torch's global RNG."""
    return ECDModel(cfg, meta)
