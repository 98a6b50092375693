"""Ludwig's options of a fully connected layer (``FCLayer`` / ``FCStack``): initializers,
activations, norms and one ``fc_layers`` entry, shared by the combiners, the encoders and the
decoders; and Ludwig's sequence reductions. Typed, frozen; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base

#: Ludwig's weight initializers (``ludwig/utils/torch_utils.initializer_registry``), by name.
INITIALIZERS = (
    "uniform",
    "normal",
    "constant",
    "ones",
    "zeros",
    "eye",
    "dirac",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "sparse",
    "identity",
)
Initializer = Literal[
    "uniform",
    "normal",
    "constant",
    "ones",
    "zeros",
    "eye",
    "dirac",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "sparse",
    "identity",
]
#: Ludwig's activations (``ludwig/utils/torch_utils.activations``); null is none (identity).
Activation = Literal["elu", "leakyRelu", "logSigmoid", "relu", "sigmoid", "tanh", "softmax"] | None
#: Ludwig's sequence reductions (``ReductionOptions``); ``avg`` is ``mean``, null / ``none`` keep the sequence.
Reduction = Literal["last", "sum", "mean", "avg", "max", "concat", "attention", "none", "None"] | None
#: Keyword arguments each ``norm`` takes in ``norm_params`` (torch's BatchNorm1d / LayerNorm).
NORM_PARAMS = {
    "batch": ("eps", "momentum", "affine", "track_running_stats"),
    "layer": ("eps", "elementwise_affine", "bias"),
}


#: The keyword arguments of each initializer (torch's ``nn.init`` functions), and those it requires.
INITIALIZER_ARGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "uniform": (("a", "b"), ()),
    "normal": (("mean", "std"), ()),
    "constant": (("val",), ("val",)),
    "ones": ((), ()),
    "zeros": ((), ()),
    "eye": ((), ()),
    "dirac": (("groups",), ()),
    "xavier_uniform": (("gain",), ()),
    "xavier_normal": (("gain",), ()),
    "kaiming_uniform": (("a", "mode", "nonlinearity"), ()),
    "kaiming_normal": (("a", "mode", "nonlinearity"), ()),
    "orthogonal": (("gain",), ()),
    "sparse": (("sparsity", "std"), ("sparsity",)),
    "identity": ((), ()),
}
#: Initializers defined for matrices only: not a ``bias_initializer``.
MATRIX_INITIALIZERS = (
    "eye",
    "identity",
    "dirac",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "sparse",
)


class InitializerSpec(_Base):
    """An initializer with arguments, Ludwig's dict form: ``{type: normal, mean: 0.0, std: 0.01}``;
    the other keys are the keyword arguments of torch's ``nn.init`` function of that name."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Initializer

    @model_validator(mode="after")
    def _known_arguments(self) -> InitializerSpec:
        allowed, required = INITIALIZER_ARGS[self.type]
        given = set(self.model_extra or {})
        unknown = sorted(given - set(allowed))
        if unknown:
            raise RuleError(
                f"{unknown} are not arguments of the {self.type} initializer", fix=f"use only {list(allowed)}"
            )
        missing = [k for k in required if k not in given]
        if missing:
            raise RuleError(f"the {self.type} initializer needs {missing}", fix=f"add {missing[0]}: <value>")
        return self


def _initializer_form(value: Any) -> str:
    return "name" if isinstance(value, str) else "arguments"


#: An initializer by name, or with arguments (a mapping is checked as :class:`InitializerSpec` alone).
InitializerOrDict = Annotated[
    Union[Annotated[Initializer, Tag("name")], Annotated[InitializerSpec, Tag("arguments")]],
    Discriminator(_initializer_form),
]


def _initializer_name(value: Any) -> str | None:
    return value if isinstance(value, str) else getattr(value, "type", None)


def check_bias_initializer(value: Any) -> Any:
    name = _initializer_name(value)
    if name in MATRIX_INITIALIZERS:
        raise ValueError(
            f"{name} initializes matrices, not a bias vector; use zeros, ones, constant, uniform or normal"
        )
    return value


def check_norm_params(norm: str | None, params: Mapping[str, Any] | None) -> None:
    if not params:
        return
    if norm is None:
        raise RuleError(
            "norm_params is set but norm is null", fix="set norm: batch or norm: layer, or drop norm_params"
        )
    unknown = sorted(set(params) - set(NORM_PARAMS[norm]))
    if unknown:
        raise RuleError(
            f"norm_params {unknown} are not arguments of the {norm} norm",
            fix=f"use only {list(NORM_PARAMS[norm])}",
        )


class FCLayerConfig(_Base):
    """One entry of ``fc_layers``: a fully connected layer (Linear -> norm -> activation ->
    dropout); a key left out takes the section's value of the same name."""

    output_size: int | None = Field(default=None, ge=1)
    use_bias: bool | None = None
    weights_initializer: InitializerOrDict | None = None
    bias_initializer: InitializerOrDict | None = None
    norm: Literal["batch", "layer"] | None = None
    norm_params: dict[str, Any] | None = None
    activation: Activation = Field(default=None, description="null takes the section's activation")
    dropout: float | None = Field(default=None, ge=0, le=1)

    _bias = field_validator("bias_initializer")(check_bias_initializer)

    @model_validator(mode="after")
    def _norm_params_fit(self) -> FCLayerConfig:
        if self.norm is not None:
            check_norm_params(self.norm, self.norm_params)
        return self
