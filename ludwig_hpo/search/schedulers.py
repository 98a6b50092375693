"""Tune trial schedulers of ``hyperopt.scheduler``, with two things Tune leaves out:

- A trial that fails counts as the worst value seen so far at the epoch it failed in, for
  the schedulers that compare trials at milestones (ASHA, the median stopping rule); the
  synchronous HyperBand drops it from its bracket, so no rung ever waits for it.
- The FIFO-ordered schedulers (FIFO, ASHA, the median stopping rule) leave the choice of a
  new trial's actor to Tune, so a reused actor goes to a trial that has none on the way,
  not to one whose new actor is already starting (see :class:`_ReusedActorsToNewTrials`).
- PBT (``PopulationBasedTraining``) perturbs the *encoded* parameters Tune's variant
  generator sampled (see :mod:`ludwig_hpo.search.space`) and keeps every perturbed value
  inside its space.

Built in the driver; Tune pickles them into its experiment state, so everything here is
module level.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any, Protocol, cast

import optuna
from ray.tune.experiment import Trial
from ray.tune.schedulers import (
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    TrialScheduler,
)

from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.schedulers import (
    AsyncHyperbandScheduler,
    FifoScheduler,
    HyperbandScheduler,
    MedianStoppingRuleScheduler,
    PbtScheduler,
)
from ludwig_hpo.config.spaces import parse_space
from ludwig_hpo.search.space import clip_encoded, encode_value, to_optuna, tune_domain, tune_keyed
from ludwig_hpo.train.report_keys import OBJECTIVE

if TYPE_CHECKING:
    from ray.tune.execution.tune_controller import TuneController


class _ReusedActorsToNewTrials(FIFOScheduler):
    """Mixin for a FIFO-ordered scheduler: name a PAUSED trial to resume, never a PENDING one.
    Runs in the driver, on Tune's event loop.

    Tune starts PENDING trials in order without the scheduler's help: a trial that no actor
    has been requested for gets a cached one (``reuse_actors``, the trial actor of a trial
    that just ended) when there is one, and otherwise requests a new actor (a cached actor
    no new trial takes goes to any pending trial). The trial that FIFO's choice names is
    instead the oldest PENDING one, whose new actor is already requested, often already
    starting; Tune hands it the cached actor and kills the starting one, which frees its trial
    slot for the next trial's new actor. When trials end sooner than a trial actor starts,
    every trial would then start an actor that never runs one.
    """

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        trials: list[Trial] = tune_controller.get_trials()  # type: ignore[no-untyped-call]  # unannotated in Ray
        for trial in trials:
            if trial.status == Trial.PAUSED:
                return trial
        return None


class Fifo(_ReusedActorsToNewTrials):
    """Tune's FIFO scheduler (no early stopping); reused actors go to new trials."""


class _RayProgress(Protocol):
    """What :class:`_WorstValueOnError` reads of the Ray scheduler it extends (ASHA, the median
    stopping rule): the metric, its mode and the progress attribute, kept in private attributes."""

    _metric: str
    _mode: str
    _time_attr: str


class _WorstValueOnError(FIFOScheduler):
    """Mixin: tell the scheduler a failed trial's result as the worst objective seen so far
    (by any trial), at the epoch after its last reported one."""

    _worst_seen: float | None = None

    def _note(self, result: dict[str, Any]) -> None:
        ray = cast(_RayProgress, self)
        v = result.get(ray._metric)
        if isinstance(v, (int, float)) and math.isfinite(v):
            sign = 1.0 if ray._mode == "min" else -1.0
            if self._worst_seen is None or sign * v > sign * self._worst_seen:
                self._worst_seen = float(v)

    def on_trial_result(self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]) -> str:
        self._note(result)
        return super().on_trial_result(tune_controller, trial, result)

    def on_trial_error(self, tune_controller: TuneController, trial: Trial) -> None:
        if trial.status == Trial.ERROR:  # Tune will run it again (executor.max_failures): not over yet
            super().on_trial_error(tune_controller, trial)
            return
        ray = cast(_RayProgress, self)
        last = trial.last_result or {}
        if self._worst_seen is not None and self._trial_known(trial):
            t = last.get(ray._time_attr)
            at = (t + 1) if isinstance(t, (int, float)) else 1
            self.on_trial_complete(tune_controller, trial, {ray._time_attr: at, ray._metric: self._worst_seen})
        else:
            super().on_trial_error(tune_controller, trial)

    def _trial_known(self, trial: Trial) -> bool:
        return True


