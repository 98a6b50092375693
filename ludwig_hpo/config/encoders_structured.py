"""Encoder sections of set, bag, date and h3 input features, with Ludwig's keys and defaults.
Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ludwig_hpo.config.base import _Base
from ludwig_hpo.config.encoders import FCFields, Initializer, _no_pretrained
from ludwig_hpo.config.encoders_sequence import CellType


class SetEmbedEncoder(FCFields):
    """Ludwig's ``embed`` of set and bag features: the sum of the present tokens' embeddings,
    each weighted by its multi-hot value (set) or count (bag), then ``num_fc_layers``:
    (batch, vocabulary) -> (batch, output_size), or (batch, embedding size) without layers.

    ``dense`` embeddings are ``embedding_size`` wide (at most the vocabulary size unless
    ``force_embedding_size``); ``sparse`` ones are fixed one-hot vectors."""

    type: Literal["embed"] = "embed"
    representation: Literal["dense", "sparse"] = "dense"
    embedding_size: int = Field(default=50, ge=1)
    embeddings_trainable: bool = True
    pretrained_embeddings: str | None = None
    embeddings_on_cpu: bool = False
    force_embedding_size: bool = False
    _pretrained = field_validator("pretrained_embeddings")(_no_pretrained)


class DateEmbedEncoder(FCFields):
    """Ludwig's ``embed`` of dates: the year through a 1-unit linear layer, month, day,
    weekday, day of the year, hour, minute and second as embeddings of ``embedding_size``,
    the second of the day as sin(2 pi s / 86400), concatenated, then ``num_fc_layers``:
    (batch, 9) -> (batch, 7 * embedding_size + 2) without layers."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(default=10, ge=1)
    embeddings_on_cpu: bool = False


class DateWaveEncoder(FCFields):
    """Ludwig's ``wave`` of dates: the year through a 1-unit linear layer and each other
    component as sin(2 pi value / period), concatenated, then ``num_fc_layers``:
    (batch, 9) -> (batch, 9) without layers."""

    type: Literal["wave"] = "wave"


class H3EmbedEncoder(FCFields):
    """Ludwig's ``embed`` of h3 cells: mode, edge, resolution, base cell and the 15 child
    digits embedded (digits past the cell's resolution masked out), reduced by
    ``reduce_output`` (``sum``), then ``num_fc_layers``: (batch, 19) -> (batch, embedding_size)."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(default=10, ge=1)
    embeddings_on_cpu: bool = False
    reduce_output: Literal["sum", "mean", "avg", "max", "concat", "last"] = "sum"


class H3WeightedSumEncoder(FCFields):
    """Ludwig's ``weighted_sum`` of h3 cells: the 19 component embeddings summed with
    learned weights (softmaxed when ``should_softmax``), then ``num_fc_layers``:
    (batch, 19) -> (batch, embedding_size)."""

    type: Literal["weighted_sum"] = "weighted_sum"
    embedding_size: int = Field(default=10, ge=1)
    embeddings_on_cpu: bool = False
    should_softmax: bool = False


class H3RNNEncoder(_Base):
    """Ludwig's ``rnn`` of h3 cells: the 19 component embeddings as a sequence through
    ``num_layers`` recurrent layers of ``hidden_size`` (``cell_type`` rnn / lstm / gru), reduced
    by ``reduce_output`` (``last``): (batch, 19) -> (batch, hidden_size, doubled when bidirectional)."""

    type: Literal["rnn"] = "rnn"
    embedding_size: int = Field(default=10, ge=1)
    embeddings_on_cpu: bool = False
    num_layers: int = Field(default=1, ge=1)
    hidden_size: int = Field(default=10, ge=1)
    cell_type: CellType = "rnn"
    bidirectional: bool = False
    activation: Literal["tanh", "relu"] = "tanh"
    recurrent_activation: Literal["sigmoid"] = "sigmoid"
    use_bias: bool = True
    unit_forget_bias: bool = True
    weights_initializer: Initializer = "xavier_uniform"
    recurrent_initializer: Initializer = "orthogonal"
    bias_initializer: Initializer = "zeros"
    dropout: float = Field(default=0.0, ge=0, le=1)
    recurrent_dropout: float = Field(default=0.0, ge=0, le=1)
    reduce_output: Literal["sum", "mean", "avg", "max", "concat", "last"] = "last"
