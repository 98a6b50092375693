"""The ``combiner`` section: how the encoder outputs become one hidden tensor. Typed, frozen; no I/O.

One model per Ludwig combiner ``type``, with Ludwig's keys and defaults (``ludwig/schema/combiners``).
A section written without ``type`` is ``concat``. :func:`check_combiner` holds the rules that need
the input features (entity names, the main sequence feature); the root config calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from ludwig_hpo.config.base import KeyedValueError, RuleError, _Base, default_type
from ludwig_hpo.config.fc import (
    Activation,
    FCLayerConfig,
    InitializerOrDict,
    Reduction,
    check_bias_initializer,
    check_norm_params,
)

__all__ = ["Activation", "CombinerConfig", "FCLayerConfig", "InitializerOrDict", "Reduction", "check_combiner"]


class _FCOptions(_Base):
    """The fully connected stack every combiner with ``fc_layers`` shares (Ludwig's ``FCStack``):
    ``fc_layers`` when given, else ``num_fc_layers`` layers of ``output_size``."""

    fc_layers: list[FCLayerConfig] | None = None
    num_fc_layers: int = Field(default=0, ge=0)
    output_size: int = Field(default=256, ge=1)
    use_bias: bool = True
    weights_initializer: InitializerOrDict = "xavier_uniform"
    bias_initializer: InitializerOrDict = "zeros"
    norm: Literal["batch", "layer"] | None = None
    norm_params: dict[str, Any] | None = None

    _bias = field_validator("bias_initializer")(check_bias_initializer)

    @model_validator(mode="after")
    def _norm_params_fit(self) -> _FCOptions:
        check_norm_params(self.norm, self.norm_params)
        return self


class ConcatCombiner(_FCOptions):
    """``concat``: the encoder outputs joined along their last axis, then the fully connected
    stack (none by default, as in Ludwig: the heads see the concatenation itself)."""

    type: Literal["concat"] = "concat"
    activation: Activation = "relu"
    dropout: float = Field(default=0.0, ge=0, le=1)
    flatten_inputs: bool = Field(default=False, description="flatten (batch, ...) encoder outputs to vectors first")
    residual: bool = Field(default=False, description="add each layer's input to its output where the sizes match")


class TabNetCombiner(_Base):
    """``tabnet``: Arik and Pfister's TabNet over the concatenated encoder outputs (Ludwig's
    ``TabNet``): ``num_steps`` steps of attentive feature selection (``entmax_mode``) and
    feature transformers of ``num_total_blocks`` GLU blocks (``num_shared_blocks`` shared)."""

    type: Literal["tabnet"] = "tabnet"
    size: int = Field(default=32, ge=1, description="N_a: width of the attentive part of each step")
    output_size: int = Field(default=128, ge=1, description="N_d: width of the decision output")
    num_steps: int = Field(default=3, ge=1)
    num_total_blocks: int = Field(default=4, ge=1)
    num_shared_blocks: int = Field(default=2, ge=0)
    relaxation_factor: float = Field(default=1.5, description="gamma: how often a feature may be reused")
    bn_epsilon: float = Field(default=1e-3, gt=0)
    bn_momentum: float = Field(default=0.05, ge=0, le=1, description="torch's momentum (1 - m_B of the paper)")
    bn_virtual_bs: int | None = Field(default=1024, ge=1, description="ghost batch norm's virtual batch; null: plain")
    sparsity: float = Field(default=1e-4, ge=0, description="lambda_sparse: weight of the mask entropy loss")
    entmax_mode: Literal["entmax15", "sparsemax", "constant", "adaptive"] = "sparsemax"
    entmax_alpha: float = Field(default=1.5, ge=1, le=2, description="alpha of constant and adaptive entmax")
    dropout: float = Field(default=0.05, ge=0, le=1)

    @model_validator(mode="after")
    def _shared_within_total(self) -> TabNetCombiner:
        if self.num_shared_blocks > self.num_total_blocks:
            raise RuleError(
                f"num_shared_blocks ({self.num_shared_blocks}) exceeds num_total_blocks ({self.num_total_blocks})",
                fix="set num_shared_blocks <= num_total_blocks",
            )
        return self


class _TransformerOptions(_FCOptions):
    """Ludwig's ``CommonTransformerConfig``: the transformer stack and the fully connected stack after it."""

    dropout: float = Field(default=0.1, ge=0, le=1, description="dropout of the transformer blocks")
    transformer_output_size: int = Field(default=256, ge=1, description="width of each block's feed-forward layer")
    hidden_size: int = Field(default=256, ge=1, description="width each input is projected to, and the blocks'")
    num_layers: int = Field(default=1, ge=1)
    num_heads: int = Field(default=8, ge=1)
    fc_dropout: float = Field(default=0.0, ge=0, le=1)
    fc_activation: Activation = "relu"
    fc_residual: bool = False

    @model_validator(mode="after")
    def _heads_divide(self) -> _TransformerOptions:
        if self.hidden_size % self.num_heads:
            raise RuleError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_heads ({self.num_heads})",
                fix="choose a hidden_size that is a multiple of num_heads",
            )
        return self