class AshaScheduler(_ReusedActorsToNewTrials, _WorstValueOnError, AsyncHyperBandScheduler):
    """Tune's ASHA; a failed trial occupies its rung with the worst value seen; reused actors
    go to new trials."""

    def _trial_known(self, trial: Trial) -> bool:
        return trial.trial_id in self._trial_info


class MedianStoppingScheduler(_ReusedActorsToNewTrials, _WorstValueOnError, MedianStoppingRule):
    """Tune's median stopping rule; a failed trial's running mean includes the worst value
    seen; reused actors go to new trials."""


class Pbt(PopulationBasedTraining):
    """Tune's PBT that leaves a trial's final epoch alone: a trial at ``max_t`` is about to
    end, and perturbing it there would only restart it to report its clone's scores.

    Args:
        max_t: the last epoch of a trial (None when time counts seconds).
        kwargs: :class:`~ray.tune.schedulers.PopulationBasedTraining`'s options.
    """

    def __init__(self, *, max_t: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._max_t = max_t

    def on_trial_result(self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]) -> str:
        if self._max_t is not None and result.get(self._time_attr, 0) >= self._max_t:
            return TrialScheduler.CONTINUE
        return super().on_trial_result(tune_controller, trial, result)


class PbtExplore:
    """PBT's ``custom_explore_fn``: moves every perturbed parameter back into its space
    (a factor of 1.2 can push a dropout rate past its upper bound). Picklable.

    Args:
        dists: ``{Tune config key: Optuna distribution of its encoded values}``.
    """

    def __init__(self, dists: dict[str, optuna.distributions.BaseDistribution]) -> None:
        self.dists = dists

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in config.items():
            d = self.dists.get(k)
            if isinstance(d, optuna.distributions.CategoricalDistribution) and v not in d.choices:
                v = random.choice(d.choices)  # not a category (a list mutation outside the space)
            out[k] = clip_encoded(d, v) if d is not None else v
        return out


def pbt_mutations(hp: HyperoptConfig) -> dict[str, Any]:
    """``hyperparam_mutations`` for Tune's PBT, over encoded values: a list of encoded values,
    or a Tune domain (the parameter's own space when the sweep file gives null, or the
    mutation space it gives). Without ``hyperparam_mutations`` in the file: every searched
    parameter PBT may change (:func:`~ludwig_hpo.config.schedulers.pbt_mutable`)."""
    spaces = hp.parameters
    out: dict[str, Any] = {}
    for path, values in hp.pbt_mutated.items():
        if values is None:
            dist = to_optuna(spaces[path])
            # categories shift to a neighbour or are resampled; a Tune domain would be multiplied
            out[path] = (
                list(dist.choices)
                if isinstance(dist, optuna.distributions.CategoricalDistribution)
                else tune_domain(dist)
            )
        elif isinstance(values, dict):
            out[path] = tune_domain(to_optuna(parse_space(values)))
        else:
            out[path] = [encode_value(spaces[path], v) for v in values]
    return out


def pbt_checkpoints(hp: HyperoptConfig) -> tuple[int, int]:
    """``(first, every)``: the epochs at which a PBT trial must report a resumable checkpoint
    (PBT clones the checkpoint of the result it perturbs at): ``first``, ``first + every``, ...
    PBT perturbs first at ``max(perturbation_interval, burn_in_period)``, then every interval;
    a fractional interval, or one counted in seconds, checkpoints every epoch. ``(0, 0)``
    without PBT."""
    sch = hp.scheduler
    if not isinstance(sch, PbtScheduler):
        return 0, 0
    interval = sch.perturbation_interval
    if not sch.in_epochs or interval != int(interval):
        return 1, 1
    return math.ceil(max(interval, sch.burn_in_period)), int(interval)


