"""The searcher: Optuna's sampler behind Tune's ``OptunaSearch``. Early stopping belongs
to the Tune scheduler (:mod:`ludwig_hpo.search.schedulers`; ``OptunaSearch`` gives its study
a no-op pruner).

Grid points (``grid_search`` parameters) and ``points_to_evaluate`` are enqueued in the
Optuna study, so they run first and in order while the sampler still learns from them;
a sweep with only ``grid_search`` parameters runs exactly the Cartesian product.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import optuna
from optuna.distributions import BaseDistribution
from ray.tune.result import TRAINING_ITERATION
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.spaces import GridSearchSpace
from ludwig_hpo.search.space import encode_value, to_optuna, tune_keyed
from ludwig_hpo.train.report_keys import OBJECTIVE


def make_sampler(hp: HyperoptConfig) -> optuna.samplers.BaseSampler:
    """The seeded Optuna sampler of ``hyperopt.search_alg`` (``random`` for the grid and the
    random types: enqueued grid points fix every parameter)."""
    sa = hp.search_alg
    given = sa.model_fields_set
    name = sa.effective_sampler
    opt: dict[str, Any] = {"seed": sa.seed}
    if name in ("random", "grid"):
        return optuna.samplers.RandomSampler(**opt)
    if name == "tpe":
        return optuna.samplers.TPESampler(n_startup_trials=sa.n_startup_trials, multivariate=sa.multivariate, **opt)
    if "n_startup_trials" in given:
        opt["n_startup_trials"] = sa.n_startup_trials
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(popsize=sa.population_size, warn_independent_sampling=False, **opt)
    if name == "gp":
        return optuna.samplers.GPSampler(warn_independent_sampling=False, **opt)
    if name == "qmc":
        return optuna.samplers.QMCSampler(
            qmc_type=sa.qmc_type, scramble=sa.seed is not None, warn_independent_sampling=False, **opt
        )
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=sa.population_size or 50, **opt)
    raise ValueError(f"unknown sampler {name!r}")  # the schema admits no other


def enqueued_points(hp: HyperoptConfig) -> list[dict[str, Any]]:
    """Configurations run first, in order, as Optuna values: ``points_to_evaluate``, then
    every grid point ``num_samples`` times (once for ``type: grid``), in Ray Tune's order
    (the grid repeated per sample, the last parameter varying fastest)."""
    spaces = hp.parameters
    points = [
        tune_keyed({p: encode_value(spaces[p], v) for p, v in pt.items()}) for pt in hp.search_alg.points_to_evaluate
    ]
    grid = {p: s for p, s in spaces.items() if isinstance(s, GridSearchSpace)}
    if grid:
        combos = [
            dict(zip(grid, values, strict=True)) for values in itertools.product(*(s.values for s in grid.values()))
        ]
        repeats = 1 if hp.search_alg.type == "grid" else hp.executor.num_samples
        points += [
            tune_keyed({p: encode_value(spaces[p], v) for p, v in c.items()}) for _ in range(repeats) for c in combos
        ]
    return points


class _Search(OptunaSearch):
    """``OptunaSearch`` that enqueues :func:`enqueued_points` and tells Optuna a failed trial
    as the worst value seen so far (so the sampler moves away from it instead of ignoring it);
    with several objectives, the worst value of each."""

    def __init__(
        self,
        *,
        space: dict[str, BaseDistribution],
        metric: str | list[str],
        mode: str | list[str],
        sampler: optuna.samplers.BaseSampler,
        enqueue: list[dict[str, Any]],
        limit: int | None = None,
    ) -> None:
        self._enqueue = enqueue
        self._limit = limit
        self._adopted: set[str] = set()
        #: per trial, the largest step reported to Optuna (saved with the searcher's state)
        self._reported: dict[str, int] = {}
        modes = mode if isinstance(mode, list) else [mode]
        self._signs = [1.0 if m == "min" else -1.0 for m in modes]
        super().__init__(space=space, metric=metric, mode=mode, sampler=sampler)

    def _study(self) -> optuna.Study | None:
        # OptunaSearch first sets _ot_study to None, so type checkers infer None for it
        return cast("optuna.Study | None", self._ot_study)

    def _setup_study(self, mode: str | list[str]) -> None:
        super()._setup_study(mode)
        study = self._study()
        if study is not None:
            for point in self._enqueue:
                study.enqueue_trial(point)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """Optuna's next configuration, or ``FINISHED`` once the sweep has ``limit`` trials
        (counting those that ended after Tune last saved its state). Runs in the driver."""
        limit = getattr(self, "_limit", None)  # None in a saved searcher state without it
        study = self._study()
        # Tune stops at num_samples by itself; only adopted trials make the count differ
        if limit is not None and getattr(self, "_adopted", None) and study is not None:
            started = sum(t.state != optuna.trial.TrialState.WAITING for t in study.get_trials(deepcopy=False))
            if started >= limit:
                # Searcher.suggest is annotated Optional[Dict], but Tune reads FINISHED from it too
                return Searcher.FINISHED  # type: ignore[return-value]
        return super().suggest(trial_id)

    def adopt_ended(self, trial_id: str, params: dict[str, Any], result: dict[str, Any]) -> bool:
        """Tell Optuna the result of a trial that Tune's saved state does not hold: it started
        and ended after Tune last saved (see :func:`ludwig_hpo.driver.journal.ended_outside_state`).
        It then counts toward the sweep's ``limit`` trials. Called by the driver on the searcher
        it restored from Tune's saved state, before Tune restores the experiment.

        Args:
            trial_id: Tune's id of the ended trial (adopted once; later calls are no-ops).
            params: its configuration as the searcher encoded it.
            result: its last reported result, holding the searcher's metric key(s).

        Returns:
            True when the trial was added to the study (False: already adopted, no study yet,
            or a metric is missing from ``result``).
        """
        adopted: set[str] = getattr(self, "_adopted", set())  # absent from a saved searcher state without it
        keys = self._metric_keys()
        study = self._study()
        if study is None or trial_id in adopted:
            return False
        if not all(isinstance(result.get(k), (int, float)) for k in keys):
            return False
        space = self._distributions()
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={p: space[p] for p in params if p in space},
                values=[float(result[k]) for k in keys],
            )
        )
        self._adopted = adopted | {trial_id}
        return True

    def _metric_keys(self) -> list[str]:
        metric: str | list[str] = self.metric
        return metric if isinstance(metric, list) else [metric]

    def _distributions(self) -> dict[str, BaseDistribution]:
        # OptunaSearch types its space as any of its accepted forms; make_searcher gives a mapping
        return cast("dict[str, BaseDistribution]", self._space)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """Report the result's objective to the trial's Optuna trial at Tune's iteration, once
        per step: a trial that continues from a checkpoint (a resumed sweep, a retry) or
        replays its journaled results reports steps Optuna already holds, which it would
        ignore with a warning. Runs in the driver."""
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is not None and not isinstance(self.metric, list) and trial_id not in self._completed_trials:
            step = int(result[TRAINING_ITERATION])
            if step <= self._last_reported(trial_id, ot_trial):
                return
            reported: dict[str, int] = getattr(self, "_reported", None) or {}
            self._reported = {**reported, trial_id: step}
        super().on_trial_result(trial_id, result)

    def _last_reported(self, trial_id: str, ot_trial: optuna.Trial) -> int:
        """The largest step the trial reported to Optuna (-1 when none); a searcher state saved
        without this bookkeeping reads it from the study once."""
        reported: dict[str, int] | None = getattr(self, "_reported", None)
        if reported is None or trial_id not in reported:
            study = self._study()
            frozen = study.get_trials(deepcopy=False)[ot_trial.number] if study is not None else None
            last = max(frozen.intermediate_values, default=-1) if frozen is not None else -1
            self._reported = {**(reported or {}), trial_id: last}
            return last
        return reported[trial_id]

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        keys = self._metric_keys()
        study = self._study()
        if study is not None and error and not (result and all(result.get(k) is not None for k in keys)):
            done = [
                t.values
                for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                if t.values is not None and all(math.isfinite(v) for v in t.values)
            ]
            if done:
                worst = [_worst(done, i, sign) for i, sign in enumerate(self._signs)]
                result = {**(result or {}), **dict(zip(keys, worst, strict=True))}
                error = False
        super().on_trial_complete(trial_id, result=result, error=error)


def _worst(values: list[list[float]], i: int, sign: float) -> float:
    """The worst ``i``-th objective of ``values`` (``sign``: +1 minimizes, -1 maximizes)."""
    return max((v[i] for v in values), key=lambda x: sign * x)


def make_searcher(hp: HyperoptConfig, objectives: list[tuple[str, str]] | None = None) -> OptunaSearch:
    """``OptunaSearch`` over the declared parameters, optimizing :data:`~ludwig_hpo.train.report_keys.OBJECTIVE` toward
    ``goal``, or, with several ``objectives`` (``[(reported key, goal)]``, from
    :attr:`SweepConfig.objectives`), every one of them (a Pareto front)."""
    space = tune_keyed({path: to_optuna(s) for path, s in hp.parameters.items()})
    if objectives and len(objectives) > 1:
        metric: str | list[str] = [k for k, _ in objectives]
        mode: str | list[str] = ["min" if g == "minimize" else "max" for _, g in objectives]
    else:
        metric, mode = OBJECTIVE, "min" if hp.goal == "minimize" else "max"
    return _Search(
        space=space,
        metric=metric,
        mode=mode,
        sampler=make_sampler(hp),
        enqueue=enqueued_points(hp),
        limit=hp.num_trials,
    )
