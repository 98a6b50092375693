"""Encoder sections of number, binary, category, vector and image input features
(``encoder: {type: ..., ...}``), with Ludwig's keys and defaults. Typed, frozen; no I/O.

The fully connected keys every Ludwig encoder shares (``fc_layers``, ``num_fc_layers``,
``output_size``, ``activation``, ``norm``, ``dropout``, initializers) are :class:`FCFields`;
sequence and timeseries encoders are in :mod:`~ludwig_hpo.config.encoders_sequence`, set, bag,
date and h3 encoders in :mod:`~ludwig_hpo.config.encoders_structured`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base
from ludwig_hpo.config.combiners import Activation, FCLayerConfig
from ludwig_hpo.config.combiners import InitializerOrDict as Initializer

__all__ = ["Activation", "FCLayerConfig", "Initializer"]

#: Said of a key Ludwig reads that this platform does not train with yet.
NOT_YET = "is not supported yet"


def _no_pretrained(value: Any) -> Any:
    if value is not None:
        raise RuleError(
            f"pretrained_embeddings {NOT_YET} (the embeddings are learned from the data)",
            fix="remove pretrained_embeddings",
        )
    return value


class FCFields(_Base):
    """Ludwig's fully connected stack: ``fc_layers`` (one entry per layer) or ``num_fc_layers``
    layers of ``output_size`` units, each Linear -> norm -> activation -> dropout."""

    fc_layers: list[FCLayerConfig] | None = None
    num_fc_layers: int = Field(default=0, ge=0)
    output_size: int = Field(default=10, ge=1)
    activation: Activation = "relu"
    dropout: float = Field(default=0.0, ge=0, le=1)
    norm: Literal["batch", "layer"] | None = None
    norm_params: dict[str, Any] | None = None
    use_bias: bool = True
    weights_initializer: Initializer = "xavier_uniform"
    bias_initializer: Initializer = "zeros"


class PassthroughEncoder(_Base):
    """Feeds the value to the combiner unchanged: number / binary (batch, 1), vector (batch, D)."""

    type: Literal["passthrough"] = "passthrough"


class DenseEncoder(FCFields):
    """Ludwig's ``dense`` encoder of number, binary and vector features: ``num_layers`` fully
    connected layers of ``output_size`` units (or ``fc_layers``): (batch, D) -> (batch, output_size)."""

    type: Literal["dense"] = "dense"
    num_layers: int = Field(default=1, ge=1)
    output_size: int = Field(default=256, ge=1)


class EmbedEncoder(_Base):
    """Ludwig's ``dense`` category encoder: a learned embedding of each category, (batch,) ids ->
    (batch, min(embedding_size, vocabulary size)); initialized uniform in [-1, 1]
    (``embedding_initializer`` to choose another)."""

    type: Literal["dense"] = "dense"
    embedding_size: int = Field(default=50, ge=1)
    embeddings_trainable: bool = True
    pretrained_embeddings: str | None = None
    embeddings_on_cpu: bool = False
    embedding_initializer: Initializer | None = None
    dropout: float = Field(default=0.0, ge=0, le=1)
    _pretrained = field_validator("pretrained_embeddings")(_no_pretrained)


class CategorySparseEncoder(_Base):
    """Ludwig's ``sparse`` category encoder: a fixed one-hot embedding, (batch,) ids -> (batch, vocabulary size)."""

    type: Literal["sparse"] = "sparse"
    embeddings_trainable: bool = False
    pretrained_embeddings: str | None = None
    embeddings_on_cpu: bool = False
    dropout: float = Field(default=0.0, ge=0, le=1)
    _pretrained = field_validator("pretrained_embeddings")(_no_pretrained)


class CategoryOneHotEncoder(_Base):
    """Ludwig's ``onehot`` category encoder: (batch,) ids -> (batch, vocabulary size) one-hot floats."""

    type: Literal["onehot"] = "onehot"


class CategoryPassthroughEncoder(_Base):
    """Ludwig's ``passthrough`` category encoder: the id itself as one float, (batch,) -> (batch, 1)."""

    type: Literal["passthrough"] = "passthrough"


class StackedCNNEncoder(_Base):
    """``num_layers`` conv blocks (conv 3x3 -> ReLU -> max-pool when the map is >= 4 px) then a
    fully connected layer: (batch, height, width) -> (batch, output_size)."""

    type: Literal["stacked_cnn"] = "stacked_cnn"
    num_layers: int = Field(default=2, ge=1, le=6)
    channels: int = Field(default=16, ge=1, le=1024)
    kernel_size: int = Field(default=3, ge=1, le=7)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    output_size: int = Field(default=64, ge=1, le=4096)


class _Unsupported(_Base):
    """An encoder Ludwig has that this platform does not build yet: refused in one line."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _supported: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else data
        raise RuleError(f"encoder type {kind!r} {NOT_YET}", fix=f"use {cls._supported}")


class UnsupportedImageEncoder(_Unsupported):
    """Ludwig's pretrained and other image encoders (RGB and more vision come later)."""

    type: Literal[
        "resnet",
        "vit",
        "mlp_mixer",
        "unet",
        "alexnet",
        "convnext",
        "densenet",
        "efficientnet",
        "googlenet",
        "inceptionv3",
        "maxvit",
        "mnasnet",
        "mobilenetv2",
        "mobilenetv3",
        "regnet",
        "shufflenet_v2",
        "squeezenet",
        "swin_transformer",
        "vgg",
        "wide_resnet",
    ]
    _supported: ClassVar[str] = "stacked_cnn"
