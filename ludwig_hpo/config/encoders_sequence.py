"""Encoder sections of sequence and timeseries input features, with Ludwig's keys and
defaults: ``passthrough``, ``embed``, ``parallel_cnn``, ``stacked_cnn``, ``rnn``. Typed,
frozen; no I/O.

``reduce_output`` (Ludwig's reduction over the sequence axis): ``sum``, ``mean`` / ``avg``,
``max``, ``last``, ``concat`` (flatten), or null to hand the combiner the whole sequence,
(batch, length, size); ``attention`` is not supported yet.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base
from ludwig_hpo.config.encoders import (
    NOT_YET,
    Activation,
    FCFields,
    FCLayerConfig,
    Initializer,
    _no_pretrained,
)

#: Ludwig's recurrent cell names (the ``block`` / ``cudnn`` / ``ln`` variants are torch's LSTM and GRU).
CellType = Literal["rnn", "lstm", "lstm_block", "ln", "lstm_cudnn", "gru", "gru_block", "gru_cudnn"]

Reduce = Literal["sum", "mean", "avg", "max", "last", "concat", "attention"] | None


def _reduce(value: Any) -> Any:
    if value in ("None", "none", "null"):
        return None
    if value == "attention":
        raise RuleError(f"reduce_output: attention {NOT_YET}", fix="use sum, mean, max, last, concat or null")
    return value


class _Embedding(_Base):
    """How token ids become vectors: ``dense`` learned embeddings of ``embedding_size``
    (at most the vocabulary size), or ``sparse`` fixed one-hot vectors."""

    representation: Literal["dense", "sparse"] = "dense"
    embedding_size: int = Field(default=256, ge=1)
    embeddings_trainable: bool = True
    pretrained_embeddings: str | None = None
    embeddings_on_cpu: bool = False
    _pretrained = field_validator("pretrained_embeddings")(_no_pretrained)


class SequencePassthroughEncoder(_Base):
    """The values themselves as floats: (batch, length) -> (batch, length, 1), reduced by ``reduce_output``."""

    type: Literal["passthrough"] = "passthrough"
    encoding_size: int | None = None
    reduce_output: Reduce = None
    _r = field_validator("reduce_output", mode="before")(_reduce)


class SequenceEmbedEncoder(_Embedding):
    """Ludwig's ``embed``: the tokens' embeddings, reduced by ``reduce_output`` (a bag of
    embeddings with ``sum``): (batch, length) ids -> (batch, embedding size)."""

    type: Literal["embed"] = "embed"
    dropout: float = Field(default=0.0, ge=0, le=1)
    weights_initializer: Initializer = "uniform"
    reduce_output: Reduce = "sum"
    _r = field_validator("reduce_output", mode="before")(_reduce)


class _Filters(_Embedding, FCFields):
    """What the CNN encoders share: the embedding (``should_embed``; timeseries values are fed
    as one channel), the filters, the fully connected stack after the reduction."""

    should_embed: bool = True
    num_filters: int = Field(default=256, ge=1)
    filter_size: int = Field(default=3, ge=1)
    pool_function: Literal["max", "average", "avg", "mean"] = "max"
    pool_size: int | None = Field(default=None, ge=1)
    num_fc_layers: int | None = Field(default=None, ge=0)  # type: ignore[assignment]  # None: Ludwig's two layers
    output_size: int = Field(default=256, ge=1)
    _r = field_validator("reduce_output", mode="before", check_fields=False)(_reduce)

    @model_validator(mode="after")
    def _one_fc_layout(self) -> _Filters:
        if self.fc_layers is not None and self.num_fc_layers is not None:
            raise RuleError("set fc_layers or num_fc_layers, not both", fix="remove num_fc_layers")
        return self

    def fc_spec(self) -> list[FCLayerConfig]:
        """The fully connected layers after the reduction: ``fc_layers``, ``num_fc_layers`` of
        ``output_size``, or Ludwig's default two (512 then 256 units)."""
        if self.fc_layers is not None:
            return list(self.fc_layers)
        if self.num_fc_layers is not None:
            return [FCLayerConfig() for _ in range(self.num_fc_layers)]
        return [FCLayerConfig(output_size=512), FCLayerConfig(output_size=256)]


class _Conv(_Filters):
    """A CNN encoder of one list of convolutions (``conv_layers`` or ``num_conv_layers``)."""

    conv_layers: list[dict[str, Any]] | None = None
    num_conv_layers: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_layout(self) -> _Conv:
        if self.conv_layers is not None and self.num_conv_layers is not None:
            raise RuleError("set conv_layers or num_conv_layers, not both", fix="remove num_conv_layers")
        return self