def stop_epochs(hp: HyperoptConfig, epochs: int) -> tuple[int, ...]:
    """The epochs after whose report the scheduler may stop a trial, where a trial writes its
    best epoch's weights if they changed since its last checkpoint (a stopped trial gets no
    later write, and ``best_model/`` takes the best trial's last checkpoint).

    ASHA decides at its rungs (``grace_period * reduction_factor**(k + s)`` for each bracket
    ``s``, as Ray's ``_Bracket`` places them); the median stopping rule at every epoch from its
    grace period on; HyperBand, and any scheduler counting seconds, at any epoch; FIFO and PBT
    (whose exploited trials go on) never. ``epochs``: the trial's ``trainer.epochs``.
    """
    sch = hp.scheduler
    if isinstance(sch, (FifoScheduler, PbtScheduler)):
        return ()
    every = tuple(range(1, epochs + 1))
    if not sch.in_epochs or isinstance(sch, HyperbandScheduler):
        return every
    if isinstance(sch, MedianStoppingRuleScheduler):
        return tuple(e for e in every if e >= sch.grace_period)
    max_t = sch.max_t or epochs  # as make_scheduler sets it
    rungs: set[int] = set()
    for s in range(sch.brackets):
        count = int(math.log(max_t / sch.grace_period) / math.log(sch.reduction_factor) - s + 1)
        # a trial reaches a rung at the first epoch at or past it
        rungs.update(math.ceil(sch.grace_period * sch.reduction_factor ** (k + s)) for k in range(count))
    return tuple(sorted(e for e in rungs if 1 <= e <= epochs))


def make_scheduler(hp: HyperoptConfig, epochs: int) -> TrialScheduler:
    """The Tune scheduler of ``hyperopt.scheduler``; ``max_t`` defaults to ``epochs`` when
    progress counts epochs. Option names are Ray Tune's (and Ludwig's). Runs in the driver."""
    mode = "min" if hp.goal == "minimize" else "max"
    sch = hp.scheduler
    if isinstance(sch, FifoScheduler):
        return Fifo()  # type: ignore[no-untyped-call]  # Ray's FIFOScheduler.__init__ has no annotations
    common: dict[str, Any] = {"time_attr": sch.tune_time_attr, "metric": OBJECTIVE, "mode": mode}
    if isinstance(sch, PbtScheduler):
        return Pbt(
            max_t=epochs if sch.in_epochs else None,
            perturbation_interval=sch.perturbation_interval,
            burn_in_period=sch.burn_in_period,
            hyperparam_mutations=tune_keyed(pbt_mutations(hp)),
            quantile_fraction=sch.quantile_fraction,
            resample_probability=sch.resample_probability,
            perturbation_factors=tuple(sch.perturbation_factors),
            custom_explore_fn=PbtExplore(tune_keyed({p: to_optuna(s) for p, s in hp.parameters.items()})),
            log_config=sch.log_config,
            require_attrs=sch.require_attrs,
            synch=sch.synch,
            **common,
        )
    if isinstance(sch, AsyncHyperbandScheduler):
        return AshaScheduler(
            max_t=sch.max_t or epochs,
            grace_period=sch.grace_period,
            reduction_factor=sch.reduction_factor,
            brackets=sch.brackets,
            stop_last_trials=sch.stop_last_trials,
            **common,
        )
    if isinstance(sch, HyperbandScheduler):
        return HyperBandScheduler(
            max_t=sch.max_t or epochs,
            reduction_factor=sch.reduction_factor,
            stop_last_trials=sch.stop_last_trials,
            **common,
        )
    return MedianStoppingScheduler(
        grace_period=sch.grace_period,
        min_samples_required=sch.min_samples_required,
        # Ray annotates min_time_slice as int, but it counts time_attr units (seconds: a float)
        min_time_slice=sch.min_time_slice,  # type: ignore[arg-type]
        hard_stop=sch.hard_stop,
        **common,
    )
