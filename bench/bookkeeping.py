"""What does the sweep driver cost per trial, without any training? A 1,000-trial sweep of a
trivial trainable through the driver's own pieces: ``OptunaSearch`` over the search space of
``sweeps/breast_cancer.yaml`` (TPE, :func:`ludwig_hpo.search.algorithms.make_searcher`), its ASHA
scheduler, Ray Tune with ``max_concurrent_trials`` > 1 on a local cluster
(:func:`ludwig_hpo.execution.cluster.local_cluster`), :class:`ludwig_hpo.driver.monitor.SweepMonitor` logging every
trial as an MLflow child run into an embedded SQLite store, and at the end the results file and
the report's trials table.

Each trial reports ``--epochs`` epochs of a closed-form objective of its parameters (plus the
per-epoch metric keys a real trial reports) and returns; its actor is reused (the trainable
holds no Train job), so what is measured is bookkeeping, not process start-up (see
``bench/trial_overhead.py`` for that).

The MLflow store runs in a process of its own, as in a sweep
(:class:`ludwig_hpo.tracking.process.StoreProcess`; ``--in-process-store`` runs it in the driver,
as before).

Prints the wall seconds per trial of the whole driver (``tuner.fit`` plus results file and
table), the driver process's CPU seconds per trial, the seconds inside the Optuna searcher
(suggest + tell) and inside the MLflow sink per trial (on Tune's event loop: queueing its writes and
waiting for them at the end), the seconds of those writes on the sink's background thread (with
the store in its own process: the wait for its answers), the driver's peak resident memory; and
what bounds the wall time on a small machine: the CPU seconds per trial of every process on
the machine (``/proc/stat``, Linux) and how many trial actor processes Ray started.

Last line: ``driver_s_per_trial=<x> peak_rss_mb=<y>``; the figures also go to
``bench/results/bookkeeping.json`` (see ``bench/_results.py``). Run: ``python bench/bookkeeping.py``
(``--trials``, ``--concurrency``, ``--profile`` for the driver's cProfile top functions).
"""

from __future__ import annotations

import cProfile
import math
import os
import pstats
import resource
import tempfile
import time
from pathlib import Path

from ray.tune.search.optuna import OptunaSearch
from rich.console import Console

from ludwig_hpo.config import load_sweep
from ludwig_hpo.driver.monitor import SweepMonitor
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.results import SweepResult
from ludwig_hpo.results.live import TrialDescription
from ludwig_hpo.search.algorithms import make_searcher
from ludwig_hpo.search.schedulers import make_scheduler
from ludwig_hpo.search.space import decode, param_infos
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.resolve import sqlite_uri
from ludwig_hpo.tracking.sink import MlflowSink
from ludwig_hpo.train.report_keys import OBJECTIVE

from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]


def trivial_trial(config: dict) -> None:
    """A trial that trains nothing: ``epochs`` reports of a closed-form objective (minimum at
    learning rate 1e-3, 2 layers, width 64, no dropout), with the keys a real trial reports."""
    from ray import tune

    lr = config["trainer.learning_rate"]
    base = (
        (math.log10(lr) + 3) ** 2
        + 0.1 * abs(config["combiner.num_fc_layers"] - 2)
        + 0.01 * abs(math.log2(config["combiner.output_size"]) - 6)
        + config["combiner.dropout"]
    )
    for epoch in range(1, config["epochs"] + 1):
        value = base + 1.0 / epoch
        tune.report(
            {
                "epoch": epoch,
                OBJECTIVE: value,
                "validation/malignant/loss": value,
                "validation/malignant/accuracy": 1 - value / 10,
                "validation/malignant/roc_auc": 0.9,
                "validation/combined/loss": value,
                "train/combined/running_loss": value,
                "batch_size": 32,
                "global_batch_size": 32,
                "eval_batch_size": 512,
                "world_size": 1,
                "train_time_s": 0.01 * epoch,
                "batch_size_tuning_s": 0.0,
                "samples_per_s": 1e5,
            }
        )


