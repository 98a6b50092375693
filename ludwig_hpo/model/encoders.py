"""Input encoders: one ``nn.Module`` per feature type and encoder, built from its config block
with Ludwig's semantics.

Every encoder maps its feature's batch to (batch, ``output_size``) floats; a sequence encoder
with ``reduce_output: null`` returns (batch, length, ``output_size``) and has
``sequence = True``. The sequence and timeseries encoders are in
:mod:`~ludwig_hpo.model.encoders_sequence`, the set, bag, date and h3 encoders in
:mod:`~ludwig_hpo.model.encoders_structured`. Runs on every rank.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ludwig_hpo.config import encoders as cfgs
from ludwig_hpo.config import encoders_hf as hf_cfgs
from ludwig_hpo.config import encoders_sequence as seq_cfgs
from ludwig_hpo.config import encoders_structured as st_cfgs
from ludwig_hpo.config.features import InputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model import encoders_structured as st
from ludwig_hpo.model.encoder_parts import fc_stack
from ludwig_hpo.model.encoders_image import Stacked2DCNN
from ludwig_hpo.model.encoders_image_build import IMAGE_CONFIGS, build_image_encoder
from ludwig_hpo.model.encoders_sequence import build_sequence_encoder
from ludwig_hpo.model.init import init_embedding


class PassthroughEncoder(nn.Module):
    """(batch, width) -> (batch, width), unchanged: a number or binary (width 1), a vector (width D)."""

    output_size = 1

    def __init__(self, width: int = 1) -> None:
        super().__init__()
        if width != 1:
            self.output_size = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class DenseEncoder(nn.Module):
    """Ludwig's ``dense``: (batch, in_size) -> (batch, output_size) through ``num_layers``
    (or ``fc_layers``) of Linear -> norm -> activation -> dropout, Ludwig's initializers."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.DenseEncoder, in_size: int = 1) -> None:
        super().__init__()
        self.net = fc_stack(cfg, in_size, cfg.num_layers)
        self.output_size = int(self.net.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.float())


class EmbedEncoder(nn.Module):
    """Ludwig's ``dense`` category encoder: (batch,) int64 ids -> (batch, min(embedding_size,
    vocabulary)); id 0 is the unknown category. The table starts uniform in [-1, 1] (or by
    ``embedding_initializer``) and is frozen unless ``embeddings_trainable``."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.EmbedEncoder, vocab_size: int) -> None:
        super().__init__()
        self.output_size = min(cfg.embedding_size, vocab_size)
        self.embed = nn.Embedding(vocab_size, self.output_size)
        init_embedding(self.embed, cfg.embedding_initializer)
        self.embed.weight.requires_grad_(cfg.embeddings_trainable)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.embed(x))


class OneHotEncoder(nn.Module):
    """Ludwig's ``sparse`` and ``onehot`` category encoders: (batch,) ids -> (batch, vocabulary)
    one-hot floats (no parameters: the sparse table is the identity, frozen)."""

    def __init__(self, vocab_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.output_size = vocab_size
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(F.one_hot(x.long(), self.output_size).float())


class CategoryPassthroughEncoder(nn.Module):
    """Ludwig's ``passthrough`` category encoder: (batch,) ids -> (batch, 1), the id as a float."""

    output_size = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float().unsqueeze(-1)


def _width(meta: FeatureMeta) -> int:
    """The prepared width of a (batch, width) input: 1 for a number or binary, else its shape."""
    return int(meta.shape[0]) if meta.shape else 1


def build_encoder(feature: InputFeature, meta: FeatureMeta) -> nn.Module:
    """The encoder for one input feature; its ``output_size`` attribute is the width it returns.

    Raises:
        ValueError: an encoder type without an implementation (the schema prevents it).
    """
    enc: Any = feature.encoder
    if isinstance(enc, cfgs.PassthroughEncoder):
        return PassthroughEncoder(_width(meta))
    if isinstance(enc, cfgs.DenseEncoder):
        return DenseEncoder(enc, _width(meta))
    if isinstance(enc, cfgs.EmbedEncoder):
        return EmbedEncoder(enc, len(meta.vocab))
    if isinstance(enc, cfgs.CategorySparseEncoder):
        return OneHotEncoder(len(meta.vocab), enc.dropout)
    if isinstance(enc, cfgs.CategoryOneHotEncoder):
        return OneHotEncoder(len(meta.vocab))
    if isinstance(enc, cfgs.CategoryPassthroughEncoder):
        return CategoryPassthroughEncoder()
    if isinstance(enc, cfgs.StackedCNNEncoder):
        return Stacked2DCNN(enc, tuple(meta.shape))
    if isinstance(enc, IMAGE_CONFIGS):
        return build_image_encoder(enc, meta)
    if isinstance(
        enc,
        seq_cfgs.SequencePassthroughEncoder
        | seq_cfgs.SequenceEmbedEncoder
        | seq_cfgs.ParallelCNNEncoder
        | seq_cfgs.SequenceStackedCNNEncoder
        | seq_cfgs.RNNEncoder
        | seq_cfgs.StackedParallelCNNEncoder
        | seq_cfgs.CNNRNNEncoder
        | seq_cfgs.SequenceTransformerEncoder,
    ):
        vocab = len(meta.vocab) if feature.type in ("sequence", "text") else None
        return build_sequence_encoder(enc, vocab, int(meta.shape[0]))
    if isinstance(enc, hf_cfgs.HFTextEncoder):
        from ludwig_hpo.model.encoders_hf import HFTextEncoderModule  # transformers only for such encoders

        return HFTextEncoderModule(enc, len(meta.vocab), int(meta.stats["padding_id"]), int(meta.shape[0]))
    if isinstance(enc, st_cfgs.SetEmbedEncoder):
        return st.SetEmbedEncoder(enc, len(meta.vocab))
    if isinstance(enc, st_cfgs.DateEmbedEncoder):
        return st.DateEmbedEncoder(enc)
    if isinstance(enc, st_cfgs.DateWaveEncoder):
        return st.DateWaveEncoder(enc)
    if isinstance(enc, st_cfgs.H3EmbedEncoder):
        return st.H3EmbedEncoder(enc)
    if isinstance(enc, st_cfgs.H3WeightedSumEncoder):
        return st.H3WeightedSumEncoder(enc)
    if isinstance(enc, st_cfgs.H3RNNEncoder):
        return st.H3RNNEncoder(enc)
    raise ValueError(f"no encoder for {type(enc).__name__}")
