"""``hyperopt.scheduler``: the Tune trial schedulers a sweep file may choose (FIFO, ASHA,
HyperBand, the median stopping rule, PBT), with Ray Tune's and Ludwig's option names, and the
checks of PBT's ``hyperparam_mutations`` against the searched parameters. Typed and frozen;
no I/O. Rules that need ``trainer.epochs`` live in :class:`~ludwig_hpo.config.schema.SweepConfig`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import Field, ValidationError, model_validator

from ludwig_hpo.config.base import KeyedValueError, KeyPath, RuleError, _Base
from ludwig_hpo.config.spaces import LISTED_SPACES, ParamSpace, RandnSpace, parse_space

TimeAttr = Literal["epoch", "training_iteration", "time_total_s"]


class _Scheduler(_Base):
    time_attr: TimeAttr = "epoch"

    @property
    def in_epochs(self) -> bool:
        """True when progress (``max_t``, ``grace_period``) counts epochs, False for seconds."""
        return self.time_attr != "time_total_s"

    @property
    def tune_time_attr(self) -> str:
        """The reported key Tune reads: ``epoch`` (a restored trial keeps counting) or ``time_total_s``."""
        return "epoch" if self.in_epochs else "time_total_s"


def _require_max_t_in_seconds(kind: str, in_epochs: bool, max_t: int | None) -> None:
    if not in_epochs and max_t is None:
        raise RuleError(
            f"{kind} with time_attr: time_total_s needs max_t in seconds",
            path=("hyperopt", "scheduler", "time_attr"),
            fix="add max_t: <seconds>",
        )


class FifoScheduler(_Base):
    """Never stops a trial early."""

    type: Literal["fifo"] = "fifo"


class AsyncHyperbandScheduler(_Scheduler):
    """ASHA: stops trials at rungs ``grace_period * reduction_factor**i`` (in ``time_attr``
    units) that are not in the top ``1/reduction_factor`` of their rung. ``max_t`` defaults to
    ``trainer.epochs``."""

    type: Literal["async_hyperband", "asha"]
    max_t: int | None = Field(default=None, ge=1)
    grace_period: int = Field(default=1, ge=1)
    reduction_factor: float = Field(default=3.0, gt=1)
    brackets: int = Field(default=1, ge=1)
    stop_last_trials: bool = True

    @model_validator(mode="after")
    def _seconds(self) -> AsyncHyperbandScheduler:
        _require_max_t_in_seconds(self.type, self.in_epochs, self.max_t)
        return self


class HyperbandScheduler(_Scheduler):
    """Synchronous HyperBand: brackets of trials halved every rung up to ``max_t``."""

    type: Literal["hyperband"]
    max_t: int | None = Field(default=None, ge=1)
    reduction_factor: float = Field(default=3.0, gt=1)
    stop_last_trials: bool = True

    @model_validator(mode="after")
    def _seconds(self) -> HyperbandScheduler:
        _require_max_t_in_seconds(self.type, self.in_epochs, self.max_t)
        return self


class MedianStoppingRuleScheduler(_Scheduler):
    """Stops a trial whose best result is worse than the median of the other trials' running
    averages at the same time, after ``grace_period`` and ``min_samples_required`` trials."""

    type: Literal["median_stopping_rule"]
    grace_period: float = Field(default=1.0, ge=0)
    min_samples_required: int = Field(default=3, ge=1)
    min_time_slice: float = Field(default=0.0, ge=0)
    hard_stop: bool = True


class PbtScheduler(_Scheduler):
    """Population based training (Ray Tune's ``PopulationBasedTraining``, Ludwig's option
    names). Every ``perturbation_interval`` (in ``time_attr`` units; epochs by default), a
    trial in the bottom ``quantile_fraction`` of the population copies the weights and
    optimizer state of one in the top fraction, takes its parameters, and continues with the
    parameters of ``hyperparam_mutations`` perturbed: with probability
    ``resample_probability`` resampled, else multiplied by one of ``perturbation_factors``
    (numbers) or shifted to a neighbouring value (lists), then clipped into the space.

    ``hyperparam_mutations``: ``{parameter path: values}`` where values is a list, a space
    (``{space: loguniform, lower: ..., upper: ...}``) or null (the parameter's own space of
    ``hyperopt.parameters``); omitted: every searched parameter that PBT may change. Only
    parameters that keep the weights loadable may change (``trainer.*`` other than
    ``epochs`` and ``optimizer.type``, and dropout rates). The initial population is sampled
    at random (``search_alg.type: random``).
    """

    type: Literal["pbt"]
    perturbation_interval: float = Field(default=1.0, gt=0)
    burn_in_period: float = Field(default=0.0, ge=0)
    hyperparam_mutations: dict[str, Any] | None = None
    quantile_fraction: float = Field(default=0.25, gt=0, le=0.5)
    resample_probability: float = Field(default=0.25, ge=0, le=1)
    perturbation_factors: tuple[float, float] = (1.2, 0.8)
    log_config: bool = True
    require_attrs: bool = True
    synch: bool = False


Scheduler = Annotated[
    Union[FifoScheduler, AsyncHyperbandScheduler, HyperbandScheduler, MedianStoppingRuleScheduler, PbtScheduler],
    Field(discriminator="type"),
]
#: Schedulers whose progress counts ``time_attr`` units (every one but FIFO).
TimedScheduler = Union[AsyncHyperbandScheduler, HyperbandScheduler, MedianStoppingRuleScheduler, PbtScheduler]

#: Parameter paths PBT may not change: they change what a checkpoint holds or how long a trial runs.
PBT_FIXED_PATHS = ("trainer.epochs", "trainer.optimizer.type", "trainer.seed")


def pbt_mutable(path: str) -> bool:
    """Whether PBT may change parameter ``path`` mid-trial: training settings (``trainer.*``
    except :data:`PBT_FIXED_PATHS`) and dropout rates keep a checkpoint's weights loadable;
    anything else may change the model's shapes."""
    if path in PBT_FIXED_PATHS:
        return False
    return path.startswith("trainer.") or path.split(".")[-1] == "dropout"