class Timed:
    """Wraps an object; seconds spent in its listed methods accumulate in ``seconds``."""

    def __init__(self, inner, methods: tuple[str, ...]) -> None:
        self._inner, self.seconds = inner, 0.0
        for m in methods:
            setattr(self, m, self._timed(getattr(inner, m)))

    def _timed(self, fn):
        def call(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.seconds += time.perf_counter() - t

        return call

    def __getattr__(self, name):
        return getattr(self._inner, name)


class TimedSearchCalls:
    """Mixin over a Tune searcher class: its suggest / result / complete calls add up in
    ``seconds`` (driver). :func:`timed_searcher` puts it under a built searcher."""

    seconds: float

    def suggest(self, trial_id):
        t = time.perf_counter()
        try:
            return super().suggest(trial_id)
        finally:
            self.seconds += time.perf_counter() - t

    def on_trial_result(self, trial_id, result):
        t = time.perf_counter()
        try:
            return super().on_trial_result(trial_id, result)
        finally:
            self.seconds += time.perf_counter() - t

    def on_trial_complete(self, trial_id, result=None, error=False):
        t = time.perf_counter()
        try:
            return super().on_trial_complete(trial_id, result, error)
        finally:
            self.seconds += time.perf_counter() - t


def timed_searcher(searcher: OptunaSearch) -> OptunaSearch:
    """The same searcher object, its calls timed from now on: its class becomes a subclass of
    its own class under :class:`TimedSearchCalls`, so the sweep's searcher behaves as in a sweep
    (its state, study and seed kept)."""
    cls = type(searcher)
    searcher.__class__ = type(f"Timed{cls.__name__}", (TimedSearchCalls, cls), {})
    searcher.seconds = 0.0
    return searcher


def machine_busy_s() -> float | None:
    """CPU seconds all processes of this machine have used since boot (Linux), else None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def trial_actors_started() -> int | None:
    """How many trial actors (Tune's function trainables) Ray started in this cluster, live or
    dead; None when its state API does not answer."""
    try:
        from ray.util.state import list_actors

        return len(
            list_actors(filters=[("class_name", "=", "ImplicitFunc")], limit=10_000, raise_on_missing_output=False)
        )
    except Exception:  # noqa: BLE001 - a figure that explains, not one that is measured
        return None


def cpu_s() -> float:
    """CPU seconds (user + system) of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=4, help="max_concurrent_trials (default 4)")
    ap.add_argument("--epochs", type=int, default=3, help="reports per trial (default 3)")
    ap.add_argument("--profile", action="store_true", help="print the driver's top functions by cumulative time")
    ap.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="folder of the sweep's MLflow store, Tune state and results file (default: a new temp folder, kept)",
    )
    ap.add_argument(
        "--in-process-store",
        action="store_true",
        help="run the MLflow store in the driver's process (the sweep runs it in a process of its own)",
    )
    ap.add_argument(
        "--without-mlflow",
        action="store_true",
        help="leave the MLflow sink out (to measure its share of the driver's time)",
    )
    args = ap.parse_args()
    run = BenchRun("bookkeeping", args)

    import optuna
    from ray import tune

    from dashboards.table import trials_table
    from ludwig_hpo.execution.cluster import local_cluster
    from ludwig_hpo.results.io import write_result
    from ludwig_hpo.tracking.mlflow_store import MlflowStore
    from ludwig_hpo.tracking.process import StoreProcess

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    loaded = load_sweep(ROOT / "sweeps" / "breast_cancer.yaml")
    hp = loaded.config.hyperopt
    out = args.output_dir or Path(tempfile.mkdtemp(prefix="hpo-bench-bookkeeping-"))
    out.mkdir(parents=True, exist_ok=True)
    paths = SweepPaths(out)
    store = (MlflowStore if args.in_process_store else StoreProcess)(sqlite_uri(paths.root), "bookkeeping")
    parent = store.start_run("bookkeeping", params={"trials": args.trials})
    # the sink's time on Tune's event loop (queueing its writes, and waiting for them at the end),
    # and the store's time on the sink's background thread
    writes = Timed(store, ("start_run", "log_params", "log_batch", "log_metrics", "set_tags", "log_text", "end_run"))
    sink = Timed(MlflowSink(writes, parent), ("trial_started", "trial_result", "trial_ended", "flush"))
    monitor = SweepMonitor(
        epochs=args.epochs,
        goal_sign=1.0,
        sinks=[] if args.without_mlflow else [sink],
        describe=lambda tid, config: TrialDescription(
            decode(hp.parameters, {k: v for k, v in config.items() if k != "epochs"}),
            {layout.PHASE_TAG: layout.PHASE_SEARCH},
            layout.trial_run_name(tid),
        ),
    )
    searcher = timed_searcher(make_searcher(hp))
    console = Console()
    profiler = cProfile.Profile() if args.profile else None
    with local_cluster(num_cpus=2, num_gpus=0, trial_slots=args.concurrency):
        tuner = tune.Tuner(
            tune.with_resources(trivial_trial, {"cpu": 0, "trial_slot": 1}),
            param_space={"epochs": args.epochs},
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                scheduler=make_scheduler(hp, args.epochs),
                num_samples=args.trials,
                max_concurrent_trials=args.concurrency,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name="bookkeeping",
                storage_path=str(paths.ray),
                verbose=0,
                callbacks=[monitor],
                failure_config=tune.FailureConfig(max_failures=0),
            ),
        )
        console.print(
            f"{args.trials} trials, {args.concurrency} at a time, {args.epochs} reports each; output {out}",
            highlight=False,
        )
        t0, c0, m0 = time.perf_counter(), cpu_s(), machine_busy_s()
        if profiler:
            profiler.enable()
        tuner.fit()
        monitor.flush()  # as the sweep does when a phase ends: every trial's run written
        result = SweepResult(
            name="bookkeeping",
            metric=OBJECTIVE,
            goal="minimize",
            parameters=param_infos(hp.parameters),
            trials=monitor.records(),
            kfold=(),
            best_trial_id=None,
            wall_time_s=time.perf_counter() - t0,
            output_dir=str(out),
            tracking_uri=store.uri,
        )
        write_result(result, paths.results)
        table = trials_table(result)
        if profiler:
            profiler.disable()
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
        machine = None if m0 is None else machine_busy_s() - m0
        actors = trial_actors_started()
    store.end_run(parent, "FINISHED")
    if isinstance(store, StoreProcess):
        store.close()
    n = len(result.trials)
    done = sum(r.status in ("FINISHED", "KILLED") for r in result.trials)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{n} trials recorded ({done} finished or stopped by ASHA), table {table.shape[0]} rows x "
        f"{table.shape[1]} columns"
    )
    print(
        f"driver wall {wall:.1f}s = {wall / n:.4f}s per trial; driver CPU {cpu / n:.4f}s per trial; "
        f"inside OptunaSearch {searcher.seconds / n:.4f}s per trial; inside the MLflow sink "
        f"{sink.seconds / n:.4f}s per trial (its writes, on a background thread: {writes.seconds / n:.4f}s per "
        f"trial); peak RSS of the driver {peak_mb:.0f} MB"
    )
    if machine is not None:
        print(
            f"every process on this machine: {machine / n:.4f} CPU s per trial ({os.cpu_count()} cores); "
            f"trial actor processes started: {actors if actors is not None else 'unknown'}"
        )
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    run.finish(
        {"driver_s_per_trial": Figure(wall / n, ".4f"), "peak_rss_mb": Figure(peak_mb, ".0f")},
        {
            "trials_recorded": n,
            "trials_finished_or_stopped": done,
            "driver_wall_s": wall,
            "driver_cpu_s_per_trial": cpu / n,
            "optuna_search_s_per_trial": searcher.seconds / n,
            "mlflow_sink_s_per_trial": sink.seconds / n,
            "mlflow_writes_s_per_trial": writes.seconds / n,
            "machine_cpu_s_per_trial": None if machine is None else machine / n,
            "trial_actors_started": actors,
            "output_dir": str(out),
        },
    )


if __name__ == "__main__":
    main()
