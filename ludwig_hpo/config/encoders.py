"""Encoder sections of number, binary, category, vector and image input features
(``encoder: {type: ..., ...}``), with Ludwig's keys and defaults. Typed, frozen; no I/O.

The fully connected keys every Ludwig encoder shares (``fc_layers``, ``num_fc_layers``,
``output_size``, ``activation``, ``norm``, ``dropout``, initializers) are :class:`FCFields`;
sequence and timeseries encoders are in :mod:`~ludwig_hpo.config.encoders_sequence`, set, bag,
date and h3 encoders in :mod:`~ludwig_hpo.config.encoders_structured`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

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


_Pos = Annotated[int, Field(ge=1)]
_NonNeg = Annotated[int, Field(ge=0)]
#: An int, or a pair of ints (height, width), as Ludwig's image convolutions take them.
PosPair = _Pos | tuple[_Pos, _Pos]
NonNegPair = _NonNeg | tuple[_NonNeg, _NonNeg]
#: Ludwig 0.4's names of a convolution's keys, read as today's.
_LEGACY_CONV_KEYS = {
    "num_filters": "out_channels",
    "filter_size": "kernel_size",
    "pool_size": "pool_kernel_size",
    "strides": "stride",
    "pool_strides": "pool_stride",
    "dilation_rate": "dilation",
}
#: The keys of one ``conv_layers`` entry that the encoder's values fill in (encoder key -> layer key).
CONV_LAYER_DEFAULTS = {
    "out_channels": "out_channels",
    "kernel_size": "kernel_size",
    "stride": "stride",
    "padding": "padding",
    "dilation": "dilation",
    "groups": "groups",
    "conv_use_bias": "use_bias",
    "padding_mode": "padding_mode",
    "conv_norm": "norm",
    "conv_norm_params": "norm_params",
    "conv_activation": "activation",
    "conv_dropout": "dropout",
    "pool_function": "pool_function",
    "pool_kernel_size": "pool_kernel_size",
    "pool_stride": "pool_stride",
    "pool_padding": "pool_padding",
    "pool_dilation": "pool_dilation",
}


def _legacy_conv_names(data: Any) -> Any:
    """Ludwig 0.4's ``num_filters``, ``filter_size``, ``pool_size``, ``strides``, ``pool_strides``,
    ``dilation_rate`` -> today's names (both spellings of one key is an error)."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for old, new in _LEGACY_CONV_KEYS.items():
        if old in out:
            if new in out:
                raise RuleError(f"{old} and {new} are one key (Ludwig 0.4 named it {old})", fix=f"keep only {new}")
            out[new] = out.pop(old)
    return out


def _rate_not_switch(value: Any) -> Any:
    """A dropout written ``true`` / ``false`` is Ludwig 0.2's switch for ``training.dropout_rate``,
    not a rate (read as a number it would be 1.0: every activation dropped)."""
    if isinstance(value, bool):
        raise RuleError(
            f"dropout: {str(value).lower()} is Ludwig 0.2's switch for training.dropout_rate, not a rate",
            fix="write the rate itself, e.g. dropout: 0.4 (0 for none)",
        )
    return value


class Conv2DLayerConfig(_Base):
    """One entry of an image ``stacked_cnn``'s ``conv_layers``: Conv2d -> norm -> activation ->
    dropout -> pool (Ludwig's ``Conv2DLayer``); a key left out takes the encoder's value
    (``norm`` from ``conv_norm``, ``use_bias`` from ``conv_use_bias``, ...). Ludwig 0.4's
    ``num_filters``, ``filter_size``, ``pool_size``, ``strides``, ``pool_strides``,
    ``dilation_rate`` are read as ``out_channels``, ``kernel_size``, ``pool_kernel_size``,
    ``stride``, ``pool_stride``, ``dilation``."""

    out_channels: int | None = Field(default=None, ge=1)
    kernel_size: PosPair | None = None
    stride: PosPair | None = None
    padding: NonNegPair | Literal["valid", "same"] | None = None
    dilation: PosPair | None = None
    groups: int | None = Field(default=None, ge=1)
    use_bias: bool | None = None
    padding_mode: Literal["zeros", "reflect", "replicate", "circular"] | None = None
    norm: Literal["batch", "layer"] | None = None
    norm_params: dict[str, Any] | None = None
    activation: Activation = None
    dropout: float | None = Field(default=None, ge=0, le=1)
    pool_function: Literal["max", "average", "avg", "mean"] | None = None
    pool_kernel_size: PosPair | None = None
    pool_stride: PosPair | None = None
    pool_padding: NonNegPair | None = None
    pool_dilation: PosPair | None = None

    _legacy = model_validator(mode="before")(_legacy_conv_names)
    _rate = field_validator("dropout", mode="before")(_rate_not_switch)


