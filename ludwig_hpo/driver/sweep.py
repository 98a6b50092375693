"""The sweep: the one module that wires config, data, Ray Tune + Train, MLflow and the report.

Order matters for users: everything that can be wrong with their input (config, data,
resources, tracking store) is checked before the output folder or any Ray process exists.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from ludwig_hpo import __version__
from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.data import PreparedData, dataset_folder, load_dataframe, prepare
from ludwig_hpo.driver.journal import (
    JOURNAL_FILE,
    JournalSink,
    ended_outside_state,
    read_journal,
    restore_missing_checkpoints,
)
from ludwig_hpo.driver.state import SweepState, fingerprint, write_state
from ludwig_hpo.errors import DataError
from ludwig_hpo.execution.cluster import cluster_plan, existing_cluster, local_plan, scoped_env
from ludwig_hpo.execution.executor import choose_executor
from ludwig_hpo.execution.resources import ResourcePlan
from ludwig_hpo.results import KFoldRecord, SweepResult, TrialRecord
from ludwig_hpo.search.space import index_encoded_choices, param_infos

DEFAULT_OUTPUT_ROOT = Path("hpo_results")
#: Sweeps up to this many trials save Tune's experiment state at every step (see _tune_run).
SAVE_EVERY_STEP_MAX_TRIALS = 200


@dataclass(frozen=True)
class SweepPaths:
    """Where one sweep writes (all under ``root``)."""

    root: Path

    @property
    def tracking_uri(self) -> str:
        return f"sqlite:///{(self.root / 'mlflow.db').resolve()}"

    @property
    def artifacts(self) -> Path:
        return self.root / "mlartifacts"

    @property
    def ray(self) -> Path:
        return self.root / "ray"


def _yaml(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def _output_root(loaded: LoadedSweep, output_root: Path | None) -> Path:
    return output_root or (Path(loaded.config.output_dir) if loaded.config.output_dir else DEFAULT_OUTPUT_ROOT)


def trial_count_text(hp) -> str:
    """``"12 trials (grid of 4 points x num_samples 3)"``: the search's trial count and why."""
    n, g = hp.num_trials, hp.grid_points
    if hp.search_alg.type == "grid":
        return f"{n} trials (every point of the grid once)"
    if g > 1:
        return f"{n} trials (grid of {g} points x num_samples {hp.executor.num_samples})"
    return f"{n} trials"


def choose_output_dir(loaded: LoadedSweep, output_root: Path | None) -> Path:
    """``<root>/<name>``, or ``<name>_1``, ``_2``... if taken. ``root``: the ``--output`` option,
    else the file's ``output_dir`` (relative to the current folder), else ``hpo_results``."""
    root = _output_root(loaded, output_root)
    candidate, n = root / loaded.config.name, 0
    while candidate.exists():
        n += 1
        candidate = root / f"{loaded.config.name}_{n}"
    return candidate