def check_epochs(sch: Scheduler, epochs: int) -> None:
    """Check a scheduler counting epochs against ``trainer.epochs``: ``max_t`` equals it,
    ``grace_period`` does not exceed it, and PBT's ``perturbation_interval`` and
    ``burn_in_period`` are below it (or no trial is ever perturbed).

    Raises:
        KeyedValueError: the first rule broken, at its key under ``hyperopt.scheduler``.
    """
    if isinstance(sch, FifoScheduler) or not sch.in_epochs:
        return
    if isinstance(sch, (AsyncHyperbandScheduler, HyperbandScheduler)) and sch.max_t not in (None, epochs):
        raise KeyedValueError(
            f"max_t ({sch.max_t}) contradicts trainer.epochs ({epochs}); set only one of them",
            ("hyperopt", "scheduler", "max_t"),
        )
    if isinstance(sch, (AsyncHyperbandScheduler, MedianStoppingRuleScheduler)) and sch.grace_period > epochs:
        raise KeyedValueError(
            f"grace_period ({sch.grace_period:g}) must be <= trainer.epochs ({epochs})",
            ("hyperopt", "scheduler", "grace_period"),
        )
    if isinstance(sch, PbtScheduler):
        if sch.perturbation_interval >= epochs:
            raise KeyedValueError(
                f"perturbation_interval ({sch.perturbation_interval:g}) must be below "
                f"trainer.epochs ({epochs}), or no trial is ever perturbed",
                ("hyperopt", "scheduler", "perturbation_interval"),
                fix="use a smaller interval or more epochs",
            )
        if sch.burn_in_period >= epochs:
            raise KeyedValueError(
                f"burn_in_period ({sch.burn_in_period:g}) must be below trainer.epochs "
                f"({epochs}), or no trial is ever perturbed",
                ("hyperopt", "scheduler", "burn_in_period"),
                fix="use a shorter burn-in or more epochs",
            )


