"""Pretrained Hugging Face text encoders, with Ludwig's keys and defaults
(``ludwig/schema/encoders/text_encoders.py``): ``auto_transformer`` (any ``AutoModel``) and
Ludwig's named aliases that are an ``AutoModel`` with a default model: ``bert``, ``distilbert``,
``roberta``, ``xlmroberta``, ``albert``, ``electra``, ``camembert``. Typed, frozen; no I/O.

Common keys: ``pretrained_model_name_or_path`` (a hub id or a local folder), ``use_pretrained``
(false: the architecture only, random weights, built from the alias's architecture keys),
``trainable`` (false, Ludwig's default: the transformer is frozen), ``reduce_output``
(``cls_pooled``: the model's pooler output; ``sum``, ``mean``/``avg``, ``max``, ``last``,
``concat``; null: every token), ``max_sequence_length`` (the encoder reads at most this many
tokens of each row; null: the whole padded row), ``pretrained_kwargs`` (passed to
``from_pretrained``). The feature's text is tokenised by the model's own tokenizer (Ludwig's
rule). An alias's architecture keys (``hidden_size``, ``num_hidden_layers``, ...) build the model
with ``use_pretrained: false``; with pretrained weights a float key (a dropout, an epsilon)
overrides the pretrained config and any other key must equal it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base
from ludwig_hpo.config.encoders import NOT_YET

#: ``reduce_output`` of a Hugging Face encoder (Ludwig's ``SequenceReducer`` modes and the pooler).
HFReduce = Literal["cls_pooled", "sum", "mean", "avg", "max", "last", "concat"] | None

Activation = Literal["gelu", "relu", "silu", "gelu_new"]
PositionEmbedding = Literal["absolute", "relative_key", "relative_key_query"]


def _reduce(value: Any) -> Any:
    if value in ("None", "none", "null"):
        return None
    if value == "attention":
        raise RuleError(
            f"reduce_output: attention {NOT_YET} for a pretrained encoder",
            fix="use cls_pooled, sum, mean, max, last, concat or null",
        )
    return value


class HFTextEncoder(_Base):
    """What every pretrained Hugging Face text encoder shares.

    Class attributes: ``model_type`` (the transformers ``model_type`` of the alias; None for
    ``auto_transformer``, which takes the folder's), ``has_pooler`` (``cls_pooled`` is possible),
    ``strip_special`` (Ludwig drops the first and the last token before reducing, the
    ``[CLS]``/``[SEP]`` of the aliases; ``auto_transformer`` keeps every token).
    """

    model_type: ClassVar[str | None] = None
    has_pooler: ClassVar[bool | None] = None  # None: known once the model's config is read
    strip_special: ClassVar[bool] = True
    #: Keys that are not transformers config fields (how the model is built or run).
    not_config: ClassVar[tuple[str, ...]] = ()

    pretrained_model_name_or_path: str
    use_pretrained: bool = True
    saved_weights_in_checkpoint: bool = False
    trainable: bool = False
    reduce_output: HFReduce = "sum"
    max_sequence_length: int | None = Field(default=None, ge=1)
    vocab: list[str] | None = None
    vocab_size: int | None = Field(default=None, ge=1)
    pretrained_kwargs: dict[str, Any] | None = None
    adapter: Any = None
    _r = field_validator("reduce_output", mode="before")(_reduce)

    @field_validator("pretrained_model_name_or_path")
    @classmethod
    def _named(cls, v: str) -> str:
        if not v.strip():
            raise RuleError("pretrained_model_name_or_path is empty", fix="give a hub id or a model folder")
        return v

    @field_validator("saved_weights_in_checkpoint")
    @classmethod
    def _not_saved(cls, v: bool) -> bool:
        if v:
            raise RuleError(
                "saved_weights_in_checkpoint: true is what Ludwig writes into a trained model's config; "
                "a sweep trains from the pretrained weights",
                fix="remove saved_weights_in_checkpoint",
            )
        return v

    @field_validator("vocab")
    @classmethod
    def _no_vocab(cls, v: Any) -> Any:
        if v is not None:
            raise RuleError("vocab of a pretrained encoder is its tokenizer's (Ludwig fills it in)", fix="remove vocab")
        return v

    @field_validator("adapter")
    @classmethod
    def _no_adapter(cls, v: Any) -> Any:
        if v is not None:
            raise RuleError(f"adapter (parameter-efficient fine-tuning) {NOT_YET}", fix="remove adapter")
        return v

    @model_validator(mode="after")
    def _pooled_needs_a_pooler(self) -> HFTextEncoder:
        if self.reduce_output == "cls_pooled" and self.has_pooler is False:
            kind = getattr(self, "type", "")
            raise RuleError(
                f"reduce_output cls_pooled needs a pooler and {kind} has none",
                fix="use reduce_output sum, mean, max or last",
            )
        return self

    @classmethod
    def architecture_keys(cls) -> tuple[str, ...]:
        """The alias's keys that go into the transformers config (empty for ``auto_transformer``)."""
        skip = {"type", *cls.not_config}
        return tuple(k for k in cls.model_fields if k not in HFTextEncoder.model_fields and k not in skip)

    def architecture(self) -> dict[str, Any]:
        """Every architecture key and its value: the transformers config of ``use_pretrained: false``."""
        return {k: getattr(self, k) for k in self.architecture_keys() if getattr(self, k) is not None}

    def architecture_overrides(self) -> dict[str, Any]:
        """The architecture keys written in the file (or set by a search): with pretrained weights
        they are checked against, or override, the pretrained config."""
        return {k: getattr(self, k) for k in self.architecture_keys() if k in self.model_fields_set}


class AutoTransformerEncoder(HFTextEncoder):
    """Ludwig's ``auto_transformer``: ``AutoModel`` of ``pretrained_model_name_or_path`` (its
    architecture from the folder's ``config.json``); its token embeddings are resized to the
    tokenizer's ids when they differ (Ludwig's rule for this encoder)."""

    type: Literal["auto_transformer"] = "auto_transformer"
    strip_special: ClassVar[bool] = False
    pretrained_model_name_or_path: str = "bert-base-uncased"
    reduce_output: HFReduce = "sum"


class _BertLike(HFTextEncoder):
    not_config: ClassVar[tuple[str, ...]] = ("gradient_checkpointing",)
    vocab_size: int | None = Field(default=30522, ge=1)
    hidden_size: int = Field(default=768, ge=1)
    num_hidden_layers: int = Field(default=12, ge=1)
    num_attention_heads: int = Field(default=12, ge=1)
    intermediate_size: int = Field(default=3072, ge=1)
    hidden_act: Activation = "gelu"
    hidden_dropout_prob: float = Field(default=0.1, ge=0, le=1)
    attention_probs_dropout_prob: float = Field(default=0.1, ge=0, le=1)
    max_position_embeddings: int = Field(default=512, ge=1)
    type_vocab_size: int = Field(default=2, ge=1)
    initializer_range: float = Field(default=0.02, ge=0)
    layer_norm_eps: float = Field(default=1e-12, ge=0)
    pad_token_id: int = 0
    position_embedding_type: PositionEmbedding = "absolute"
    classifier_dropout: float | None = Field(default=None, ge=0, le=1)
    gradient_checkpointing: bool = False


class BERTEncoder(_BertLike):
    """Ludwig's ``bert``: ``BertModel`` of ``bert-base-uncased`` by default, its pooler output."""

    type: Literal["bert"] = "bert"
    model_type: ClassVar[str | None] = "bert"
    has_pooler: ClassVar[bool | None] = True
    pretrained_model_name_or_path: str = "bert-base-uncased"
    reduce_output: HFReduce = "cls_pooled"


class CamemBERTEncoder(_BertLike):
    """Ludwig's ``camembert``: ``CamembertModel`` of ``camembert-base``, summed over its tokens."""

    type: Literal["camembert"] = "camembert"
    model_type: ClassVar[str | None] = "camembert"
    has_pooler: ClassVar[bool | None] = True
    pretrained_model_name_or_path: str = "camembert-base"
    reduce_output: HFReduce = "sum"


class RoBERTaEncoder(HFTextEncoder):
    """Ludwig's ``roberta``: ``RobertaModel`` of ``roberta-base``, its pooler output."""

    type: Literal["roberta"] = "roberta"
    model_type: ClassVar[str | None] = "roberta"
    has_pooler: ClassVar[bool | None] = True
    pretrained_model_name_or_path: str = "roberta-base"
    reduce_output: HFReduce = "cls_pooled"
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2


class XLMRoBERTaEncoder(RoBERTaEncoder):
    """Ludwig's ``xlmroberta``: ``XLMRobertaModel`` of ``xlm-roberta-base``, its pooler output."""

    type: Literal["xlmroberta"] = "xlmroberta"  # type: ignore[assignment]
    model_type: ClassVar[str | None] = "xlm-roberta"
    pretrained_model_name_or_path: str = "xlm-roberta-base"
    not_config: ClassVar[tuple[str, ...]] = ("add_pooling_layer",)
    add_pooling_layer: bool = True

    @model_validator(mode="after")
    def _pooled_needs_the_pooling_layer(self) -> XLMRoBERTaEncoder:
        if self.reduce_output == "cls_pooled" and not self.add_pooling_layer:
            raise RuleError(
                "reduce_output cls_pooled needs add_pooling_layer: true",
                fix="set add_pooling_layer: true or reduce_output sum",
            )
        return self


class DistilBERTEncoder(HFTextEncoder):
    """Ludwig's ``distilbert``: ``DistilBertModel`` of ``distilbert-base-uncased`` (no pooler),
    summed over its tokens."""

    type: Literal["distilbert"] = "distilbert"
    model_type: ClassVar[str | None] = "distilbert"
    has_pooler: ClassVar[bool | None] = False
    pretrained_model_name_or_path: str = "distilbert-base-uncased"
    reduce_output: HFReduce = "sum"
    vocab_size: int | None = Field(default=30522, ge=1)
    max_position_embeddings: int = Field(default=512, ge=1)
    sinusoidal_pos_embds: bool = False
    n_layers: int = Field(default=6, ge=1)
    n_heads: int = Field(default=12, ge=1)
    dim: int = Field(default=768, ge=1)
    hidden_dim: int = Field(default=3072, ge=1)
    dropout: float = Field(default=0.1, ge=0, le=1)
    attention_dropout: float = Field(default=0.1, ge=0)
    activation: Activation = "gelu"
    initializer_range: float = Field(default=0.02, ge=0)
    qa_dropout: float = Field(default=0.1, ge=0, le=1)
    seq_classif_dropout: float = Field(default=0.2, ge=0, le=1)


class ALBERTEncoder(HFTextEncoder):
    """Ludwig's ``albert``: ``AlbertModel`` of ``albert-base-v2``, its pooler output."""

    type: Literal["albert"] = "albert"
    model_type: ClassVar[str | None] = "albert"
    has_pooler: ClassVar[bool | None] = True
    pretrained_model_name_or_path: str = "albert-base-v2"
    reduce_output: HFReduce = "cls_pooled"
    vocab_size: int | None = Field(default=30000, ge=1)
    embedding_size: int = Field(default=128, ge=1)
    hidden_size: int = Field(default=4096, ge=1)
    num_hidden_layers: int = Field(default=12, ge=1)
    num_hidden_groups: int = Field(default=1, ge=1)
    num_attention_heads: int = Field(default=64, ge=1)
    intermediate_size: int = Field(default=16384, ge=1)
    inner_group_num: int = Field(default=1, ge=1)
    hidden_act: Activation = "gelu_new"
    hidden_dropout_prob: float = Field(default=0.0, ge=0, le=1)
    attention_probs_dropout_prob: float = Field(default=0.0, ge=0, le=1)
    max_position_embeddings: int = Field(default=512, ge=1)
    type_vocab_size: int = Field(default=2, ge=1)
    initializer_range: float = Field(default=0.02, ge=0)
    layer_norm_eps: float = Field(default=1e-12, ge=0)
    classifier_dropout_prob: float = Field(default=0.1, ge=0, le=1)
    position_embedding_type: PositionEmbedding = "absolute"
    pad_token_id: int = 0
    bos_token_id: int = 2
    eos_token_id: int = 3


class ELECTRAEncoder(HFTextEncoder):
    """Ludwig's ``electra``: ``ElectraModel`` of ``google/electra-small-discriminator`` (no pooler),
    summed over its tokens."""

    type: Literal["electra"] = "electra"
    model_type: ClassVar[str | None] = "electra"
    has_pooler: ClassVar[bool | None] = False
    pretrained_model_name_or_path: str = "google/electra-small-discriminator"
    reduce_output: HFReduce = "sum"
    vocab_size: int | None = Field(default=30522, ge=1)
    embedding_size: int = Field(default=128, ge=1)
    hidden_size: int = Field(default=256, ge=1)
    num_hidden_layers: int = Field(default=12, ge=1)
    num_attention_heads: int = Field(default=4, ge=1)
    intermediate_size: int = Field(default=1024, ge=1)
    hidden_act: Activation = "gelu"
    hidden_dropout_prob: float = Field(default=0.1, ge=0, le=1)
    attention_probs_dropout_prob: float = Field(default=0.1, ge=0, le=1)
    max_position_embeddings: int = Field(default=512, ge=1)
    type_vocab_size: int = Field(default=2, ge=1)
    initializer_range: float = Field(default=0.02, ge=0)
    layer_norm_eps: float = Field(default=1e-12, ge=0)
    position_embedding_type: PositionEmbedding = "absolute"
    classifier_dropout: float | None = Field(default=None, ge=0, le=1)


class UnsupportedHFTextEncoder(_Base):
    """Ludwig's other Hugging Face text encoders (not a plain ``AutoModel`` with a default model,
    or models transformers no longer ships): refused in one line, pointing at ``auto_transformer``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal["gpt", "gpt2", "xlm", "xlnet", "ctrl", "t5", "mt5", "flaubert", "longformer", "transformer_xl"]

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else data
        raise RuleError(
            f"text encoder type {kind!r} {NOT_YET}",
            fix="use auto_transformer with that model's pretrained_model_name_or_path, "
            "or one of bert, distilbert, roberta, xlmroberta, albert, electra, camembert",
        )


#: Every pretrained text encoder built here, for the text feature's encoder union.
HF_TEXT_ENCODERS = (
    AutoTransformerEncoder,
    BERTEncoder,
    DistilBERTEncoder,
    RoBERTaEncoder,
    XLMRoBERTaEncoder,
    ALBERTEncoder,
    ELECTRAEncoder,
    CamemBERTEncoder,
)

#: Their ``type`` names.
HF_TEXT_ENCODER_TYPES = tuple(cls.model_fields["type"].default for cls in HF_TEXT_ENCODERS)
