"""Searcher and scheduler: Optuna's sampler behind Tune's ``OptunaSearch``, and a Tune
trial scheduler. Early stopping belongs to the Tune scheduler (``OptunaSearch`` gives its
study a no-op pruner)."""

from __future__ import annotations

from typing import Any

import optuna
from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search.optuna import OptunaSearch

from ludwig_hpo.config.schema import HyperoptConfig
from ludwig_hpo.search.space import to_optuna

#: The key every trial reports for the scheduler: the metric's current value on its split.
OBJECTIVE = "objective"
#: Epochs, not Tune iterations, measure a trial's progress (a restored trial restarts its iterations).
TIME_ATTR = "epoch"


def make_sampler(hp: HyperoptConfig) -> optuna.samplers.BaseSampler:
    """The seeded Optuna sampler of ``hyperopt.search_alg``."""
    sa = hp.search_alg
    if sa.sampler == "random":
        return optuna.samplers.RandomSampler(seed=sa.seed)
    return optuna.samplers.TPESampler(seed=sa.seed, n_startup_trials=sa.n_startup_trials)


def make_searcher(hp: HyperoptConfig) -> OptunaSearch:
    """``OptunaSearch`` over the declared parameters, optimizing :data:`OBJECTIVE` toward ``goal``."""
    space: dict[str, Any] = {path: to_optuna(s) for path, s in hp.parameters.items()}
    mode = "min" if hp.goal == "minimize" else "max"
    return OptunaSearch(space=space, metric=OBJECTIVE, mode=mode, sampler=make_sampler(hp))


def make_scheduler(hp: HyperoptConfig, epochs: int) -> TrialScheduler:
    """ASHA (``async_hyperband`` / ``asha``) with rungs at ``grace_period * reduction_factor**i``
    epochs up to ``epochs``, or FIFO."""
    mode = "min" if hp.goal == "minimize" else "max"
    sch = hp.scheduler
    if sch.type in ("async_hyperband", "asha"):
        return AsyncHyperBandScheduler(time_attr=TIME_ATTR, metric=OBJECTIVE, mode=mode, max_t=epochs,
                                       grace_period=sch.grace_period, reduction_factor=sch.reduction_factor)
    return FIFOScheduler()
