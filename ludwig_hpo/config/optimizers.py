"""The ``trainer.optimizer`` section: one model per optimizer ``type``, Ludwig's names, option
names and defaults (each the torch optimizer's own default, except SGD's momentum of 0), and
``trainer.gradient_clipping``. Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field

from ludwig_hpo.config.base import RuleError, _Base, default_type

_Betas = tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]]
_NonNeg = Annotated[float, Field(ge=0)]

#: Ludwig's optimizers that need bitsandbytes (8-bit and paged states, LAMB, LARS, Lion).
BITSANDBYTES_OPTIMIZERS = (
    "sgd_8bit",
    "adam_8bit",
    "paged_adam",
    "paged_adam_8bit",
    "adamw_8bit",
    "paged_adamw",
    "paged_adamw_8bit",
    "adagrad_8bit",
    "rmsprop_8bit",
    "lamb",
    "lamb_8bit",
    "lars",
    "lars_8bit",
    "lion",
    "lion_8bit",
    "paged_lion",
    "paged_lion_8bit",
    "ftrl",
)


class _Optimizer(_Base):
    """What every optimizer section has: its ``type``. The learning rate is
    ``trainer.learning_rate`` (``lr`` written here is read as it: see ``TrainerConfig``)."""


class SgdOptimizer(_Optimizer):
    """``torch.optim.SGD``."""

    type: Literal["sgd"]
    momentum: _NonNeg = 0.0
    weight_decay: _NonNeg = 0.0
    dampening: _NonNeg = 0.0
    nesterov: bool = False


class AdamOptimizer(_Optimizer):
    """``torch.optim.Adam``."""

    type: Literal["adam"]
    betas: _Betas = (0.9, 0.999)
    eps: _NonNeg = 1e-8
    weight_decay: _NonNeg = 0.0
    amsgrad: bool = False


class AdamWOptimizer(_Optimizer):
    """``torch.optim.AdamW`` (decoupled weight decay; Ludwig's default ``weight_decay`` is 0)."""

    type: Literal["adamw"]
    betas: _Betas = (0.9, 0.999)
    eps: _NonNeg = 1e-8
    weight_decay: _NonNeg = 0.0
    amsgrad: bool = False


class AdadeltaOptimizer(_Optimizer):
    """``torch.optim.Adadelta``."""

    type: Literal["adadelta"]
    rho: float = Field(default=0.9, ge=0, le=1)
    eps: _NonNeg = 1e-6
    weight_decay: _NonNeg = 0.0


class AdagradOptimizer(_Optimizer):
    """``torch.optim.Adagrad``."""

    type: Literal["adagrad"]
    initial_accumulator_value: _NonNeg = 0.0
    lr_decay: _NonNeg = 0.0
    weight_decay: _NonNeg = 0.0
    eps: _NonNeg = 1e-10


class AdamaxOptimizer(_Optimizer):
    """``torch.optim.Adamax``."""

    type: Literal["adamax"]
    betas: _Betas = (0.9, 0.999)
    eps: _NonNeg = 1e-8
    weight_decay: _NonNeg = 0.0


class NadamOptimizer(_Optimizer):
    """``torch.optim.NAdam``."""

    type: Literal["nadam"]
    betas: _Betas = (0.9, 0.999)
    eps: _NonNeg = 1e-8
    weight_decay: _NonNeg = 0.0
    momentum_decay: _NonNeg = 4e-3


class RadamOptimizer(_Optimizer):
    """``torch.optim.RAdam``."""

    type: Literal["radam"]
    betas: _Betas = (0.9, 0.999)
    eps: _NonNeg = 1e-8
    weight_decay: _NonNeg = 0.0


class RmspropOptimizer(_Optimizer):
    """``torch.optim.RMSprop``."""

    type: Literal["rmsprop"]
    momentum: _NonNeg = 0.0
    alpha: _NonNeg = 0.99
    eps: _NonNeg = 1e-8
    centered: bool = False
    weight_decay: _NonNeg = 0.0


class LbfgsOptimizer(_Optimizer):
    """``torch.optim.LBFGS``: each optimizer step re-evaluates the batch's loss up to
    ``max_iter`` times (one worker per trial, no gradient accumulation, ``precision: fp32``)."""

    type: Literal["lbfgs"]
    max_iter: int = Field(default=20, ge=1)
    max_eval: int | None = Field(default=None, ge=1)
    tolerance_grad: _NonNeg = 1e-7
    tolerance_change: _NonNeg = 1e-9
    history_size: int = Field(default=100, ge=1)
    line_search_fn: Literal["strong_wolfe"] | None = None


def _known_type(value: Any) -> Any:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in BITSANDBYTES_OPTIMIZERS:
        raise RuleError(
            f"optimizer type {kind!r} needs bitsandbytes and a GPU, which are not supported yet",
            ("trainer", "optimizer", "type"),
            fix="use one of sgd, adam, adamw, adadelta, adagrad, adamax, nadam, radam, rmsprop, lbfgs",
        )
    return value


Optimizer = Annotated[
    Union[
        AdamOptimizer,
        AdamWOptimizer,
        SgdOptimizer,
        AdadeltaOptimizer,
        AdagradOptimizer,
        AdamaxOptimizer,
        NadamOptimizer,
        RadamOptimizer,
        RmspropOptimizer,
        LbfgsOptimizer,
    ],
    Field(discriminator="type"),
    BeforeValidator(_known_type),
    BeforeValidator(default_type("adam")),
]


class GradientClippingConfig(_Base):
    """Gradient clipping before each optimizer step, in this order: the global norm of all
    gradients to ``clipglobalnorm``, again to ``clipnorm``, then each value into
    ``[-clipvalue, clipvalue]``; null skips a clip. Ludwig clips to a global norm of 0.5 by default
    (``clipglobalnorm: null`` turns clipping off; ``gradient_clipping: null`` keeps the defaults,
    as in Ludwig)."""

    clipglobalnorm: float | None = Field(default=0.5, gt=0)
    clipnorm: float | None = Field(default=None, gt=0)
    clipvalue: float | None = Field(default=None, gt=0)