class TransformerCombiner(_TransformerOptions):
    """``transformer``: each encoder output projected to ``hidden_size`` is one token; the tokens
    pass ``num_layers`` transformer blocks, are reduced by ``reduce_output`` and enter the fully
    connected stack. ``reduce_output: null`` keeps (batch, inputs, hidden_size)."""

    type: Literal["transformer"] = "transformer"
    reduce_output: Reduction = "mean"


class TabTransformerCombiner(_TransformerOptions):
    """``tabtransformer``: Huang et al.'s TabTransformer. Inputs other than number and binary
    become tokens (projected to ``hidden_size``, optionally with an embedding of the feature's
    name) for the transformer; number and binary encodings skip it through a layer norm; both
    are joined for the fully connected stack."""

    type: Literal["tabtransformer"] = "tabtransformer"
    embed_input_feature_name: Literal["add"] | Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="add: a name embedding of hidden_size added to each token; an int: one of that size concatenated",
    )
    reduce_output: Reduction = "concat"

    @model_validator(mode="after")
    def _name_embedding_fits(self) -> TabTransformerCombiner:
        if self.reduce_output in (None, "none", "None"):
            raise RuleError(
                "the tabtransformer joins its reduced tokens with the number and binary inputs: reduce_output is null",
                fix="set reduce_output: concat (Ludwig's default), sum, mean, max, last or attention",
            )
        e = self.embed_input_feature_name
        if isinstance(e, int) and e >= self.hidden_size:
            raise RuleError(
                f"embed_input_feature_name ({e}) must be smaller than hidden_size ({self.hidden_size})",
                fix="use a smaller integer or add",
            )
        return self


class FTTransformerCombiner(_TransformerOptions):
    """``ft_transformer``: Gorishniy et al.'s FT-Transformer: every encoder output is projected to
    a ``hidden_size`` token, a learned [CLS] token is put first, the transformer blocks run, and
    the [CLS] token's output enters the fully connected stack."""

    type: Literal["ft_transformer"] = "ft_transformer"


class SequenceConcatCombiner(_Base):
    """``sequence_concat``: the main sequence feature's (batch, length, width) encoding joined
    along its last axis with the other inputs (sequences of the same length as they are, vectors
    repeated at every position); positions past the main sequence's length are zeroed; then
    ``reduce_output`` (null keeps the sequence for the output heads)."""

    type: Literal["sequence_concat"] = "sequence_concat"
    main_sequence_feature: str | None = Field(default=None, description="null: the first input that keeps a sequence")
    reduce_output: Reduction = None


