"""The ``combiner`` section: how encoder outputs become one hidden vector. Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ludwig_hpo.config.base import _Base


class CombinerConfig(_Base):
    """``concat``: concatenate encoder outputs, then ``num_fc_layers`` x (Linear(output_size), ReLU, dropout)."""

    type: Literal["concat"] = "concat"
    num_fc_layers: int = Field(default=1, ge=0, le=8)
    output_size: int = Field(default=64, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)
