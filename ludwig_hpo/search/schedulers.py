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
from typing import Any

import optuna
from ray.tune.schedulers import (
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    TrialScheduler,
)

from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.spaces import ParamSpace
from ludwig_hpo.search.space import clip_encoded, encode_value, to_optuna, tune_domain
from ludwig_hpo.train.report_keys import OBJECTIVE


class _ReusedActorsToNewTrials:
    """Mixin for a FIFO-ordered scheduler: name a PAUSED trial to resume, never a PENDING one.
    Runs in the driver, on Tune's event loop.

    Tune starts PENDING trials in order without the scheduler's help: a trial that no actor
    has been requested for gets a cached one (``reuse_actors``, the trial actor of a trial
    that just ended) when there is one, and otherwise requests a new actor (a cached actor
    no new trial takes goes to any pending trial). The trial that
    FIFO's choice names is instead the oldest PENDING one, whose new actor is already
    requested, often already starting; Tune hands it the cached actor and kills the starting
    one, which frees its trial slot for the next trial's new actor. When trials end sooner
    than a trial actor starts (~1.5 CPU seconds), every trial then started an actor that
    never ran one: 25 actor processes for 300 short trials, 4 at a time, in
    ``bench/bookkeeping.py``, 4 with this mixin.
    """

    def choose_trial_to_run(self, tune_controller):
        from ray.tune.experiment import Trial

        for trial in tune_controller.get_trials():
            if trial.status == Trial.PAUSED:
                return trial
        return None


class Fifo(_ReusedActorsToNewTrials, FIFOScheduler):
    """Tune's FIFO scheduler (no early stopping); reused actors go to new trials."""


class _WorstValueOnError:
    """Mixin: tell the scheduler a failed trial's result as the worst objective seen so far
    (by any trial), at the epoch after its last reported one."""

    _worst_seen: float | None = None

    def _note(self, result: dict) -> None:
        v = result.get(self._metric)
        if isinstance(v, (int, float)) and math.isfinite(v):
            sign = 1.0 if self._mode == "min" else -1.0
            if self._worst_seen is None or sign * v > sign * self._worst_seen:
                self._worst_seen = float(v)

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        self._note(result)
        return super().on_trial_result(tune_controller, trial, result)

    def on_trial_error(self, tune_controller, trial) -> None:
        from ray.tune.experiment import Trial

        if trial.status == Trial.ERROR:  # Tune will run it again (executor.max_failures): not over yet
            super().on_trial_error(tune_controller, trial)
            return
        last = trial.last_result or {}
        if self._worst_seen is not None and self._trial_known(trial):
            t = last.get(self._time_attr)
            at = (t + 1) if isinstance(t, (int, float)) else 1
            self.on_trial_complete(tune_controller, trial, {self._time_attr: at, self._metric: self._worst_seen})
        else:
            super().on_trial_error(tune_controller, trial)

    def _trial_known(self, trial) -> bool:
        return True


class AshaScheduler(_ReusedActorsToNewTrials, _WorstValueOnError, AsyncHyperBandScheduler):
    """Tune's ASHA; a failed trial occupies its rung with the worst value seen; reused actors
    go to new trials."""

    def _trial_known(self, trial) -> bool:
        return trial.trial_id in self._trial_info


class MedianStoppingScheduler(_ReusedActorsToNewTrials, _WorstValueOnError, MedianStoppingRule):
    """Tune's median stopping rule; a failed trial's running mean includes the worst value
    seen; reused actors go to new trials."""


class Pbt(PopulationBasedTraining):
    """Tune's PBT that leaves a trial's final epoch alone: a trial at ``max_t`` is about to
    end, and perturbing it there would only restart it to report its clone's scores.

    Args:
        max_t: the last epoch of a trial (None when time counts seconds).
    """

    def __init__(self, *args, max_t: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._max_t = max_t

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if self._max_t is not None and result.get(self._time_attr, 0) >= self._max_t:
            return TrialScheduler.CONTINUE
        return super().on_trial_result(tune_controller, trial, result)


class PbtExplore:
    """PBT's ``custom_explore_fn``: moves every perturbed parameter back into its space
    (a factor of 1.2 can push a dropout rate past its upper bound). Picklable.

    Args:
        dists: ``{parameter path: Optuna distribution of its encoded values}``.
    """

    def __init__(self, dists: dict[str, Any]) -> None:
        self.dists = dists

    def __call__(self, config: dict) -> dict:
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
    from pydantic import TypeAdapter

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
            out[path] = tune_domain(to_optuna(TypeAdapter(ParamSpace).validate_python(values)))
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
    if sch.type != "pbt":
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
    if sch.type in ("fifo", "pbt"):
        return ()
    every = tuple(range(1, epochs + 1))
    if not sch.in_epochs or sch.type == "hyperband":
        return every
    if sch.type == "median_stopping_rule":
        return tuple(e for e in every if e >= sch.grace_period)
    max_t = getattr(sch, "max_t", None) or epochs  # as make_scheduler sets it
    rungs = set()
    for s in range(sch.brackets):
        count = int(math.log(max_t / sch.grace_period) / math.log(sch.reduction_factor) - s + 1)
        # a trial reaches a rung at the first epoch at or past it
        rungs.update(math.ceil(sch.grace_period * sch.reduction_factor ** (k + s)) for k in range(count))
    return tuple(sorted(e for e in rungs if 1 <= e <= epochs))


def make_scheduler(hp: HyperoptConfig, epochs: int) -> TrialScheduler:
    """The Tune scheduler of ``hyperopt.scheduler``; ``max_t`` defaults to ``epochs`` when
    progress counts epochs. Option names are Ray Tune's (and Ludwig's)."""
    mode = "min" if hp.goal == "minimize" else "max"
    sch = hp.scheduler
    if sch.type == "fifo":
        return Fifo()
    common = {"time_attr": sch.tune_time_attr, "metric": OBJECTIVE, "mode": mode}
    if sch.type == "pbt":
        return Pbt(
            max_t=epochs if sch.in_epochs else None,
            perturbation_interval=sch.perturbation_interval,
            burn_in_period=sch.burn_in_period,
            hyperparam_mutations=pbt_mutations(hp),
            quantile_fraction=sch.quantile_fraction,
            resample_probability=sch.resample_probability,
            perturbation_factors=tuple(sch.perturbation_factors),
            custom_explore_fn=PbtExplore({p: to_optuna(s) for p, s in hp.parameters.items()}),
            log_config=sch.log_config,
            require_attrs=sch.require_attrs,
            synch=sch.synch,
            **common,
        )
    max_t = getattr(sch, "max_t", None) or epochs
    if sch.type in ("async_hyperband", "asha"):
        return AshaScheduler(
            max_t=max_t,
            grace_period=sch.grace_period,
            reduction_factor=sch.reduction_factor,
            brackets=sch.brackets,
            stop_last_trials=sch.stop_last_trials,
            **common,
        )
    if sch.type == "hyperband":
        return HyperBandScheduler(
            max_t=max_t, reduction_factor=sch.reduction_factor, stop_last_trials=sch.stop_last_trials, **common
        )
    if sch.type == "median_stopping_rule":
        return MedianStoppingScheduler(
            grace_period=sch.grace_period,
            min_samples_required=sch.min_samples_required,
            min_time_slice=sch.min_time_slice,
            hard_stop=sch.hard_stop,
            **common,
        )
    raise ValueError(f"unknown scheduler {sch.type!r}")  # the schema admits no other