def default_output_dir(loaded: LoadedSweep, output_root: Path | None) -> Path:
    """The latest existing output folder of this sweep name (``<name>``, ``<name>_1``, ...),
    where an unfinished sweep would be resumed; ``<root>/<name>`` when there is none."""
    root = _output_root(loaded, output_root)
    latest, n = root / loaded.config.name, 0
    while (root / f"{loaded.config.name}_{n + 1}").exists():
        n += 1
        latest = root / f"{loaded.config.name}_{n}"
    return latest


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"ludwig_hpo": __version__, "python": platform.python_version()}
    for pkg in ("torch", "ray", "optuna", "mlflow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    return out


def _git_commit(folder: Path) -> str | None:
    """HEAD commit of the git work tree holding ``folder`` (``+dirty`` when it has uncommitted
    changes), or None outside one or without git."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def objectives_tag(objectives: list[tuple[str, str]]) -> str:
    """The parent run's ``objectives`` tag of a multi-objective sweep: a JSON list of
    ``{"metric": <reported key>, "goal": minimize | maximize}`` in the order written."""
    return json.dumps([{"metric": k, "goal": g} for k, g in objectives])


def asha_rungs(grace_period: int, reduction_factor: float, max_t: int) -> tuple[int, ...]:
    """Epochs at which ASHA (one bracket, as Tune's ``AsyncHyperBandScheduler`` builds it)
    compares trials: ``grace_period * reduction_factor**k`` for ``k = 0 .. floor(log_rf(max_t / grace_period))``."""
    import math

    n = int(math.log(max_t / grace_period) / math.log(reduction_factor) + 1)
    return tuple(int(grace_period * reduction_factor**k) for k in range(n))


def _rank_trials(records: tuple[TrialRecord, ...], sign: float) -> list[TrialRecord]:
    scored = [r for r in records if r.objective_best is not None and r.status != "FAILED"]
    return sorted(scored, key=lambda r: sign * r.objective_best)


def _distinct_top(ranked: list[TrialRecord], k: int) -> list[TrialRecord]:
    seen, out = set(), []
    for r in ranked:
        key = json.dumps(r.params, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(r)
        if len(out) == k:
            break
    return out


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
    """

    def __init__(
        self,
        loaded: LoadedSweep,
        console: Console,
        output_root: Path | None = None,
        *,
        resume: SweepState | None = None,
        resume_dir: Path | None = None,
        dataset: Path | None = None,
        address: str | None = None,
    ) -> None:
        self.address = address
        self.loaded = loaded
        self.cfg = loaded.config
        self.console = console
        self.output_root = output_root
        self.resume = resume
        self.resume_dir = resume_dir
        self.dataset = Path(dataset).resolve() if dataset else None
        self.sign = self.cfg.goal_sign
        self.mode = "min" if self.sign > 0 else "max"  # Tune's spelling of the goal
        self.metric = self.cfg.hyperopt.metric_key

    # ------------------------------------------------------------------ checks before anything exists
    def _prepare(self, nodes=None) -> tuple[PreparedData, ResourcePlan]:
        cfg = self.cfg
        t = time.time()
        df = load_dataframe(cfg.dataset.source, self.loaded.base_dir)
        data = prepare(df, cfg, dataset_folder(cfg.dataset.source, self.loaded.base_dir))
        sizes = ", ".join(f"{k} {len(v)}" for k, v in data.splits.items())
        self.console.print(
            f"data: {cfg.dataset.source}: {data.num_rows} rows ({sizes}), prepared in {time.time() - t:.1f}s",
            highlight=False,
        )
        plan = local_plan(cfg) if nodes is None else cluster_plan(cfg, nodes, existing=True)
        self.console.print(f"resources: {plan.describe()}", highlight=False)
        self.executor = choose_executor(
            cfg.backend.trial_executor, use_gpu=plan.use_gpu, pbt=cfg.hyperopt.scheduler.type == "pbt"
        )
        self.console.print(f"trial executor: {self.executor.executor} ({self.executor.reason})", highlight=False)
        return data, plan

    def _open_tracking(self, paths: SweepPaths):
        """The MLflow store: ``tracking.uri``, else ``MLFLOW_TRACKING_URI``, else the embedded
        SQLite store in the output folder (whose artifacts live beside it). It runs in a
        process of its own (:class:`~ludwig_hpo.tracking.process.StoreProcess`), so its writes
        do not hold the driver's interpreter while Tune schedules trials."""
        from ludwig_hpo.tracking.process import StoreProcess

        experiment = self.cfg.tracking.experiment or self.cfg.name
        if self.cfg.tracking.uri:
            self.store_origin = "tracking.uri"
            return StoreProcess(self.cfg.tracking.uri, experiment)
        if os.environ.get("MLFLOW_TRACKING_URI"):
            self.store_origin = "MLFLOW_TRACKING_URI"
            return StoreProcess(os.environ["MLFLOW_TRACKING_URI"], experiment)
        self.store_origin = "embedded"
        return StoreProcess(paths.tracking_uri, experiment, artifact_location=paths.artifacts)

    # ------------------------------------------------------------------ the run
    def run(self) -> SweepResult:
        """Run the search, the k-fold re-evaluation and the report. Driver only.

        With ``address``, the driver connects to that cluster first and plans the trials on
        its nodes (``ray.nodes()``); an infeasible request is an error before anything runs.

        Raises:
            UserError: bad data, resources, cluster address or tracking store (before
                anything is created).
        """
        t0 = time.time()
        # An inherited MLFLOW_RUN_ID (e.g. a sweep started from inside another MLflow run)
        # must not make any library resume that run: the sweep creates its own parent run.
        inherited = os.environ.pop("MLFLOW_RUN_ID", None)
        if inherited:
            self.console.print(
                f"note: MLFLOW_RUN_ID={inherited} is ignored; this sweep logs to its own parent run", highlight=False
            )
        try:
            with existing_cluster(self.address) if self.address else contextlib.nullcontext() as nodes:
                if self.address:
                    self.console.print(f"ray: connected to {self.address} ({len(nodes)} node(s))", highlight=False)
                return self._run(t0, nodes)
        finally:
            if inherited:
                os.environ["MLFLOW_RUN_ID"] = inherited

    def _run(self, t0: float, nodes) -> SweepResult:
        data, plan = self._prepare(nodes)
        if self.resume is not None:
            return self._run_resumed(data, plan, t0)
        paths = SweepPaths(choose_output_dir(self.loaded, self.output_root))
        created = paths.root
        while not created.parent.exists():  # the outermost folder this sweep creates
            created = created.parent
        try:
            paths.root.mkdir(parents=True)
        except OSError as e:
            raise DataError(
                f"cannot create the output folder ({e.strerror or e})",
                source=str(paths.root),
                fix="pass a writable folder with --output",
            ) from None
        store = None
        try:
            store = self._open_tracking(paths)
            (paths.root / "sweep.yaml").write_text(self.loaded.text)
            parent = self._start_parent(store, paths)
            self.state = SweepState(
                fingerprint=fingerprint(self.loaded.text, self.loaded.raw),
                sweep_file=str(Path(self.loaded.path).resolve()),
                parent_run_id=parent,
                tracking_uri=store.uri,
                dataset=str(self.dataset) if self.dataset else None,
            )
            write_state(paths.root, self.state)
        except BaseException:
            if store is not None:
                store.close()
            shutil.rmtree(created, ignore_errors=True)  # nothing half-written
            raise
        origin = "" if self.store_origin == "embedded" else f", from {self.store_origin}"
        self.console.print(
            f"output: {paths.root}\nmlflow: {store.uri} (experiment "
            f"{self.cfg.tracking.experiment or self.cfg.name!r}{origin}, parent run {parent})",
            highlight=False,
        )
        return self._run_tracked(data, plan, store, parent, paths, t0)

    def _run_resumed(self, data: PreparedData, plan: ResourcePlan, t0: float) -> SweepResult:
        from ludwig_hpo.tracking.process import StoreProcess

        paths = SweepPaths(self.resume_dir)
        store = StoreProcess(self.resume.tracking_uri, self.cfg.tracking.experiment or self.cfg.name)
        parent = self.resume.parent_run_id
        try:
            store.reopen_run(parent)
        except BaseException:
            store.close()
            raise
        self.state = self.resume
        self.console.print(
            f"resuming the unfinished sweep in {paths.root} (it stopped during its "
            f"{self.resume.phase} phase)\nmlflow: {store.uri} (parent run {parent})",
            highlight=False,
        )
        return self._run_tracked(data, plan, store, parent, paths, t0)

    def _phase(self, paths: SweepPaths, phase: str) -> None:
        self.state = self.state.at(phase)
        write_state(paths.root, self.state)

    def _run_tracked(
        self, data: PreparedData, plan: ResourcePlan, store, parent: str, paths: SweepPaths, t0: float
    ) -> SweepResult:
        status = "FAILED"
        try:
            result = self._run_ray(data, plan, store, parent, paths, t0)
            status = "FINISHED"
            if self.resume is not None:
                lost = store.close_running_children(
                    parent,
                    {
                        "status": "KILLED",
                        "stopped_by": "interrupted",
                        "note": "lost with the interrupted sweep; ran again under a new trial id",
                    },
                )
                if lost:
                    self.console.print(
                        f"note: {len(lost)} run(s) of trials that started after the sweep's last "
                        f"saved state were lost and ran again: {', '.join(lost)} (marked KILLED)",
                        highlight=False,
                    )
            return result
        except (KeyboardInterrupt, SystemExit):
            status = "KILLED"
            self.console.print(
                f"interrupted: the sweep's MLflow runs are marked KILLED ({store.uri}); "
                f"resume it with: hpo resume {paths.root}",
                highlight=False,
            )
            raise
        finally:
            try:
                store.end_run(parent, status)
            finally:
                store.close()

    def _start_parent(self, store, paths: SweepPaths) -> str:
        cfg = self.cfg
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        tags = {
            "sweep_file": str(self.loaded.path),
            "sweep_file_sha256": hashlib.sha256(self.loaded.text.encode()).hexdigest(),
            "host": platform.node(),
            "output_dir": str(paths.root.resolve()),
            "run_kind": "sweep",
            **{f"version.{k}": v for k, v in _versions().items()},
        }
        if cfg.hyperopt.multi_objective:  # what `hpo report` needs to redraw the Pareto set
            tags["objectives"] = objectives_tag(cfg.objectives)
        commit = _git_commit(Path.cwd())
        if commit:
            tags["git_commit"] = commit
            tags["mlflow.source.git.commit"] = commit.removesuffix("+dirty")
        hp = cfg.hyperopt
        params = {
            "metric": self.metric,
            "goal": hp.goal,
            "num_samples": hp.num_trials,
            "search_alg": f"{hp.search_alg.type}/{hp.search_alg.effective_sampler}",
            "seed": hp.search_alg.seed,
            "scheduler": hp.scheduler.type,
            "epochs": cfg.trainer.epochs,
            "num_workers": cfg.backend.num_workers,
            "kfold.k": cfg.kfold.k if cfg.kfold else None,
            "kfold.top_k": cfg.kfold.top_k if cfg.kfold else None,
        }
        parent = store.start_run(f"{cfg.name}-{stamp}", tags=tags, params=params)
        store.log_artifact(parent, paths.root / "sweep.yaml")
        store.log_text(parent, _yaml(cfg.model_dump(mode="json")), "sweep_resolved.yaml")
        space = {
            p: {**s.model_dump(mode="json"), **{k: v for k, v in dataclasses.asdict(info).items() if k != "path"}}
            for (p, s), info in zip(hp.parameters.items(), param_infos(hp.parameters), strict=True)
        }
        store.log_text(parent, json.dumps(space, indent=2, default=str), "search_space.json")
        return parent

    def _run_ray(
        self, data: PreparedData, plan: ResourcePlan, store, parent: str, paths: SweepPaths, t0: float
    ) -> SweepResult:
        import optuna
        import ray

        from ludwig_hpo.execution.cache import start_cache_actor
        from ludwig_hpo.execution.cluster import local_cluster
        from ludwig_hpo.execution.pool import start_pools
        from ludwig_hpo.execution.trainable import TrialContext
        from ludwig_hpo.search.schedulers import pbt_checkpoints, stop_epochs

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.journal = read_journal(paths.root / JOURNAL_FILE) if self.resume else {}
        cpus, gpus = plan.cluster_cpus, plan.cluster_gpus
        cluster = (
            contextlib.nullcontext()
            if plan.existing_cluster
            else local_cluster(num_cpus=cpus, num_gpus=int(gpus), trial_slots=plan.max_concurrent)
        )
        with cluster:
            choices = index_encoded_choices(self.cfg.hyperopt.parameters)
            data_ref = [ray.put(data)]
            pools = None
            if self.executor.executor == "pooled":
                pools = start_pools(
                    groups=plan.max_concurrent,
                    num_workers=plan.num_workers,
                    cpus_per_worker=plan.cpus_per_worker,
                    use_gpu=plan.use_gpu,
                    data=data_ref,
                )
            ctx = TrialContext(
                raw=self.loaded.raw,
                data=data_ref,
                storage_path=str(paths.ray.resolve() / "train"),
                num_workers=plan.num_workers,
                use_gpu=plan.use_gpu,
                cpus_per_worker=plan.cpus_per_worker,
                gpus_per_worker=plan.gpus_per_worker,
                choices=choices,
                mode=self.mode,
                batch_cache=start_cache_actor(),
                pools=pools,
                replay={tid: e["results"] for tid, e in self.journal.items()},
                checkpoints=pbt_checkpoints(self.cfg.hyperopt),
                stop_epochs=stop_epochs(self.cfg.hyperopt, self.cfg.trainer.epochs),
            )
            records, checkpoints = self._search(ctx, plan, store, parent, paths)
            self._phase(paths, "kfold")
            if "auto" in (self.cfg.trainer.batch_size, self.cfg.trainer.eval_batch_size):
                stats = ray.get(ctx.batch_cache.stats.remote())
                looked = stats["hits"] + stats["misses"]
                self.console.print(
                    f"batch-size cache: {stats['hits']} hits / {looked} lookups "
                    f"({stats['entries']} distinct model shapes tuned)",
                    highlight=False,
                )
                store.log_metrics(
                    parent, {"batch_size_cache_hits": stats["hits"], "batch_size_cache_lookups": looked}, step=0
                )
            ranked = _rank_trials(records, self.sign)
            best = ranked[0] if ranked else None
            if best is not None:
                self._save_best(best, checkpoints.get(best.trial_id), store, parent, paths, data)
            kfold: tuple[KFoldRecord, ...] = ()
            if self.cfg.kfold is not None and ranked:
                top = _distinct_top(ranked, self.cfg.kfold.top_k)
                if self.cfg.hyperopt.scheduler.type == "pbt":
                    # a PBT trial's parameters are a schedule: re-evaluate what each ended with
                    top = [dataclasses.replace(r, params=self._final_params.get(r.trial_id, r.params)) for r in top]
                    self.console.print(
                        "k-fold: PBT trials are re-evaluated with the parameters they ended with", highlight=False
                    )
                kfold = self._kfold(ctx, plan, store, parent, paths, top)
            self._phase(paths, "report")
        result = SweepResult(
            name=self.cfg.name,
            metric=self.metric,
            goal=self.cfg.hyperopt.goal,
            parameters=param_infos(self.cfg.hyperopt.parameters),
            trials=records,
            kfold=kfold,
            best_trial_id=best.trial_id if best else None,
            wall_time_s=time.time() - t0,
            objectives=tuple(k for k, _ in self.cfg.objectives) if self.cfg.hyperopt.multi_objective else (),
            pareto_trial_ids=self._pareto(records),
            output_dir=str(paths.root),
            tracking_uri=store.uri,
        )
        self._finish(result, best, store, parent, paths)
        self._phase(paths, "finished")
        return result

    def _pareto(self, records: tuple[TrialRecord, ...]) -> tuple[str, ...]:
        """The Pareto set of a multi-objective search (empty for one metric), printed."""
        if not self.cfg.hyperopt.multi_objective:
            return ()
        from ludwig_hpo.search.pareto import pareto_trial_ids

        ids = pareto_trial_ids(records, self.cfg.objectives)
        self.console.print(
            f"pareto set ({len(ids)} trial(s) not dominated on "
            f"{', '.join(k for k, _ in self.cfg.objectives)}): {', '.join(ids) or 'none'}",
            highlight=False,
        )
        return ids

    def _tune_run(
        self,
        trainable,
        *,
        name: str,
        ctx,
        plan: ResourcePlan,
        monitor,
        tune_config_kw: dict,
        param_space: dict | None,
        paths: SweepPaths,
    ):
        from ray import tune

        from ludwig_hpo.execution.trainable import trial_resources

        pooled = ctx.pools is not None
        trainable = tune.with_resources(
            tune.with_parameters(trainable, ctx=ctx), trial_resources(plan, "pooled" if pooled else "fresh")
        )
        saved = paths.ray.resolve() / name
        callback = monitor.handle(name)
        monitor.replayed = getattr(self, "journal", {})
        ended: dict[str, dict] = {}
        if self.resume is not None and (saved / "tuner.pkl").is_file():
            # Tune restores the searcher's state, its trials and the monitor's book (the
            # scheduler starts afresh with the restored trials); finished and failed trials
            # stay as they ended, unfinished ones continue from their checkpoints.
            restore_missing_checkpoints(saved)  # deleted after Tune's last save, just before the stop
            tuner = tune.Tuner.restore(
                str(saved),
                trainable,
                resume_unfinished=True,
                resume_errored=False,
                restart_errored=False,
                param_space=param_space,
            )
            # Trials that started and ended after Tune's last save count as ended (journal).
            if name == "search":  # k-fold jobs that ended after the last save just run again
                ended = ended_outside_state(getattr(self, "journal", {}), name, saved)
                monitor.ended_outside_state = ended
        else:
            tuner = self._new_tuner(trainable, name, plan, pooled, callback, tune_config_kw, param_space, paths)
        # How often Tune saves its experiment state (what a resume restores). Every step of its
        # loop for ordinary sweeps, so every trial that started is in it; Tune's adaptive period
        # (>= 10 s, about 5 % of the driver's time) for large ones, whose saved state grows with
        # the trials (~18 kB each) and would cost more than it saves. A user's setting wins.
        period = "0" if self.cfg.hyperopt.num_trials <= SAVE_EVERY_STEP_MAX_TRIALS else "auto"
        from ludwig_hpo.search import algorithms

        algorithms.ENDED_OUTSIDE_STATE.update(ended)
        try:
            with scoped_env({"TUNE_GLOBAL_CHECKPOINT_S": os.environ.get("TUNE_GLOBAL_CHECKPOINT_S", period)}):
                grid = tuner.fit()
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):  # Ctrl-C, or SIGTERM through Ray's handler
                monitor.close_running("interrupted")
            with contextlib.suppress(Exception):  # the interruption or first error is what is shown
                monitor.flush()
            raise
        finally:
            algorithms.ENDED_OUTSIDE_STATE.clear()
        monitor.flush()  # the MLflow sink writes in the background: every run is complete when a phase ends
        return grid

    def _new_tuner(
        self,
        trainable,
        name: str,
        plan: ResourcePlan,
        pooled: bool,
        callback,
        tune_config_kw: dict,
        param_space: dict | None,
        paths: SweepPaths,
    ):
        from ray import tune

        from ludwig_hpo.train.report_keys import CHECKPOINT_OBJECTIVE

        mode = self.mode
        return tune.Tuner(
            trainable,
            param_space=param_space,
            # Pooled trials reuse Tune's trial actors (~6 s each saved): a stopped pooled trial's
            # tune.report raises SystemExit in its thread, which only tells the warm group to stop
            # and returns, so the actor resets within Tune's 2 s. Fresh trials keep it off: a
            # stopped trial's thread is inside TorchTrainer.fit(), and a reused actor kept that
            # Train controller (and its CPUs) alive, so the sweep hung.
            tune_config=tune.TuneConfig(
                max_concurrent_trials=plan.max_concurrent, reuse_actors=pooled, **tune_config_kw
            ),
            run_config=tune.RunConfig(
                name=name,
                storage_path=str(paths.ray.resolve()),
                verbose=0,
                callbacks=[callback],
                failure_config=tune.FailureConfig(max_failures=self.cfg.hyperopt.executor.max_failures),
                # Trials checkpoint through Tune (1-worker and pooled ones): keep the one whose
                # best weights are best, which is the latest (a restored or retried trial
                # continues from it).
                # PBT keeps all: a trial may clone another's checkpoint after it was superseded.
                checkpoint_config=tune.CheckpointConfig(
                    num_to_keep=None if self.cfg.hyperopt.scheduler.type == "pbt" else 1,
                    checkpoint_score_attribute=CHECKPOINT_OBJECTIVE,
                    checkpoint_score_order=mode,
                ),
            ),
        )

    def _trial_config_text(self, params: dict[str, Any]) -> str:
        """The full resolved config of a trial (defaults filled in), as YAML."""
        from ludwig_hpo.config.loader import resolve_trial_config

        return _yaml(resolve_trial_config(self.loaded.raw, params).model_dump(mode="json"))

    def _search(
        self, ctx, plan: ResourcePlan, store, parent: str, paths: SweepPaths
    ) -> tuple[tuple[TrialRecord, ...], dict[str, str]]:
        from ludwig_hpo.driver.console import ConsoleSink
        from ludwig_hpo.driver.monitor import SweepMonitor
        from ludwig_hpo.execution.trainable import search_trial
        from ludwig_hpo.results.live import TrialDescription
        from ludwig_hpo.search.algorithms import make_searcher
        from ludwig_hpo.search.schedulers import make_scheduler
        from ludwig_hpo.search.space import decode
        from ludwig_hpo.tracking.sink import MlflowSink
        from ludwig_hpo.train.report_keys import CHECKPOINT_OBJECTIVE, OBJECTIVE

        hp = self.cfg.hyperopt
        n = hp.num_trials
        budget = hp.executor.time_budget_s
        self.console.print(
            f"search: {trial_count_text(hp)}, {hp.search_alg.effective_sampler.upper()} "
            f"(seed {hp.search_alg.seed}), "
            f"scheduler {hp.scheduler.type}, {self.cfg.trainer.epochs} epochs max, "
            f"optimizing {', '.join(f'{k} ({g})' for k, g in self.cfg.objectives)}; time budget: "
            f"{f'{budget:g}s' if budget else 'none'}",
            highlight=False,
        )
        rungs = ()
        if hp.scheduler.type in ("async_hyperband", "asha"):
            rungs = asha_rungs(hp.scheduler.grace_period, hp.scheduler.reduction_factor, self.cfg.trainer.epochs)
        monitor = SweepMonitor(
            epochs=self.cfg.trainer.epochs,
            goal_sign=self.sign,
            describe=lambda tid, config: TrialDescription(
                decode(hp.parameters, config), {"phase": "search"}, f"trial_{tid}"
            ),
            sinks=[
                JournalSink(paths.root / JOURNAL_FILE),
                MlflowSink(
                    store,
                    parent,
                    run_kind="trial",
                    config_text=self._trial_config_text,
                    rungs=rungs,
                    resume=self.resume is not None,
                ),
                ConsoleSink(self.console, self.metric, self.sign, n),
            ],
        )
        kw: dict[str, Any] = {"scheduler": make_scheduler(hp, self.cfg.trainer.epochs), "num_samples": n}
        param_space = None
        if hp.scheduler.type == "pbt":
            # PBT runs only with Tune's own random variant generator (it explores by itself).
            from ray.tune.search import BasicVariantGenerator

            from ludwig_hpo.search.space import encode_value, to_tune

            param_space = {p: to_tune(s) for p, s in hp.parameters.items()}
            points = [
                {p: encode_value(hp.parameters[p], v) for p, v in point.items()}
                for point in hp.search_alg.points_to_evaluate
            ]
            kw["search_alg"] = BasicVariantGenerator(points_to_evaluate=points or None, random_state=hp.search_alg.seed)
            kw["num_samples"] = hp.executor.num_samples  # Tune multiplies by the grid itself
        else:
            kw["search_alg"] = make_searcher(hp, self.cfg.objectives)
        if budget:
            kw["time_budget_s"] = budget
        grid = self._tune_run(
            search_trial,
            name="search",
            ctx=ctx,
            plan=plan,
            monitor=monitor,
            tune_config_kw=kw,
            param_space=param_space,
            paths=paths,
        )
        if hp.search_alg.type == "grid" and len(monitor.trials) == n:
            self.console.print(f"search space exhausted: all {n} grid points ran", highlight=False)
        self._final_params = {tid: dict(t.current) for tid, t in monitor.trials.items()}
        # Each trial's checkpoint holding its best weights: reported by Train (fresh multi-worker
        # trials) or kept by Tune.
        checkpoints = {tid: t.checkpoint for tid, t in monitor.trials.items() if t.checkpoint}
        mode = self.mode
        for r in grid:
            tid = (r.metrics or {}).get("trial_id")
            if tid and tid not in checkpoints and r.best_checkpoints:
                try:
                    best = r.get_best_checkpoint(CHECKPOINT_OBJECTIVE, mode)
                except RuntimeError:  # checkpoints of a sweep started before they carried the key
                    best = r.get_best_checkpoint(OBJECTIVE, mode)
                if best is not None:
                    checkpoints[tid] = best.path
        return monitor.records(), checkpoints

    def _save_best(
        self, best: TrialRecord, checkpoint: str | None, store, parent: str, paths: SweepPaths, data: PreparedData
    ) -> None:
        """``best_model/``: the best trial's best weights (``model.pt`` of its checkpoint; see
        :meth:`_note_exported_epoch`), the trial's config and the
        preprocessing fitted on the training split (``preprocessing.json``), so the model can be
        rebuilt with :func:`ludwig_hpo.model.build_model` and fed new rows."""
        import yaml

        from ludwig_hpo.config.paths import apply_params

        out = paths.root / "best_model"
        out.mkdir(exist_ok=True)
        (out / "config.yaml").write_text(yaml.safe_dump(apply_params(self.loaded.raw, best.params), sort_keys=False))
        meta = {name: dataclasses.asdict(m) for name, m in data.meta.items()}
        (out / "preprocessing.json").write_text(json.dumps(meta, indent=1, default=str))
        if not (checkpoint and (Path(checkpoint) / "model.pt").exists()):
            # the trial's own Train storage, or its Tune folder, holds its kept checkpoints
            kept = sorted(paths.ray.glob(f"train/{best.trial_id}/checkpoint_*/model.pt")) or sorted(
                paths.ray.glob(f"search/*_{best.trial_id}_*/checkpoint_*/model.pt")
            )
            checkpoint = str(kept[-1].parent) if kept else None
        if checkpoint:
            shutil.copy2(Path(checkpoint) / "model.pt", out / "model.pt")
            self._note_exported_epoch(best, out / "model.pt", store, parent)
        else:
            self.console.print(
                f"warning: no checkpoint of the best trial {best.trial_id} was found; "
                f"best_model/ holds its config only",
                highlight=False,
            )
        store.log_artifact(parent, out, "best_model")
        if checkpoint:
            self._log_best_model(best, out / "model.pt", store, parent, data)

    def _note_exported_epoch(self, best: TrialRecord, weights: Path, store, parent: str) -> None:
        """Tag the parent run with the epoch whose weights ``best_model/model.pt`` holds
        (``best_model.epoch``), and say so when it is not the trial's best epoch: a trial that
        the scheduler stopped, or a sweep's time budget ended, between a better epoch and its
        next checkpoint exports the best weights it wrote."""
        import torch

        exported = torch.load(weights, map_location="cpu", weights_only=True).get("epoch")
        best_epoch = next((h.epoch for h in best.history if h.objective == best.objective_best), None)
        store.set_tags(parent, {"best_model.epoch": exported})
        if exported is not None and best_epoch is not None and exported != best_epoch:
            self.console.print(
                f"note: best_model/ holds epoch {exported} of trial {best.trial_id}, whose best "
                f"epoch {best_epoch} ended before its next checkpoint",
                highlight=False,
            )

    def _log_best_model(self, best: TrialRecord, weights: Path, store, parent: str, data: PreparedData) -> None:
        """The best trial's model as an MLflow PyTorch model (``model/`` of the parent run),
        with five test rows as input example; registered when ``tracking.register_model`` is set."""
        import torch

        from ludwig_hpo.config.loader import resolve_trial_config
        from ludwig_hpo.model import build_model
        from ludwig_hpo.model.serving import FlatInputModel, flat_inputs
        from ludwig_hpo.tracking.models import log_pytorch_model

        cfg = resolve_trial_config(self.loaded.raw, best.params)
        model = build_model(cfg, data.meta)
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True)["state_dict"])
        flat = FlatInputModel(model, data.meta, [f.name for f in cfg.output_features])
        example = flat_inputs(data.inputs, data.splits["test"][:5], model.input_names, data.meta)
        name = self.cfg.tracking.register_model
        logged = log_pytorch_model(store, parent, flat, example, register_as=name)
        tags = {"best_model_uri": logged.uri}
        if logged.version is not None:
            tags["registered_model"] = f"{name}/{logged.version}"
            self.console.print(f"model registry: {name} version {logged.version}", highlight=False)
        store.set_tags(parent, tags)

    def _kfold(
        self, ctx, plan: ResourcePlan, store, parent: str, paths: SweepPaths, top: list[TrialRecord]
    ) -> tuple[KFoldRecord, ...]:
        from ray import tune

        from ludwig_hpo.driver.console import ConsoleSink
        from ludwig_hpo.driver.monitor import SweepMonitor
        from ludwig_hpo.execution.trainable import kfold_trial
        from ludwig_hpo.results.kfold import aggregate_kfold, job_name, job_tags, kfold_jobs
        from ludwig_hpo.results.live import TrialDescription
        from ludwig_hpo.tracking.sink import MlflowSink

        k = self.cfg.kfold.k
        jobs = kfold_jobs(top, k)
        self.console.print(
            f"k-fold: re-evaluating the top {len(top)} configuration(s) with {k}-fold "
            f"cross-validation on train+validation and once on the test split ({len(jobs)} runs)",
            highlight=False,
        )
        metric = f"{self.cfg.hyperopt.output_feature}/{self.cfg.hyperopt.metric}"
        monitor = SweepMonitor(
            epochs=self.cfg.trainer.epochs,
            goal_sign=self.sign,
            describe=lambda tid, config: TrialDescription(
                dict(config["job"]["params"]), job_tags(config["job"]), job_name(config["job"])
            ),
            sinks=[
                JournalSink(paths.root / JOURNAL_FILE, "kfold"),
                MlflowSink(store, parent, config_text=self._trial_config_text, resume=self.resume is not None),
                ConsoleSink(self.console, metric, self.sign, len(jobs), show_best=False),
            ],
            early_stopping=False,
        )
        self._tune_run(
            kfold_trial,
            name="kfold",
            ctx=ctx,
            plan=plan,
            monitor=monitor,
            tune_config_kw={},
            param_space={"job": tune.grid_search(jobs)},
            paths=paths,
        )
        runs = [(t.tags, t.record(self.sign)) for t in monitor.trials.values()]
        return aggregate_kfold(runs, k, metric)

    def _finish(self, result: SweepResult, best: TrialRecord | None, store, parent: str, paths: SweepPaths) -> None:
        from ludwig_hpo.results.io import write_result

        write_result(result, paths.root / "results.json")
        store.log_artifact(parent, paths.root / "results.json")
        if best is not None:
            store.set_tags(parent, {"best_trial_id": best.trial_id})
            store.log_params(parent, {f"best.{k}": v for k, v in best.params.items()})
            store.log_metrics(parent, {f"best/{self.metric}": best.objective_best}, step=0)
            store.log_text(
                parent,
                json.dumps(
                    {
                        "trial_id": best.trial_id,
                        "metric": self.metric,
                        "goal": self.cfg.hyperopt.goal,
                        "value": best.objective_best,
                        "params": best.params,
                    },
                    indent=2,
                    default=str,
                ),
                "best_trial.json",
            )
        if self.cfg.report.enabled:
            from dashboards import build_report

            report = build_report(result, paths.root)
            store.log_artifact(parent, report)
            hiplot = paths.root / "hiplot.html"
            if hiplot.exists():
                store.log_artifact(parent, hiplot)