class StackedCNNEncoder(_Base):
    """Ludwig's image ``stacked_cnn`` (``Stacked2DCNN``): a stack of 2-d convolutions, each
    Conv2d -> norm -> activation -> dropout -> pool, flattened, then the fully connected stack:
    (batch, channels, height, width) images (grayscale or RGB) -> (batch, last fc size).

    The convolutions: ``conv_layers`` (one entry each), else ``num_conv_layers`` layers of
    ``out_channels`` / ``kernel_size`` / ``pool_kernel_size``, else Ludwig's two layers of 32
    and 64 channels; every key an entry leaves out takes the encoder's value. The fully
    connected stack: ``fc_layers``, else ``num_fc_layers`` (1) layers of ``output_size`` (128),
    ``fc_activation``, ``fc_dropout``, ``fc_norm``, xavier-uniform weights.

    ``height``, ``width``, ``num_channels``: Ludwig's copies of the image preprocessing (it fills
    them itself); written, they must match the prepared images.

    ``num_layers``, ``channels`` and ``dropout`` are this platform's own spellings of
    ``num_conv_layers``, ``out_channels`` (also of the two default layers) and ``conv_dropout``;
    Ludwig 0.4's key names are read as in :class:`Conv2DLayerConfig`.
    """

    type: Literal["stacked_cnn"] = "stacked_cnn"
    conv_layers: list[Conv2DLayerConfig] | None = None
    num_conv_layers: int | None = Field(default=None, ge=0)
    out_channels: int = Field(default=32, ge=1)
    kernel_size: PosPair = 3
    stride: PosPair = 1
    padding: NonNegPair | Literal["valid", "same"] = "valid"
    dilation: PosPair = 1
    groups: int = Field(default=1, ge=1)
    conv_use_bias: bool = True
    padding_mode: Literal["zeros", "reflect", "replicate", "circular"] = "zeros"
    conv_norm: Literal["batch", "layer"] | None = None
    conv_norm_params: dict[str, Any] | None = None
    conv_activation: Activation = "relu"
    conv_dropout: float = Field(default=0.0, ge=0, le=1)
    pool_function: Literal["max", "average", "avg", "mean"] = "max"
    pool_kernel_size: PosPair | None = 2
    pool_stride: PosPair | None = None
    pool_padding: NonNegPair = 0
    pool_dilation: PosPair = 1
    fc_layers: list[FCLayerConfig] | None = None
    num_fc_layers: int = Field(default=1, ge=0)
    output_size: int = Field(default=128, ge=1)
    fc_use_bias: bool = True
    fc_weights_initializer: Initializer = "xavier_uniform"
    fc_bias_initializer: Initializer = "zeros"
    fc_norm: Literal["batch", "layer"] | None = None
    fc_norm_params: dict[str, Any] | None = None
    fc_activation: Activation = "relu"
    fc_dropout: float = Field(default=0.0, ge=0, le=1)
    use_pretrained: bool = False
    height: int | None = Field(default=None, ge=1, description="Ludwig's copy of preprocessing.height")
    width: int | None = Field(default=None, ge=1, description="Ludwig's copy of preprocessing.width")
    num_channels: int | None = Field(default=None, ge=1, description="Ludwig's copy of preprocessing.num_channels")
    num_layers: int | None = Field(default=None, ge=1, le=6, description="this platform's num_conv_layers")
    channels: int | None = Field(default=None, ge=1, le=1024, description="this platform's out_channels")
    dropout: float | None = Field(default=None, ge=0, lt=1, description="this platform's conv_dropout")

    _legacy = model_validator(mode="before")(_legacy_conv_names)
    _rate = field_validator("conv_dropout", "fc_dropout", "dropout", mode="before")(_rate_not_switch)

    @field_validator("use_pretrained")
    @classmethod
    def _no_pretrained_cnn(cls, value: bool) -> bool:
        if value:
            raise RuleError(
                "stacked_cnn has no pretrained weights (it is trained from scratch)", fix="remove use_pretrained"
            )
        return value

    @model_validator(mode="after")
    def _one_spelling(self) -> StackedCNNEncoder:
        for ours, ludwigs in (
            ("num_layers", "num_conv_layers"),
            ("channels", "out_channels"),
            ("dropout", "conv_dropout"),
        ):
            if ours in self.model_fields_set and ludwigs in self.model_fields_set:
                raise RuleError(f"{ours} and {ludwigs} are one key", fix=f"keep only {ludwigs}")
        return self

    def conv_specs(self) -> list[dict[str, Any]]:
        """Every convolution's settings as Ludwig's ``Conv2DStack`` resolves them: the keys of
        :data:`CONV_LAYER_DEFAULTS`' values, each written key winning over the encoder's value."""
        values = self.model_dump()
        if self.channels is not None:
            values["out_channels"] = self.channels
        if self.dropout is not None:
            values["conv_dropout"] = self.dropout
        count = self.num_conv_layers if self.num_conv_layers is not None else self.num_layers
        if self.conv_layers is not None:
            written = [{k: getattr(layer, k) for k in layer.model_fields_set} for layer in self.conv_layers]
        elif count is not None:
            written = [{} for _ in range(count)]
        else:  # Ludwig's default stack; its channels are fixed unless this platform's ``channels`` is set
            written = [{"out_channels": self.channels or 32}, {"out_channels": self.channels or 64}]
        defaults = {layer_key: values[key] for key, layer_key in CONV_LAYER_DEFAULTS.items()}
        return [{**defaults, **layer} for layer in written]


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
    """Ludwig's image encoders this platform does not build: the other torchvision networks,
    ``_resnet_legacy``, ``unet`` (an image-output encoder)."""

    type: Literal[
        "_resnet_legacy",
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
        "resnext",
    ]
    _supported: ClassVar[str] = (
        "stacked_cnn, resnet, vit, mlp_mixer, _vit_legacy (transformers' ViT), dinov2, clip, siglip or auto_transformer"
    )