class ComparatorCombiner(_Base):
    """``comparator``: two entities (lists of input features) each concatenated and passed
    through its own fully connected stack; the output is [dot product, element-wise product,
    absolute difference, bilinear product] of the two, width 2 x last layer size + 2."""

    type: Literal["comparator"] = "comparator"
    entity_1: list[str] = Field(min_length=1)
    entity_2: list[str] = Field(min_length=1)
    fc_layers: list[FCLayerConfig] | None = None
    num_fc_layers: int = Field(default=1, ge=0)
    output_size: int = Field(default=256, ge=1)
    use_bias: bool = True
    weights_initializer: InitializerOrDict = "xavier_uniform"
    bias_initializer: InitializerOrDict = "zeros"
    norm: Literal["batch", "layer"] | None = None
    norm_params: dict[str, Any] | None = None
    activation: Activation = "relu"
    dropout: float = Field(default=0.0, ge=0, le=1)

    _bias = field_validator("bias_initializer")(check_bias_initializer)

    @field_validator("entity_1", "entity_2")
    @classmethod
    def _distinct(cls, v: list[str], info: ValidationInfo) -> list[str]:
        dupes = sorted({n for n in v if v.count(n) > 1})
        if dupes:
            raise ValueError(f"{dupes} appear more than once")
        both = sorted(set(v) & set(info.data.get("entity_1") or ())) if info.field_name == "entity_2" else []
        if both:
            raise RuleError(f"{both} are in both entity_1 and entity_2", fix="put each input feature in one entity")
        return v

    @field_validator("num_fc_layers")
    @classmethod
    def _one_layer_at_least(cls, v: int, info: ValidationInfo) -> int:
        if v == 0 and info.data.get("fc_layers") is None:
            raise RuleError(
                "the comparator needs at least one fully connected layer per entity",
                fix="set num_fc_layers >= 1 or give fc_layers",
            )
        return v

    @model_validator(mode="after")
    def _norm_params_fit(self) -> ComparatorCombiner:
        if self.fc_layers == []:
            raise RuleError(
                "fc_layers is empty: the comparator needs a layer per entity", fix="list at least one layer"
            )
        check_norm_params(self.norm, self.norm_params)
        return self


def _not_supported(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") in _UNSUPPORTED:
        raise KeyedValueError(
            f"combiner type {value['type']!r} is not supported yet",
            ("combiner", "type"),
            fix=f"use one of {sorted(COMBINER_TYPES)}",
        )
    return value


#: Ludwig's combiner types without an implementation here, refused with one line.
_UNSUPPORTED = ("sequence", "project_aggregate")

CombinerConfig = Annotated[
    Union[
        ConcatCombiner,
        TabNetCombiner,
        TransformerCombiner,
        TabTransformerCombiner,
        FTTransformerCombiner,
        SequenceConcatCombiner,
        ComparatorCombiner,
    ],
    Field(discriminator="type"),
    BeforeValidator(_not_supported),
    BeforeValidator(default_type("concat")),
]
#: The combiner types a sweep file may name.
COMBINER_TYPES = (
    "concat",
    "tabnet",
    "transformer",
    "tabtransformer",
    "ft_transformer",
    "sequence_concat",
    "comparator",
)


def check_combiner(combiner: Any, inputs: Sequence[str]) -> None:
    """The combiner's rules that need the input feature names (in the order written).

    Raises:
        KeyedValueError: a comparator entity names an input that does not exist, or leaves an
            input out of both entities; ``main_sequence_feature`` is not an input. The path is
            the raw key path from the root (``("combiner", "entity_1", 0)``).
    """
    names = set(inputs)
    if isinstance(combiner, ComparatorCombiner):
        for key, entity in (("entity_1", combiner.entity_1), ("entity_2", combiner.entity_2)):
            for i, name in enumerate(entity):
                if name not in names:
                    raise KeyedValueError(
                        f"{name!r} is not an input feature", ("combiner", key, i), fix=f"use one of {list(inputs)}"
                    )
        left = [n for n in inputs if n not in combiner.entity_1 and n not in combiner.entity_2]
        if left:
            raise KeyedValueError(
                f"input features {left} are in neither entity_1 nor entity_2",
                ("combiner", "entity_2"),
                fix="add each input feature to one of the two entities",
            )
    if isinstance(combiner, SequenceConcatCombiner):
        main = combiner.main_sequence_feature
        if main is not None and main not in names:
            raise KeyedValueError(
                f"main_sequence_feature {main!r} is not an input feature",
                ("combiner", "main_sequence_feature"),
                fix=f"use one of {list(inputs)}",
            )
