"""Input encoders: one small ``nn.Module`` per feature type, built from its config block.

Every encoder maps its feature's batch to (batch, ``output_size``) floats.
"""

from __future__ import annotations

import torch
from torch import nn

from ludwig_hpo.config import encoders as cfgs
from ludwig_hpo.config.features import InputFeature
from ludwig_hpo.data.preprocess import FeatureMeta


def _mlp(in_size: int, num_layers: int, size: int, dropout: float) -> tuple[nn.Sequential, int]:
    layers: list[nn.Module] = []
    for _ in range(num_layers):
        layers += [nn.Linear(in_size, size), nn.ReLU(), nn.Dropout(dropout)]
        in_size = size
    return nn.Sequential(*layers), in_size


class PassthroughEncoder(nn.Module):
    """(batch, 1) -> (batch, 1), unchanged."""

    output_size = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class DenseEncoder(nn.Module):
    """(batch, 1) -> (batch, output_size) through ``num_layers`` Linear-ReLU-Dropout blocks."""

    def __init__(self, cfg: cfgs.DenseEncoder) -> None:
        super().__init__()
        self.net, self.output_size = _mlp(1, cfg.num_layers, cfg.output_size, cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class EmbedEncoder(nn.Module):
    """(batch,) int64 ids -> (batch, embedding_size); id 0 is the unknown category."""

    def __init__(self, cfg: cfgs.EmbedEncoder, vocab_size: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, cfg.embedding_size)
        self.drop = nn.Dropout(cfg.dropout)
        self.output_size = cfg.embedding_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.embed(x))


class StackedCNNEncoder(nn.Module):
    """(batch, H, W) grayscale -> (batch, output_size).

    ``num_layers`` blocks of Conv2d(kernel_size, same padding) -> ReLU -> MaxPool(2) (the
    pool is skipped once the map is smaller than 4 px), then Dropout -> Linear -> ReLU.
    """

    def __init__(self, cfg: cfgs.StackedCNNEncoder, shape: tuple[int, int]) -> None:
        super().__init__()
        h, w = shape
        blocks: list[nn.Module] = []
        in_ch = 1
        for _ in range(cfg.num_layers):
            blocks += [nn.Conv2d(in_ch, cfg.channels, cfg.kernel_size, padding=cfg.kernel_size // 2), nn.ReLU()]
            if min(h, w) >= 4:
                blocks.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            in_ch = cfg.channels
        self.conv = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.Flatten(), nn.Dropout(cfg.dropout), nn.Linear(in_ch * h * w, cfg.output_size), nn.ReLU()
        )
        self.output_size = cfg.output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x.unsqueeze(1)))


def build_encoder(feature: InputFeature, meta: FeatureMeta) -> nn.Module:
    """The encoder for one input feature; its ``output_size`` attribute is the width it returns.

    Raises:
        ValueError: an encoder type without an implementation (the schema prevents it).
    """
    enc = feature.encoder
    if isinstance(enc, cfgs.PassthroughEncoder):
        return PassthroughEncoder()
    if isinstance(enc, cfgs.DenseEncoder):
        return DenseEncoder(enc)
    if isinstance(enc, cfgs.EmbedEncoder):
        return EmbedEncoder(enc, len(meta.vocab))
    if isinstance(enc, cfgs.StackedCNNEncoder):
        return StackedCNNEncoder(enc, (meta.shape[0], meta.shape[1]))
    raise ValueError(f"no encoder for {type(enc).__name__}")
