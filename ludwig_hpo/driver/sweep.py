"""The sweep's phases: prepare the data and resources, create (or reopen) the output folder and
tracking, the search, the k-fold re-evaluation of the best configurations, and the finish
(results, report). Driver process only.

Order matters for users: everything that can be wrong with their input (config, data,
resources, tracking store) is checked before the output folder exists. The local Ray cluster
and the store's process start meanwhile (:mod:`.startup`) and stop before such an error shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.console import Console

from ludwig_hpo.config.describe import search_line
from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.driver.console import activity, say
from ludwig_hpo.driver.final_model import FinalModel
from ludwig_hpo.driver.finish import finish_sweep
from ludwig_hpo.driver.journal import JournalSink, read_journal
from ludwig_hpo.driver.output import closing_parent_run, create_output, reopen_output
from ludwig_hpo.driver.paths import KFOLD, SEARCH, Experiment
from ludwig_hpo.driver.prepare_data import prepare_sweep
from ludwig_hpo.driver.startup import Startup
from ludwig_hpo.driver.state import SweepKind, SweepState
from ludwig_hpo.driver.streamed_checks import check_streamed_sweep
from ludwig_hpo.driver.summary import batch_cache_stats
from ludwig_hpo.driver.sweep_run import Prepared, SearchOutcome, SweepOutput, SweepRun
from ludwig_hpo.driver.tune_run import (
    TuneExperiment,
    best_checkpoints,
    fit_experiment,
    pbt_search,
    time_budget_stop,
)
from ludwig_hpo.execution.cluster import cluster_plan, existing_cluster, local_plan
from ludwig_hpo.execution.cluster_start import ClusterStart
from ludwig_hpo.execution.executor import ExecutorChoice, choose_executor
from ludwig_hpo.execution.resources import NodeShape, ResourcePlan
from ludwig_hpo.results import KFoldRecord, SweepResult, TrialRecord
from ludwig_hpo.results.ranking import asha_rungs, distinct_top, rank_trials
from ludwig_hpo.search.space import param_infos
from ludwig_hpo.tracking import layout

if TYPE_CHECKING:
    from ludwig_hpo.driver.monitor import SweepMonitor
    from ludwig_hpo.results.live import TrialDescription, TrialSink


class Sweep:
    """One run of ``hpo sweep``: construct with a loaded sweep file, then :meth:`run`.

    Args:
        loaded: the validated sweep file.
        console: where progress goes.
        output_root: overrides the output root folder.
        resume: continue the unfinished sweep in ``resume_dir`` described by this state
            (finished trials are kept, unfinished ones run again, the MLflow runs are reused).
        resume_dir: the output folder of the sweep to resume.
        dataset: the ``--dataset`` file that replaced ``dataset.source`` (kept for a resume).
        address: a running Ray cluster to use (``host:port``); None starts a private local one.
        nest_under: a run of the store the sweep's parent run is a child of (``hpo train
            --from-sweep``: the finished sweep's parent run), or None.
        retune_batch_size: probe ``batch_size: auto`` again instead of reusing the sizes
            persisted by earlier sweeps (the new sizes are persisted).
        kind: ``train`` for an ``hpo train`` run (its ``state.json`` says so from the start).
    """

    def __init__(
        self,
        loaded: LoadedSweep,
        console: Console,
        output_root: Path | None = None,
        *,
        resume: SweepState | None = None,
        resume_dir: Path | None = None,
        dataset: Path | str | None = None,
        address: str | None = None,
        retune_batch_size: bool = False,
        nest_under: str | None = None,
        kind: SweepKind = "sweep",
    ) -> None:
        if resume is not None and resume_dir is None:
            raise ValueError("a resumed sweep needs its output folder (resume_dir)")
        self.address = address
        self.nest_under = nest_under
        self.kind: SweepKind = kind
        self.t0 = time.time()  # the sweep's clock (the console's time stamps); reset by run()
        self.retune_batch_size = retune_batch_size
        self.loaded = loaded
        self.cfg = loaded.config
        self.console = console
        self.output_root = output_root
        self.resume = (resume, Path(resume_dir)) if resume is not None and resume_dir is not None else None
        self.dataset = Path(dataset).resolve() if dataset else None
        self.sign = self.cfg.goal_sign
        self.mode = "min" if self.sign > 0 else "max"  # Tune's spelling of the goal
        self.metric = self.cfg.hyperopt.metric_key
        self.streams = False  # the dataset streams (set by _plan)

    def _say(self, text: str) -> None:
        say(self.console, text)

    # ------------------------------------------------------------------ checks before anything exists
    def _plan(self, nodes: list[NodeShape] | None) -> tuple[ResourcePlan, ExecutorChoice]:
        """The resources (on ``nodes``, else local) and executor, from the config alone."""
        cfg = self.cfg
        plan = local_plan(cfg, self.loaded.path) if nodes is None else cluster_plan(cfg, nodes, existing=True)
        pbt = cfg.hyperopt.scheduler.type == "pbt"
        self.streams = check_streamed_sweep(self.loaded, plan) is not None  # a stream's refusals, before Ray
        return plan, choose_executor(cfg.backend.trial_executor, use_gpu=plan.use_gpu, pbt=pbt)

    # ------------------------------------------------------------------ the run
    def run(self) -> SweepResult:
        """Run the search, the k-fold re-evaluation and the report. Driver only.

        With ``address``, the driver connects to that cluster first and plans the trials on
        its nodes (``ray.nodes()``); an infeasible request is an error before anything runs.

        Raises:
            UserError: bad data, resources, cluster address or tracking store (before the
                output folder is created; a local cluster started meanwhile is stopped first).
        """
        t0 = self.t0 = time.time()
        # An inherited MLFLOW_RUN_ID (e.g. a sweep started from inside another MLflow run)
        # must not make any library resume that run: the sweep creates its own parent run.
        inherited = os.environ.pop("MLFLOW_RUN_ID", None)
        if inherited:
            self._say(f"note: MLFLOW_RUN_ID={inherited} is ignored; this sweep logs to its own parent run")
        try:
            with existing_cluster(self.address) if self.address else contextlib.nullcontext() as nodes:
                if self.address:
                    self._say(f"ray: connected to {self.address} ({len(nodes or [])} node(s))")
                plan, executor = self._plan(nodes)
                with Startup(plan, executor) as early:  # Ray and the store's process start meanwhile
                    prepared = prepare_sweep(
                        self.loaded, plan, executor, early.cluster, self._say, streams=self.streams
                    )
                    if self.resume is None:
                        output = create_output(
                            self.loaded,
                            self.output_root,
                            self.dataset,
                            self.console,
                            nest_under=self.nest_under,
                            kind=self.kind,
                            pending=early.store,
                        )
                    else:
                        output = reopen_output(self.loaded, *self.resume, self.console, early.store)
                    early.logs_to(output.paths.ray_log)
                    with closing_parent_run(output, self.console):
                        return self._run_ray(prepared, output, t0, early.cluster)
        finally:
            if inherited:
                os.environ["MLFLOW_RUN_ID"] = inherited

    def _run_ray(
        self, prepared: Prepared, output: SweepOutput, t0: float, starting: ClusterStart | None
    ) -> SweepResult:
        """The phases inside the sweep's Ray cluster (the local one ``starting``, stopped
        here once the k-fold phase ended; None: an existing one): search, k-fold; then the
        final model, once the local cluster stopped, and the finish."""
        import optuna

        from ludwig_hpo.execution.cache import persisted_sizes

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        cfg, plan, paths = self.cfg, prepared.plan, output.paths
        journal = read_journal(paths.journal) if output.resumed else {}
        with contextlib.ExitStack() as stack:
            if starting is not None:
                stack.callback(starting.stop)
                with activity(self.console, f"starting Ray (a local cluster of {plan.cluster_cpus:g} CPUs)"):
                    starting.wait()
            auto = "auto" in (cfg.trainer.batch_size, cfg.trainer.eval_batch_size)
            persisted = persisted_sizes(paths.batch_sizes, auto=auto, retune=self.retune_batch_size)
            for line in persisted.warnings:
                self._say(f"warning: {line}")
            pooled = prepared.executor.executor == "pooled"
            warming = f", starting {plan.max_concurrent} warm worker group(s)" if pooled else ""
            data = (
                "handing the streamed dataset to the trials"
                if self.streams
                else "putting the data in Ray's object store"
            )
            with activity(self.console, f"{data}{warming}"):
                run = SweepRun.start(output, prepared, self.loaded, journal, self.mode, persisted=persisted)
            search = self._search(run)
            output.enter("kfold")
            batch_cache_stats(run, cfg, self.console)
            ranked = rank_trials(search.records, self.sign)
            best = ranked[0] if ranked else None
            kfold: tuple[KFoldRecord, ...] = ()
            top, retrained = (distinct_top(ranked, cfg.kfold.top_k) if cfg.kfold else []), dict[int, str]()
            if cfg.kfold is not None and ranked:
                if cfg.hyperopt.scheduler.type == "pbt":
                    # a PBT trial's parameters are a schedule: re-evaluate what each ended with
                    top = [dataclasses.replace(r, params=search.final_params.get(r.trial_id, r.params)) for r in top]
                    self._say("k-fold: PBT trials are re-evaluated with the parameters they ended with")
                kfold, retrained = self._kfold(run, top, cfg.kfold.k)
        # once the local cluster's warm workers are gone: the driver's torch is not resident beside them
        final = FinalModel(
            best, search.checkpoints, loaded=self.loaded, data=prepared.data, output=output, console=self.console
        )
        final.after_search()
        if cfg.kfold is not None and ranked:
            final.after_kfold(top, kfold, retrained)
        output.enter("report")
        result = SweepResult(
            name=cfg.name,
            metric=self.metric,
            goal=cfg.hyperopt.goal,
            parameters=param_infos(cfg.hyperopt.parameters),
            trials=search.records,
            kfold=kfold,
            best_trial_id=best.trial_id if best else None,
            wall_time_s=time.time() - t0,
            objectives=tuple(k for k, _ in cfg.objectives) if cfg.hyperopt.multi_objective else (),
            pareto_trial_ids=self._pareto(search.records),
            output_dir=str(paths.root),
            tracking_uri=output.store.uri,
            stop_reason=search.stop_reason,
            test_scores=final.test_scores,
            selection=final.selection,
        )
        finish_sweep(output, result, best, self.cfg, self.console)
        output.enter("finished")
        return result

    def _pareto(self, records: tuple[TrialRecord, ...]) -> tuple[str, ...]:
        """The Pareto set of a multi-objective search (empty for one metric), printed."""
        if not self.cfg.hyperopt.multi_objective:
            return ()
        from ludwig_hpo.search.pareto import pareto_trial_ids

        ids = pareto_trial_ids(records, self.cfg.objectives)
        self._say(
            f"pareto set ({len(ids)} trial(s) not dominated on "
            f"{', '.join(k for k, _ in self.cfg.objectives)}): {', '.join(ids) or 'none'}"
        )
        return ids

    def _trial_config_text(self, params: dict[str, Any]) -> str:
        """The full resolved config of a trial (defaults filled in), as YAML."""
        from ludwig_hpo.config.loader import resolve_trial_config

        return yaml.safe_dump(resolve_trial_config(self.loaded.raw, params).model_dump(mode="json"), sort_keys=False)

    def _monitor(
        self,
        run: SweepRun,
        experiment: Experiment,
        describe: Callable[[str, dict[str, Any]], TrialDescription],
        sinks: list[TrialSink],
        *,
        early_stopping: bool = True,
        objective_key: str | None = None,
    ) -> SweepMonitor:
        """The experiment's monitor: the journal first (a trial's end is on disk before anything
        else hears of it), then ``sinks``."""
        from ludwig_hpo.driver.monitor import SweepMonitor

        return SweepMonitor(
            epochs=self.cfg.trainer.epochs,
            goal_sign=self.sign,
            describe=describe,
            sinks=[JournalSink(run.paths.journal, experiment), *sinks],
            early_stopping=early_stopping,
            objective_key=objective_key,
        )

    # ------------------------------------------------------------------ the search
    def _search(self, run: SweepRun) -> SearchOutcome:
        from ludwig_hpo.driver.console import ConsoleSink
        from ludwig_hpo.driver.live_report import live_report_sinks
        from ludwig_hpo.execution.trainable import search_trial
        from ludwig_hpo.results.live import TrialDescription
        from ludwig_hpo.search.algorithms import make_searcher
        from ludwig_hpo.search.schedulers import make_scheduler
        from ludwig_hpo.search.space import decode
        from ludwig_hpo.tracking.sink import MlflowSink

        cfg, hp = self.cfg, self.cfg.hyperopt
        n, budget = hp.num_trials, hp.executor.time_budget_s
        self._say(search_line(cfg))
        rungs: tuple[int, ...] = ()
        if hp.scheduler.type in ("async_hyperband", "asha"):
            rungs = asha_rungs(hp.scheduler.grace_period, hp.scheduler.reduction_factor, cfg.trainer.epochs)
        console = ConsoleSink(self.console, self.metric, self.sign, n, t0=self.t0, epochs=cfg.trainer.epochs)
        if run.pooled:
            console.waiting = "waiting for the warm worker groups and the first trial"
        monitor = self._monitor(
            run,
            SEARCH,
            lambda tid, config: TrialDescription(
                decode(hp.parameters, config), {layout.PHASE_TAG: layout.PHASE_SEARCH}, layout.trial_run_name(tid)
            ),
            [
                MlflowSink(
                    run.store,
                    run.parent,
                    run_kind=layout.RUN_KIND_TRIAL,
                    config_text=self._trial_config_text,
                    rungs=rungs,
                    objective_key=self.metric,
                    resume=run.resumed,
                ),
                console,
                *live_report_sinks(cfg, run.paths, run.store.uri, started_s=self.t0),
            ],
            objective_key=self.metric,
        )
        exp = TuneExperiment(
            SEARCH,
            search_trial,
            monitor,
            scheduler=make_scheduler(hp, cfg.trainer.epochs),
            num_samples=n,
            time_budget_s=budget or None,
        )
        if hp.scheduler.type == "pbt":
            exp = pbt_search(exp, hp)
        else:
            exp = dataclasses.replace(exp, search_alg=make_searcher(hp, cfg.objectives))
        started = time.time()
        with console.live():
            grid = fit_experiment(exp, run, cfg, self.mode)
        stop = time_budget_stop(budget, time.time() - started, n, list(monitor.trials.values()))
        if stop is not None:
            self._say(f"search ended: {stop}")
        elif hp.search_alg.type == "grid" and len(monitor.trials) == n:
            self._say(f"search space exhausted: all {n} grid points ran")
        return SearchOutcome(
            records=monitor.records(),
            checkpoints=best_checkpoints(grid, monitor, self.mode),
            final_params={tid: dict(t.current) for tid, t in monitor.trials.items()},
            stop_reason=stop,
        )

    # ------------------------------------------------------------------ k-fold
    def _kfold(self, run: SweepRun, top: list[TrialRecord], k: int) -> tuple[tuple[KFoldRecord, ...], dict[int, str]]:
        from ray import tune

        from ludwig_hpo.driver.console import ConsoleSink
        from ludwig_hpo.execution.trainable import kfold_trial
        from ludwig_hpo.results.kfold import aggregate_kfold, job_name, job_tags, kfold_jobs, retrained_weights
        from ludwig_hpo.results.live import TrialDescription
        from ludwig_hpo.tracking.sink import MlflowSink

        jobs = kfold_jobs(top, k)
        self._say(
            f"k-fold: re-evaluating the top {len(top)} configuration(s) with {k}-fold "
            f"cross-validation on train+validation and once on the test split ({len(jobs)} runs)"
        )
        metric = f"{self.cfg.hyperopt.output_feature}/{self.cfg.hyperopt.metric}"
        console = ConsoleSink(self.console, metric, self.sign, len(jobs), show_best=False, t0=self.t0)
        monitor = self._monitor(
            run,
            KFOLD,
            lambda tid, config: TrialDescription(
                dict(config["job"]["params"]), job_tags(config["job"]), job_name(config["job"])
            ),
            [
                MlflowSink(run.store, run.parent, config_text=self._trial_config_text, resume=run.resumed),
                console,
            ],
            early_stopping=False,
        )
        with console.live():
            fit_experiment(
                TuneExperiment(KFOLD, kfold_trial, monitor, param_space={"job": tune.grid_search(jobs)}),
                run,
                self.cfg,
                self.mode,
            )
        runs = [(t.tags, t.record(self.sign)) for t in monitor.trials.values()]
        return aggregate_kfold(runs, k, metric), retrained_weights(monitor.trials.values())
