"""Output features: the prediction targets, their decoders and losses, with Ludwig's keys and
defaults (``ludwig/schema/features/*_feature.py``, ``ludwig/schema/decoders/base.py``,
``ludwig/schema/features/loss/loss.py``). Typed, frozen; no I/O.

One model per output type, tagged by ``type``. A ``loss`` or ``decoder`` written without
``type`` takes the output type's default (Ludwig's). ``loss_weight`` is accepted as the short
spelling of ``loss.weight``. :func:`check_dependencies` holds the rule that needs every output
feature (``dependencies`` name other outputs, without cycles).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from ludwig_hpo.config.base import KeyedValueError, RuleError, _Base
from ludwig_hpo.config.combiners import Activation, FCLayerConfig, InitializerOrDict, Reduction
from ludwig_hpo.config.feature_base import _Feature
from ludwig_hpo.config.llm import LLMTextOutputFeature
from ludwig_hpo.config.preprocessing import (
    BinaryOutputPreprocessing,
    CategoryOutputPreprocessing,
    NumberOutputPreprocessing,
)
from ludwig_hpo.config.type_preprocessing import SetPreprocessing

# ---------------------------------------------------------------------------- losses


class _Loss(_Base):
    weight: float = Field(default=1.0, ge=0, description="the loss's weight in the combined loss")


class MSELoss(_Loss):
    """Mean squared error: mean over the batch (and a vector's elements) of (prediction - target)^2."""

    type: Literal["mean_squared_error"] = "mean_squared_error"


class MAELoss(_Loss):
    """Mean absolute error."""

    type: Literal["mean_absolute_error"] = "mean_absolute_error"


class MAPELoss(_Loss):
    """Mean absolute percentage error: mean of |prediction - target| / |target| (no x100)."""

    type: Literal["mean_absolute_percentage_error"] = "mean_absolute_percentage_error"


class RMSELoss(_Loss):
    """Root mean squared error: the square root of the batch's mean squared error."""

    type: Literal["root_mean_squared_error"] = "root_mean_squared_error"


class RMSPELoss(_Loss):
    """Root mean squared percentage error: sqrt(mean(((target - prediction) / target)^2))."""

    type: Literal["root_mean_squared_percentage_error"] = "root_mean_squared_percentage_error"


class HuberLoss(_Loss):
    """Huber loss: squared error below ``delta``, delta-scaled absolute error above."""

    type: Literal["huber"] = "huber"
    delta: float = Field(default=1.0, gt=0)


_ROBUST = "the loss becomes (1 - robust_lambda) * loss + robust_lambda / classes"
_PENALTY = "adds confidence_penalty * mean((max entropy - entropy) / max entropy)"


class BWCELoss(_Loss):
    """Binary weighted cross entropy on the logit: ``positive_class_weight`` scales the positive
    term (torch's ``pos_weight``); ``robust_lambda`` and ``confidence_penalty`` as for a category."""

    type: Literal["binary_weighted_cross_entropy"] = "binary_weighted_cross_entropy"
    positive_class_weight: float | None = Field(default=None, ge=0)
    robust_lambda: float = Field(default=0, ge=0, le=1, description=_ROBUST)
    confidence_penalty: float = Field(default=0, ge=0, description=_PENALTY)


ClassWeights = Union[list[float], dict[Union[bool, int, float, str], float]]


class SoftmaxCELoss(_Loss):
    """Softmax cross entropy. ``class_weights`` (one per class, or ``{class: weight}``) weight
    each row by its true class (torch's weighted mean); ``class_similarities`` (classes x
    classes), softmaxed per row at ``class_similarities_temperature`` > 0, replace the one-hot
    target of class ``c`` by row ``c``. ``sparse_softmax_cross_entropy`` is the same loss."""

    type: Literal["softmax_cross_entropy", "sparse_softmax_cross_entropy"] = "softmax_cross_entropy"
    class_weights: ClassWeights | None = None
    robust_lambda: float = Field(default=0, ge=0, le=1, description=_ROBUST)
    confidence_penalty: float = Field(default=0, ge=0, description=_PENALTY)
    class_similarities: list[list[float]] | None = None
    class_similarities_temperature: float = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _similarities_given(self) -> SoftmaxCELoss:
        if self.class_similarities_temperature > 0 and self.class_similarities is None:
            raise RuleError(
                "class_similarities_temperature > 0 but no class_similarities are given",
                fix="add class_similarities (a classes x classes list of lists) or set the temperature to 0",
            )
        sims = self.class_similarities
        if sims is not None and any(len(row) != len(sims) for row in sims):
            raise RuleError(
                f"class_similarities must be square, but has {len(sims)} rows of lengths {[len(r) for r in sims]}",
                fix="give one row per class, each with one value per class",
            )
        return self


class SigmoidCELoss(_Loss):
    """Sigmoid cross entropy per class of a set; ``class_weights`` scale each class's positive
    term (torch's ``pos_weight``), one per class or ``{class: weight}``."""

    type: Literal["sigmoid_cross_entropy"] = "sigmoid_cross_entropy"
    class_weights: ClassWeights | None = None


#: Ludwig's loss types this platform does not train yet, by output type.
_UNSUPPORTED_LOSSES = {
    "category": ("sampled_softmax_cross_entropy", "focal_loss", "corn", "poly_loss", "lovasz_softmax", "sparsemax"),
    "binary": ("focal_loss",),
    "number": (),
    "set": (),
    "vector": (),
}
#: Each output type's default loss (Ludwig's).
DEFAULT_LOSS = {
    "number": "mean_squared_error",
    "binary": "binary_weighted_cross_entropy",
    "category": "softmax_cross_entropy",
    "set": "sigmoid_cross_entropy",
    "vector": "mean_squared_error",
}
#: Each output type's decoder type (Ludwig's: the only one it registers for the type).
DECODER_TYPE = {
    "number": "regressor",
    "binary": "regressor",
    "category": "classifier",
    "set": "classifier",
    "vector": "projector",
}


def _loss_for(kind: str) -> Callable[[Any], Any]:
    """A before-validator of ``loss``: fills the output type's default ``type`` and refuses a
    Ludwig loss that is not supported yet in one line."""

    def fill(value: Any) -> Any:
        if value is None:
            return {"type": DEFAULT_LOSS[kind]}
        if isinstance(value, dict):
            if "type" not in value:
                return {"type": DEFAULT_LOSS[kind], **value}
            if value["type"] in _UNSUPPORTED_LOSSES[kind]:
                raise RuleError(
                    f"loss type {value['type']!r} of a {kind} output is not supported yet",
                    fix=f"use loss type {DEFAULT_LOSS[kind]!r}",
                )
        return value

    return fill


# ---------------------------------------------------------------------------- decoder


class Decoder(_Base):
    """The decoder of an output (Ludwig's ``BaseDecoderConfig`` and its ``regressor``,
    ``classifier`` and ``projector``): a fully connected stack (none by default) over the
    combiner's output, then the output projection.

    The stack is ``fc_layers`` when given, else ``num_fc_layers`` layers of ``fc_output_size``;
    each layer is Linear -> ``fc_norm`` -> ``fc_activation`` -> dropout ``fc_dropout``, its
    weights initialized by ``fc_weights_initializer`` and its bias by ``fc_bias_initializer``.
    The projection (to 1 value, the classes, or the vector's size) has ``use_bias``,
    ``weights_initializer`` and ``bias_initializer``; a projector also ``activation`` and
    ``clip``. ``output_size``, ``dropout`` and ``activation`` of a regressor or classifier are
    the short spellings of their ``fc_`` keys. ``input_size`` and ``num_classes`` are Ludwig's
    internal keys: read from the data, accepted and ignored.

    ``mlp_classifier`` (binary and category outputs) is Ludwig's ``MLPClassifier``: after the
    stack above, ``num_fc_layers`` (1 unless written) more layers of ``output_size`` (256),
    ``activation`` (relu) and ``dropout`` (0), then the projection; as in Ludwig,
    ``num_fc_layers`` counts for both stacks. Its ``calibration`` and ``mc_dropout_samples``
    are not supported yet.
    """

    type: Literal["regressor", "classifier", "projector", "mlp_classifier"] | None = None
    fc_layers: list[FCLayerConfig] | None = None
    num_fc_layers: int = Field(default=0, ge=0)
    fc_output_size: int = Field(default=256, ge=1)
    fc_use_bias: bool = True
    fc_weights_initializer: InitializerOrDict = "xavier_uniform"
    fc_bias_initializer: InitializerOrDict = "zeros"
    fc_norm: Literal["batch", "layer"] | None = None
    fc_norm_params: dict[str, Any] | None = None
    fc_activation: Activation = "relu"
    fc_dropout: float = Field(default=0.0, ge=0, le=1)
    use_bias: bool = True
    weights_initializer: InitializerOrDict = "xavier_uniform"
    bias_initializer: InitializerOrDict = "zeros"
    output_size: int | None = Field(default=None, ge=1)
    dropout: float | None = Field(default=None, ge=0, le=1)
    activation: Activation = None
    clip: tuple[float, float] | None = None
    input_size: int | None = Field(default=None, ge=1)
    num_classes: int | None = Field(default=None, ge=1)
    calibration: Literal["temperature_scaling"] | None = None
    mc_dropout_samples: int = Field(default=0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _mlp_classifier_layers(cls, v: Any) -> Any:
        if isinstance(v, dict) and v.get("type") == "mlp_classifier" and "num_fc_layers" not in v:
            return {**v, "num_fc_layers": 1}  # Ludwig's MLPClassifierConfig default
        return v

    @field_validator("calibration", "mc_dropout_samples", mode="after")
    @classmethod
    def _not_yet(cls, v: Any, info: ValidationInfo) -> Any:
        if v:
            raise RuleError(f"{info.field_name} is not supported yet", fix=f"remove {info.field_name}")
        return v

    @field_validator("fc_norm", mode="before")
    @classmethod
    def _ghost(cls, v: Any) -> Any:
        if v == "ghost":
            raise RuleError("fc_norm 'ghost' (ghost batch norm) is not supported yet", fix="use fc_norm: batch")
        return v

    @property
    def stack_output_size(self) -> int:
        """The width of each ``num_fc_layers`` layer: ``fc_output_size``, or a regressor's or
        classifier's ``output_size`` written without ``fc_output_size``."""
        if (
            self.type not in ("projector", "mlp_classifier")
            and self.output_size is not None
            and "fc_output_size" not in self.model_fields_set
        ):
            return self.output_size
        return self.fc_output_size

    @property
    def stack_dropout(self) -> float:
        """``fc_dropout``, or ``dropout`` of a regressor or classifier written without it."""
        if (
            self.type not in ("projector", "mlp_classifier")
            and self.dropout is not None
            and "fc_dropout" not in self.model_fields_set
        ):
            return self.dropout
        return self.fc_dropout

    @property
    def stack_activation(self) -> str | None:
        """``fc_activation``, or ``activation`` of a regressor or classifier written without it."""
        if (
            self.type not in ("projector", "mlp_classifier")
            and "activation" in self.model_fields_set
            and "fc_activation" not in (self.model_fields_set)
        ):
            return self.activation
        return self.fc_activation


#: Output types Ludwig registers its ``mlp_classifier`` decoder for.
_MLP_KINDS = ("binary", "category")


def _decoder_for(kind: str) -> Callable[[Any], Any]:
    """An after-validator of ``decoder``: fills the output type's decoder ``type`` and refuses
    another one."""
    want = DECODER_TYPE[kind]

    def check(d: Decoder) -> Decoder:
        if d.type is not None and d.type != want and not (d.type == "mlp_classifier" and kind in _MLP_KINDS):
            raise RuleError(f"a {kind} output's decoder is {want!r}, not {d.type!r}", fix=f"set decoder.type: {want}")
        if want != "projector" and d.clip is not None:
            raise RuleError(
                "clip is a projector's key (vector outputs)", fix="drop decoder.clip, or use the output's own clip"
            )
        return d if d.type is not None else d.model_copy(update={"type": want})

    return check


# ---------------------------------------------------------------------------- output features


class _Output(_Feature):
    """What every output feature has (Ludwig's ``BaseOutputFeatureConfig``).

    ``reduce_input`` reduces a sequence combiner's (batch, length, width) output over its
    length (a (batch, width) output passes unchanged); ``dependencies`` are other output
    features whose decoder hidden states (after their fully connected stack) are concatenated
    to this one's input, in dependency order; ``reduce_dependencies`` reduces a dependency's
    hidden state that is still a sequence.
    """

    reduce_input: Reduction = "sum"
    dependencies: list[str] = Field(default_factory=list)
    reduce_dependencies: Reduction = "sum"

    @model_validator(mode="before")
    @classmethod
    def _loss_weight(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "loss_weight" not in data:
            return data
        loss = data.get("loss")
        if isinstance(loss, dict) and "weight" in loss:
            raise RuleError("the loss weight is set twice: loss_weight and loss.weight", fix="keep only loss.weight")
        rest = {k: v for k, v in data.items() if k != "loss_weight"}
        rest["loss"] = {**(loss if isinstance(loss, dict) else {}), "weight": data["loss_weight"]}
        return rest

    @field_validator("reduce_input", "reduce_dependencies")
    @classmethod
    def _reduction(cls, v: str | None) -> str | None:
        if v == "concat":
            raise RuleError(
                "reduction 'concat' of a sequence for an output head is not supported yet",
                fix="use sum, mean, max, last or attention",
            )
        return None if v in ("none", "None") else ("mean" if v == "avg" else v)

    @property
    def loss_weight(self) -> float:
        """The output's weight in the combined loss: ``loss.weight``."""
        return float(self.loss.weight)  # type: ignore[attr-defined]  # every output type declares its loss


_CALIBRATION = "temperature scaling of the probabilities, fitted on the validation split after training"


class NumberOutputFeature(_Output):
    """A number target: ``regressor`` decoder, ``mean_squared_error`` loss by default. ``clip``
    ([low, high]) clips the predictions the metrics score (the loss sees the raw output)."""

    type: Literal["number"]
    loss: Annotated[Union[MSELoss, MAELoss, MAPELoss, RMSELoss, RMSPELoss, HuberLoss], Field(discriminator="type")] = (
        MSELoss()
    )
    decoder: Annotated[Decoder, AfterValidator(_decoder_for("number"))] = Decoder(type="regressor")
    preprocessing: NumberOutputPreprocessing = NumberOutputPreprocessing()
    clip: tuple[float, float] | None = None
    _fill = field_validator("loss", mode="before")(_loss_for("number"))


class BinaryOutputFeature(_Output):
    """A binary target: ``regressor`` decoder, ``binary_weighted_cross_entropy`` loss; a
    prediction is true when its probability is at least ``threshold``."""

    type: Literal["binary"]
    loss: BWCELoss = BWCELoss()
    decoder: Annotated[Decoder, AfterValidator(_decoder_for("binary"))] = Decoder(type="regressor")
    preprocessing: BinaryOutputPreprocessing = BinaryOutputPreprocessing()
    threshold: float = Field(default=0.5, ge=0, le=1)
    calibration: bool = Field(default=False, description=_CALIBRATION)
    _fill = field_validator("loss", mode="before")(_loss_for("binary"))


class CategoryOutputFeature(_Output):
    """A category target: ``classifier`` decoder, ``softmax_cross_entropy`` loss; ``hits_at_k``
    counts a row whose class is among the ``top_k`` most probable."""

    type: Literal["category"]
    loss: SoftmaxCELoss = SoftmaxCELoss()
    decoder: Annotated[Decoder, AfterValidator(_decoder_for("category"))] = Decoder(type="classifier")
    preprocessing: CategoryOutputPreprocessing = CategoryOutputPreprocessing()
    top_k: int = Field(default=3, ge=0)
    calibration: bool = Field(default=False, description=_CALIBRATION)
    _fill = field_validator("loss", mode="before")(_loss_for("category"))


class SetOutputFeature(_Output):
    """A set target (multi-label): ``classifier`` decoder, one sigmoid per class,
    ``sigmoid_cross_entropy`` loss; a class is predicted when its probability is at least
    ``threshold``."""

    type: Literal["set"]
    loss: SigmoidCELoss = SigmoidCELoss()
    decoder: Annotated[Decoder, AfterValidator(_decoder_for("set"))] = Decoder(type="classifier")
    preprocessing: SetPreprocessing = SetPreprocessing()
    threshold: float = Field(default=0.5, ge=0, le=1)
    _fill = field_validator("loss", mode="before")(_loss_for("set"))


class VectorOutputFeature(_Output):
    """A vector target: ``projector`` decoder, ``mean_squared_error`` loss. ``softmax`` makes
    the predictions the metrics score a softmax of the output (the loss sees the raw output,
    as in Ludwig); ``vector_size``, when given, must match the data."""

    type: Literal["vector"]
    loss: Annotated[Union[MSELoss, MAELoss, MAPELoss, HuberLoss, SoftmaxCELoss], Field(discriminator="type")] = (
        MSELoss()
    )
    decoder: Annotated[Decoder, AfterValidator(_decoder_for("vector"))] = Decoder(type="projector")
    reduce_input: Reduction = None
    reduce_dependencies: Reduction = None
    softmax: bool = False
    vector_size: int | None = Field(default=None, ge=1)
    _fill = field_validator("loss", mode="before")(_loss_for("vector"))


if TYPE_CHECKING:  # an ECD model never sees a text output: the schema keeps it to model_type llm
    OutputFeature = Annotated[
        Union[NumberOutputFeature, BinaryOutputFeature, CategoryOutputFeature, SetOutputFeature, VectorOutputFeature],
        Field(discriminator="type"),
    ]
else:
    OutputFeature = Annotated[
        Union[
            NumberOutputFeature,
            BinaryOutputFeature,
            CategoryOutputFeature,
            SetOutputFeature,
            VectorOutputFeature,
            LLMTextOutputFeature,
        ],
        Field(discriminator="type"),
    ]
"""One output feature, tagged by ``type`` (``text``: the output of ``model_type: llm`` only)."""

#: Any output feature's model (for annotations).
AnyOutput = Union[
    NumberOutputFeature, BinaryOutputFeature, CategoryOutputFeature, SetOutputFeature, VectorOutputFeature
]


def dependency_order(outputs: Sequence[AnyOutput]) -> list[str]:
    """The output names in an order where every feature comes after its ``dependencies``
    (sweep-file order otherwise). Pure.

    Raises:
        KeyedValueError: a dependency that is not another output feature, or a cycle.
    """
    index = {f.name: i for i, f in enumerate(outputs)}
    for i, f in enumerate(outputs):
        for d in f.dependencies:
            if d not in index or d == f.name:
                others = sorted(n for n in index if n != f.name)
                raise KeyedValueError(
                    f"{d!r} is not another output feature",
                    ("output_features", i, "dependencies"),
                    fix=f"use some of {others}",
                )
    order: list[str] = []
    state: dict[str, int] = {}  # 1: being visited, 2: done

    def visit(name: str, chain: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*chain[chain.index(name) :], name])
            raise KeyedValueError(
                f"output dependencies form a cycle: {cycle}",
                ("output_features", index[name], "dependencies"),
                fix="remove one of these dependencies",
            )
        state[name] = 1
        for d in outputs[index[name]].dependencies:
            visit(d, [*chain, name])
        state[name] = 2
        order.append(name)

    for f in outputs:
        visit(f.name, [])
    return order


def check_dependencies(outputs: list[AnyOutput]) -> list[AnyOutput]:
    """An after-validator of ``output_features``: :func:`dependency_order` succeeds."""
    dependency_order(outputs)
    return outputs


#: ``output_features``' type: at least one output, dependencies checked.
OutputFeatures = Annotated[list[OutputFeature], Field(min_length=1), AfterValidator(check_dependencies)]
