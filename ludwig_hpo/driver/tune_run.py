"""One Tune experiment of a sweep (the search or the k-fold re-evaluation): build its
``Tuner``, or restore it from the output folder when a resumed sweep had started it, and fit
it, with the period at which Tune saves its experiment state. Driver process only, inside the
sweep's Ray cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.driver.journal import JournalEntry, ended_outside_state, restore_missing_checkpoints
from ludwig_hpo.driver.paths import SEARCH, Experiment
from ludwig_hpo.driver.sweep_run import SweepRun
from ludwig_hpo.execution.cluster import no_callback_usage_tag, scoped_env
from ludwig_hpo.tracking import layout

if TYPE_CHECKING:
    from ray.tune import ResultGrid, Tuner
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.search import SearchAlgorithm, Searcher

    from ludwig_hpo.driver.monitor import SweepMonitor
    from ludwig_hpo.results.live import LiveTrial

#: Sweeps up to this many trials save Tune's experiment state at every step of its loop.
SAVE_EVERY_STEP_MAX_TRIALS = 200
#: Tune's variable for the period of its experiment-state saves (a user's setting wins).
SAVE_PERIOD_ENV = "TUNE_GLOBAL_CHECKPOINT_S"


@runtime_checkable
class AdoptsEndedTrials(Protocol):
    """A searcher that can be told the result of a trial Tune's saved state does not hold
    (:meth:`ludwig_hpo.search.algorithms._Search.adopt_ended`)."""

    def adopt_ended(self, trial_id: str, params: dict[str, Any], result: dict[str, Any]) -> bool: ...

    def restore_from_dir(self, checkpoint_dir: str) -> None: ...

    def save(self, checkpoint_path: str) -> None: ...


@dataclass(frozen=True)
class TuneExperiment:
    """What one Tune experiment runs.

    Attributes:
        name: ``search`` or ``kfold`` (its folder under ``ray/``).
        trainable: the Tune function trainable (called with ``ctx`` by Tune).
        monitor: the sweep monitor of this experiment (its sinks write the trials' events).
        param_space: Tune's param space (the k-fold jobs; PBT's space), or None.
        search_alg: the searcher (Optuna, or Tune's variant generator for PBT), or None.
        scheduler: the Tune scheduler, or None (FIFO).
        num_samples: Tune's ``num_samples``.
        time_budget_s: seconds after which the search ends (no trial starts, running ones stop), or None.
    """

    name: Experiment
    trainable: Callable[..., Any]
    monitor: SweepMonitor
    param_space: dict[str, Any] | None = None
    search_alg: Searcher | SearchAlgorithm | None = None
    scheduler: TrialScheduler | None = None
    num_samples: int = 1
    time_budget_s: float | None = None


def save_period(num_trials: int) -> str:
    """``TUNE_GLOBAL_CHECKPOINT_S`` for a sweep of ``num_trials`` trials: ``"0"`` (every step of
    Tune's loop, so every trial that started is in the saved state) up to
    :data:`SAVE_EVERY_STEP_MAX_TRIALS`; Tune's adaptive period (``"auto"``: >= 10 s, about 5 % of
    the driver's time) above, whose saved state grows with every trial, so that saving it at
    every step would cost more than it saves."""
    return "0" if num_trials <= SAVE_EVERY_STEP_MAX_TRIALS else "auto"


def fit_experiment(exp: TuneExperiment, run: SweepRun, cfg: SweepConfig, mode: str) -> ResultGrid:
    """Run ``exp`` to its end and return Tune's results; every trial's events are written by
    the monitor's sinks when this returns (or raises).

    A resumed sweep whose experiment Tune had started restores it (finished and failed trials
    stay as they ended, unfinished ones continue from their checkpoints); search trials that
    ended after Tune's last save count as ended (the journal's entries go to the monitor and
    the searcher). ``mode``: ``min`` or ``max``.

    Raises:
        KeyboardInterrupt, SystemExit: Ctrl-C or SIGTERM; still-running trials are closed as
            KILLED (``interrupted``) first.
        Exception: Tune's error, or a sink's write error.
    """
    from ray import tune

    from ludwig_hpo.execution.trainable import trial_resources

    trainable = tune.with_resources(
        tune.with_parameters(exp.trainable, ctx=run.ctx), trial_resources(run.plan, run.executor.executor)
    )
    callback = exp.monitor.handle(exp.name)
    exp.monitor.replayed = run.journal
    saved = run.paths.experiment(exp.name)
    if run.resumed and run.paths.tuner_state(exp.name).is_file():
        tuner = _restore(exp, run, trainable, saved)
    else:
        tuner = _new_tuner(exp, run, cfg, mode, trainable, callback)
    period = os.environ.get(SAVE_PERIOD_ENV, save_period(cfg.hyperopt.num_trials))
    try:
        with scoped_env({SAVE_PERIOD_ENV: period}), no_callback_usage_tag():
            grid = tuner.fit()
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):  # Ctrl-C, or SIGTERM through Ray's handler
            exp.monitor.close_running(layout.STOPPED_BY_INTERRUPTED)
        with contextlib.suppress(Exception):  # the interruption or first error is what is shown
            exp.monitor.flush()
        raise
    exp.monitor.flush()  # the MLflow sink writes in the background: every run is complete when a phase ends
    return grid


def _restore(exp: TuneExperiment, run: SweepRun, trainable: Any, saved: Path) -> Tuner:
    """Tune restores the searcher's state, its trials and the monitor's book (the scheduler
    starts afresh with the restored trials)."""
    from ray import tune

    restore_missing_checkpoints(saved)  # deleted after Tune's last save, just before the stop
    if exp.name == SEARCH:  # k-fold jobs that ended after the last save just run again
        ended = ended_outside_state(run.journal, exp.name, saved)
        exp.monitor.ended_outside_state = ended
        if ended and isinstance(exp.search_alg, AdoptsEndedTrials):
            adopt_into_saved_searcher(exp.search_alg, saved, ended)
    return tune.Tuner.restore(
        str(saved),
        trainable,
        resume_unfinished=True,
        resume_errored=False,
        restart_errored=False,
        param_space=exp.param_space,
    )


def adopt_into_saved_searcher(searcher: AdoptsEndedTrials, saved: Path, ended: Mapping[str, JournalEntry]) -> int:
    """Tell the searcher state Tune saved under ``saved`` the trials that ended after that save.

    On ``Tuner.restore`` Tune rebuilds the searcher from its newest saved state file, so the
    hand-off goes through that file: ``searcher`` (a fresh one of the same kind) loads it, adopts
    each entry (its config and last result), and is saved back under the same name, which Tune
    then restores. Returns the number of trials adopted (0 when Tune saved no searcher state).
    """
    from ray.tune.search import Searcher

    files = sorted(saved.glob(Searcher.CKPT_FILE_TMPL.format("*")))
    if not files:
        return 0
    searcher.restore_from_dir(str(saved))
    adopted = sum(
        searcher.adopt_ended(tid, dict(e.get("config", {})), dict(e["results"][-1]))
        for tid, e in ended.items()
        if e["results"]
    )
    if adopted:  # written beside it and renamed over it, as Tune writes it: a crash leaves one whole file
        tmp = saved / f".{files[-1].name}.tmp"
        searcher.save(str(tmp))
        os.replace(tmp, files[-1])
    return adopted


def _new_tuner(exp: TuneExperiment, run: SweepRun, cfg: SweepConfig, mode: str, trainable: Any, callback: Any) -> Tuner:
    from ray import tune

    from ludwig_hpo.train.report_keys import CHECKPOINT_OBJECTIVE

    kw: dict[str, Any] = {"num_samples": exp.num_samples}
    if exp.search_alg is not None:
        kw["search_alg"] = exp.search_alg
    if exp.scheduler is not None:
        kw["scheduler"] = exp.scheduler
    if exp.time_budget_s:
        kw["time_budget_s"] = exp.time_budget_s
    return tune.Tuner(
        trainable,
        param_space=exp.param_space,
        # Pooled trials reuse Tune's trial actors (starting a new actor costs more than a reset):
        # a stopped pooled trial's tune.report raises SystemExit in its thread, which only tells
        # the warm group to stop and returns, so the actor resets within Tune's 2 s. Fresh
        # trials keep it off: a stopped trial's thread is inside TorchTrainer.fit(), and a
        # reused actor would keep that Train controller (and its CPUs) alive, so the sweep
        # would hang.
        tune_config=tune.TuneConfig(max_concurrent_trials=run.plan.max_concurrent, reuse_actors=run.pooled, **kw),
        run_config=tune.RunConfig(
            name=exp.name,
            storage_path=str(run.paths.ray),
            verbose=0,
            callbacks=[callback],
            failure_config=tune.FailureConfig(max_failures=cfg.hyperopt.executor.max_failures),
            # Trials checkpoint through Tune (1-worker and pooled ones): keep the one whose
            # best weights are best, which is the latest (a restored or retried trial
            # continues from it).
            # PBT keeps all: a trial may clone another's checkpoint after it was superseded.
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=None if cfg.hyperopt.scheduler.type == "pbt" else 1,
                checkpoint_score_attribute=CHECKPOINT_OBJECTIVE,
                checkpoint_score_order=mode,
            ),
        ),
    )


def best_checkpoints(grid: ResultGrid, monitor: SweepMonitor, mode: str) -> dict[str, str]:
    """``{trial id: checkpoint folder}`` holding each trial's best weights: the one its reports
    named (the monitor's book: Train's checkpoint of a fresh multi-worker trial, or the one a
    report handed to Tune), else the best one Tune kept (by ``checkpoint_objective`` toward
    ``mode``)."""
    from ludwig_hpo.train.report_keys import CHECKPOINT_OBJECTIVE, OBJECTIVE

    checkpoints = {tid: t.checkpoint for tid, t in monitor.trials.items() if t.checkpoint}
    for r in (grid[i] for i in range(len(grid))):
        tid = (r.metrics or {}).get("trial_id")
        if tid and tid not in checkpoints and r.best_checkpoints:
            try:
                best = r.get_best_checkpoint(CHECKPOINT_OBJECTIVE, mode)
            except RuntimeError:  # checkpoints whose reports lack the key: rank them by the objective
                best = r.get_best_checkpoint(OBJECTIVE, mode)
            if best is not None:
                checkpoints[tid] = best.path
    return checkpoints


def time_budget_stop(budget_s: float | None, elapsed_s: float, planned: int, trials: list[LiveTrial]) -> str | None:
    """Why the search ended before its planned trials, when its time budget ended it:
    ``"time budget reached after 3 of 8 trials"`` (with how many running trials it stopped),
    else None. Pure; driver.

    Args:
        budget_s: ``hyperopt.executor.time_budget_s`` (None: no budget).
        elapsed_s: seconds the search's Tune experiment ran (measured around it, so never
            less than what Tune measured).
        planned: trials the search was to run.
        trials: the search's trials (started ones), as its monitor holds them.
    """
    if not budget_s:
        return None
    cut = sum(t.stopped_by == layout.STOPPED_BY_TIME_BUDGET for t in trials)
    if not cut and (len(trials) >= planned or elapsed_s < budget_s):
        return None
    stopped = f" ({cut} running trial(s) stopped by it)" if cut else ""
    return f"time budget reached after {len(trials)} of {planned} trials{stopped}"


def pbt_search(exp: TuneExperiment, hp: HyperoptConfig) -> TuneExperiment:
    """``exp`` searched by Tune's own random variant generator over ``hp``'s space (with its
    ``points_to_evaluate`` first): PBT explores by itself and runs with no other search
    algorithm. Pure; driver."""
    from ray.tune.search import BasicVariantGenerator

    from ludwig_hpo.search.space import encode_value, to_tune, tune_keyed

    points = [
        tune_keyed({p: encode_value(hp.parameters[p], v) for p, v in point.items()})
        for point in hp.search_alg.points_to_evaluate
    ]
    return dataclasses.replace(
        exp,
        param_space=tune_keyed({p: to_tune(s) for p, s in hp.parameters.items()}),
        search_alg=BasicVariantGenerator(points_to_evaluate=points or None, random_state=hp.search_alg.seed),
        num_samples=hp.executor.num_samples,  # Tune multiplies by the grid itself
    )