class ParallelCNNEncoder(_Conv):
    """Ludwig's ``parallel_cnn``: 1-d convolutions of several widths side by side (filter sizes
    2, 3, 4, 5 by default) over the embedded sequence, concatenated, reduced, then the fully
    connected stack: (batch, length) -> (batch, last fc size)."""

    type: Literal["parallel_cnn"] = "parallel_cnn"
    reduce_output: Reduce = "sum"

    def conv_spec(self) -> list[dict[str, Any]]:
        """Each parallel convolution's keys (``filter_size``, ``num_filters``, ``pool_size``, ...)."""
        if self.conv_layers is not None:
            return list(self.conv_layers)
        if self.num_conv_layers is not None:
            return [{} for _ in range(self.num_conv_layers)]
        return [{"filter_size": k} for k in (2, 3, 4, 5)]


class SequenceStackedCNNEncoder(_Conv):
    """Ludwig's ``stacked_cnn`` over sequences: 1-d convolutions one after another (six by
    default: widths 7, 7, 3, 3, 3, 3, max-pooled by 3 after the 1st, 2nd and 6th), reduced,
    then the fully connected stack: (batch, length) -> (batch, last fc size)."""

    type: Literal["stacked_cnn"] = "stacked_cnn"
    strides: int = Field(default=1, ge=1)
    padding: Literal["same", "valid"] = "same"
    dilation_rate: int = Field(default=1, ge=1)
    pool_strides: int | None = Field(default=None, ge=1)
    pool_padding: Literal["same", "valid"] = "same"
    reduce_output: Reduce = "max"

    def conv_spec(self) -> list[dict[str, Any]]:
        """Each stacked convolution's keys (``filter_size``, ``num_filters``, ``pool_size``, ...)."""
        if self.conv_layers is not None:
            return list(self.conv_layers)
        if self.num_conv_layers is not None:
            return [{} for _ in range(self.num_conv_layers)]
        sizes = ((7, 3), (7, 3), (3, None), (3, None), (3, None), (3, 3))
        return [{"filter_size": k, "pool_size": p} for k, p in sizes]


class RNNEncoder(_Embedding, FCFields):
    """Ludwig's ``rnn``: the embedded sequence through ``num_layers`` recurrent layers of
    ``state_size`` (``cell_type`` rnn / lstm / gru, ``bidirectional`` doubles the width), reduced
    (``last`` by default), then ``num_fc_layers``: (batch, length) -> (batch, size)."""

    type: Literal["rnn"] = "rnn"
    should_embed: bool = True
    num_layers: int = Field(default=1, ge=1)
    state_size: int = Field(default=256, ge=1)
    cell_type: CellType = "rnn"
    bidirectional: bool = False
    activation: Activation = "tanh"
    recurrent_activation: Literal["sigmoid"] = "sigmoid"
    unit_forget_bias: bool = True
    recurrent_initializer: Initializer = "orthogonal"
    recurrent_dropout: float = Field(default=0.0, ge=0, le=1)
    fc_activation: Activation = "relu"
    fc_dropout: float = Field(default=0.0, ge=0, le=1)
    output_size: int = Field(default=256, ge=1)
    reduce_output: Reduce = "last"
    _r = field_validator("reduce_output", mode="before")(_reduce)

    @field_validator("activation")
    @classmethod
    def _cell_activation(cls, v: Any) -> Any:
        if v not in ("tanh", "relu"):
            raise RuleError(f"activation {v!r} of a recurrent cell {NOT_YET}", fix="use tanh or relu")
        return v


class StackedParallelCNNEncoder(_Filters):
    """Ludwig's ``stacked_parallel_cnn``: ``stacked_layers`` of parallel convolutions (three of
    filter sizes 2, 3, 4, 5 by default), each reading the previous one's concatenated filters,
    reduced (``sum``), then the fully connected stack (512 and 256 units by default)."""

    type: Literal["stacked_parallel_cnn"] = "stacked_parallel_cnn"
    stacked_layers: list[list[dict[str, Any]]] | None = None
    num_stacked_layers: int | None = Field(default=None, ge=1)
    reduce_output: Reduce = "sum"

    @model_validator(mode="after")
    def _one_stack(self) -> StackedParallelCNNEncoder:
        if self.stacked_layers is not None and self.num_stacked_layers is not None:
            raise RuleError("set stacked_layers or num_stacked_layers, not both", fix="remove num_stacked_layers")
        return self

    def stacked_spec(self) -> list[list[dict[str, Any]]]:
        """Each stacked layer's parallel convolutions' keys."""
        if self.stacked_layers is not None:
            return [list(layer) for layer in self.stacked_layers]
        parallel = [{"filter_size": k} for k in (2, 3, 4, 5)]
        return [list(parallel) for _ in range(self.num_stacked_layers or 3)]


