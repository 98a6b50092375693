"""Output features: the prediction targets, their decoders and loss weights. Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ludwig_hpo.config.base import _Base
from ludwig_hpo.config.feature_base import _Feature


class Decoder(_Base):
    """Fully connected layers between the combiner and the output projection."""

    num_fc_layers: int = Field(default=0, ge=0, le=8)
    output_size: int = Field(default=32, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)


class OutputFeature(_Feature):
    """A prediction target: ``category`` (cross-entropy), ``binary`` (BCE) or ``number`` (MSE)."""

    type: Literal["category", "binary", "number"]
    decoder: Decoder = Decoder()
    loss_weight: float = Field(default=1.0, gt=0)
