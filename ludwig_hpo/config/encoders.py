"""Encoder sections of input features (``encoder: {type: ..., ...}``). Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ludwig_hpo.config.base import _Base


class PassthroughEncoder(_Base):
    """Feeds the (batch, 1) value to the combiner unchanged."""

    type: Literal["passthrough"] = "passthrough"


class DenseEncoder(_Base):
    """``num_layers`` fully connected layers of ``output_size`` units: (batch, 1) -> (batch, output_size)."""

    type: Literal["dense"] = "dense"
    num_layers: int = Field(default=1, ge=1, le=8)
    output_size: int = Field(default=16, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)


class EmbedEncoder(_Base):
    """Learned embedding of each category: (batch,) ids -> (batch, embedding_size)."""

    type: Literal["dense"] = "dense"
    embedding_size: int = Field(default=16, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)


class StackedCNNEncoder(_Base):
    """``num_layers`` conv blocks (conv 3x3 -> ReLU -> max-pool when the map is >= 4 px) then a
    fully connected layer: (batch, height, width) -> (batch, output_size)."""

    type: Literal["stacked_cnn"] = "stacked_cnn"
    num_layers: int = Field(default=2, ge=1, le=6)
    channels: int = Field(default=16, ge=1, le=1024)
    kernel_size: int = Field(default=3, ge=1, le=7)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    output_size: int = Field(default=64, ge=1, le=4096)