class CNNRNNEncoder(_Embedding, FCFields):
    """Ludwig's ``cnnrnn``: the embedded sequence through convolutions (two by default, of
    width ``filter_size`` 5, the first max-pooled by 3), then ``num_rec_layers`` recurrent
    layers of ``state_size``, reduced (``last``), then ``num_fc_layers``."""

    type: Literal["cnnrnn"] = "cnnrnn"
    should_embed: bool = True
    conv_layers: list[dict[str, Any]] | None = None
    num_conv_layers: int | None = Field(default=None, ge=1)
    num_filters: int = Field(default=256, ge=1)
    filter_size: int = Field(default=5, ge=1)
    strides: int = Field(default=1, ge=1)
    padding: Literal["same", "valid"] = "same"
    dilation_rate: int = Field(default=1, ge=1)
    conv_activation: Activation = "relu"
    conv_dropout: float = Field(default=0.0, ge=0, le=1)
    pool_function: Literal["max", "average", "avg", "mean"] = "max"
    pool_size: int | None = Field(default=2, ge=1)
    pool_strides: int | None = Field(default=None, ge=1)
    pool_padding: Literal["same", "valid"] = "same"
    num_rec_layers: int = Field(default=1, ge=1)
    state_size: int = Field(default=256, ge=1)
    cell_type: CellType = "rnn"
    bidirectional: bool = False
    activation: Activation = "tanh"
    recurrent_activation: Literal["sigmoid"] = "sigmoid"
    unit_forget_bias: bool = True
    recurrent_initializer: Initializer = "orthogonal"
    recurrent_dropout: float = Field(default=0.0, ge=0, le=1)
    fc_activation: Activation = "relu"
    fc_dropout: float = Field(default=0.0, ge=0, le=1)
    output_size: int = Field(default=256, ge=1)
    reduce_output: Reduce = "last"
    _r = field_validator("reduce_output", mode="before")(_reduce)

    @model_validator(mode="after")
    def _one_layout(self) -> CNNRNNEncoder:
        if self.conv_layers is not None and self.num_conv_layers is not None:
            raise RuleError("set conv_layers or num_conv_layers, not both", fix="remove num_conv_layers")
        if self.activation not in ("tanh", "relu"):
            raise RuleError(f"activation {self.activation!r} of a recurrent cell {NOT_YET}", fix="use tanh or relu")
        return self

    def conv_spec(self) -> list[dict[str, Any]]:
        """Each convolution's keys before the recurrent layers."""
        if self.conv_layers is not None:
            return list(self.conv_layers)
        if self.num_conv_layers is not None:
            return [{} for _ in range(self.num_conv_layers)]
        return [{"pool_size": 3}, {"pool_size": None}]


class SequenceTransformerEncoder(_Embedding, FCFields):
    """Ludwig's ``transformer``: token plus position embeddings (projected to ``hidden_size``
    when their width differs), ``num_layers`` post-norm blocks of ``num_heads``-head
    self-attention and a ``transformer_output_size`` feed-forward layer, reduced (``last``),
    then ``num_fc_layers``: (batch, hidden_size) by default."""

    type: Literal["transformer"] = "transformer"
    should_embed: bool = True
    num_layers: int = Field(default=1, ge=1)
    hidden_size: int = Field(default=256, ge=1)
    num_heads: int = Field(default=8, ge=1)
    transformer_output_size: int = Field(default=256, ge=1)
    dropout: float = Field(default=0.1, ge=0, le=1)
    fc_activation: Activation = "relu"
    fc_dropout: float = Field(default=0.0, ge=0, le=1)
    fc_residual: bool = False
    output_size: int = Field(default=256, ge=1)
    reduce_output: Reduce = "last"
    _r = field_validator("reduce_output", mode="before")(_reduce)

    @model_validator(mode="after")
    def _heads_divide(self) -> SequenceTransformerEncoder:
        if self.hidden_size % self.num_heads:
            raise RuleError(
                f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}",
                fix="make hidden_size a multiple of num_heads",
            )
        return self