def check_pbt(sch: PbtScheduler, params: Mapping[str, ParamSpace]) -> None:
    """Check PBT's ``hyperparam_mutations`` against the searched ``params`` (``{dotted path:
    space}``): each mutated path is searched and may change mid-trial (:func:`pbt_mutable`), and
    its values are a non-empty list inside the parameter's space, a bounded numeric space, or
    null. Without ``hyperparam_mutations``, some searched parameter must be mutable.

    Raises:
        KeyedValueError: the first rule broken, at its key path under ``hyperopt.scheduler``.
    """
    where: KeyPath = ("hyperopt", "scheduler", "hyperparam_mutations")
    given = sch.hyperparam_mutations
    if given is None:
        if not any(pbt_mutable(p) for p in params):
            raise KeyedValueError(
                "pbt has no parameter it may change: none of hyperopt.parameters is a "
                "training setting (trainer.*) or a dropout rate",
                ("hyperopt", "scheduler"),
                fix="search e.g. trainer.learning_rate, or use another scheduler",
            )
        return
    if not given:
        raise KeyedValueError(
            "hyperparam_mutations is empty",
            where,
            fix="list the parameters to perturb, or remove it to perturb all that may change",
        )
    for path, values in given.items():
        at: KeyPath = (*where, path)
        if path not in params:
            close = difflib.get_close_matches(path, list(params), n=1, cutoff=0.6)
            raise KeyedValueError(
                f"{path!r} is not a searched parameter (PBT perturbs parameters of hyperopt.parameters)",
                at,
                fix=f"did you mean {close[0]!r}?" if close else f"add {path} to hyperopt.parameters",
            )
        if not pbt_mutable(path):
            raise KeyedValueError(
                f"PBT cannot change {path!r} mid-trial: a cloned checkpoint would not fit "
                "(only trainer.* settings other than epochs, optimizer.type and seed, and "
                "dropout rates may change)",
                at,
                fix=f"remove {path} from hyperparam_mutations",
            )
        own = params[path]
        if values is None:
            continue  # the parameter's own space
        if isinstance(values, dict):
            _check_mutation_space(path, own, values, at)
            continue
        if not isinstance(values, list) or not values:
            raise KeyedValueError(
                f"mutations of {path!r} must be a non-empty list of values, a space mapping or null, got {values!r}",
                at,
                fix="write e.g. [0.001, 0.01, 0.1], or null for the parameter's own space",
            )
        for v in values:
            problem = own.problem_with(v)
            if problem:
                raise KeyedValueError(
                    f"{problem} of the {own.space} space of {path!r}",
                    at,
                    fix="list values inside the parameter's space",
                )


def _check_mutation_space(path: str, own: ParamSpace, values: dict[str, Any], where: KeyPath) -> None:
    if isinstance(own, (RandnSpace, *LISTED_SPACES)):
        raise KeyedValueError(
            f"a mutation space needs a numeric parameter with bounds, but {path!r} is {own.space}",
            where,
            fix="list the values to try, or write null (its own space)",
        )
    try:
        space = parse_space(values)
    except ValidationError as e:
        err = e.errors()[0]
        raise KeyedValueError(
            f"invalid mutation space: {err['msg']}",
            where,
            fix="write e.g. {space: loguniform, lower: 1.0e-4, upper: 0.1}",
        ) from None
    if isinstance(space, (RandnSpace, *LISTED_SPACES)):
        raise KeyedValueError(
            f"a mutation space must be a bounded numeric space, not {space.space}",
            where,
            fix="use uniform, loguniform, randint, ... or a list of values",
        )
