"""What ``hpo sweep`` and ``hpo train`` print when they end: trial counts in the status
vocabulary, the best trial, the k-fold scores, and where the results are (only paths that
exist); and the batch-size cache's hits when the search ends. Driver process only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.driver.console import say
from ludwig_hpo.driver.holdout import on_test_split
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.results import SweepResult, TrialRecord
from ludwig_hpo.results.records import STATUS_LABELS
from ludwig_hpo.tracking import layout

if TYPE_CHECKING:
    from ludwig_hpo.driver.sweep_run import SweepRun


def batch_cache_stats(run: SweepRun, cfg: SweepConfig, console: Console) -> None:
    """Print the batch-size cache's hits and problems and log the hits and lookups on the
    parent run (step 0), when a batch size of ``cfg`` is ``auto``; nothing otherwise. Driver
    only, after the search (the cache is a Ray actor of the sweep's cluster).

    Raises:
        Exception: Ray's or the store's error.
    """
    import ray

    if "auto" not in (cfg.trainer.batch_size, cfg.trainer.eval_batch_size):
        return
    stats = ray.get(run.ctx.batch_cache.stats.remote())
    looked = stats["hits"] + stats["misses"]
    say(
        console,
        f"batch-size cache: {stats['hits']} hits / {looked} lookups ({stats['persisted_hits']} from earlier "
        f"sweeps; {stats['entries']} distinct model shapes tuned)",
    )
    for line in ray.get(run.ctx.batch_cache.problems.remote()):
        say(console, f"warning: {line}")
    counts = {layout.BATCH_SIZE_CACHE_HITS_METRIC: stats["hits"], layout.BATCH_SIZE_CACHE_LOOKUPS_METRIC: looked}
    run.store.log_metrics(run.parent, counts, step=0)


def failure_summary(trials: Sequence[TrialRecord]) -> str:
    """``"4 of 5 trial(s) failed: 3x TrialError: ...; 1x ..."``: the distinct one-line errors,
    most frequent first (or that the trials ended without reporting a metric)."""
    errors = Counter(t.error or "no error message" for t in trials if t.label == "failed")
    if not errors:
        return f"{len(trials)} trial(s) ended without reporting a metric"
    distinct = "; ".join(f"{n}x {e}" for e, n in errors.most_common())
    return f"{sum(errors.values())} of {len(trials)} trial(s) failed: {distinct}"


def _where(console: Console, result: SweepResult, first: tuple[str, Path]) -> None:
    """The closing lines: ``first`` (label, path) when that path exists, the output folder and
    the tracking store (with the ``hpo ui`` command when the store is the folder's embedded one)."""
    paths = SweepPaths(Path(result.output_dir))
    if first[1].exists():
        say(console, f"{first[0]:<8} {first[1]}")
    say(console, f"results: {paths.root}")
    hint = f"  (hpo ui {paths.root})" if paths.mlflow_db.is_file() else ""
    say(console, f"mlflow:  {result.tracking_uri}{hint}")


def _test_lines(console: Console, result: SweepResult) -> None:
    """The best trial's scores on the test split: the sweep's metric first, then the others."""
    if not result.test_scores:
        return
    key = on_test_split(result.metric)
    first = f"{key} = {result.test_scores[key]:.6g}" if key in result.test_scores else "scores"
    sel = result.selection
    if sel is not None and sel.retrained:  # kfold.select: cv
        which = f"final model: config #{sel.config_rank} (trial {sel.trial_id}) retrained on train+validation"
    else:
        which = f"best weights of trial {result.best_trial_id}"
    say(console, f"test split ({which}): {first}")
    for k, v in sorted(result.test_scores.items()):
        if k != key:
            say(console, f"  {k}: {v:.6g}")
    if sel is not None and sel.retrained and key in sel.search_test_scores:
        say(console, f"  (the search's best trial {result.best_trial_id}: {key} = {sel.search_test_scores[key]:.6g})")


def print_sweep_summary(console: Console, result: SweepResult) -> bool:
    """What ``hpo sweep`` prints when the sweep ends: trial counts by state (completed, stopped
    early, failed, interrupted), why the search stopped early when it did, the best trial and
    its parameters and its scores on the test split, the Pareto set, each k-fold configuration's
    mean and test score, and where the report (when written), results and runs are. Driver process.

    Returns:
        False when no trial produced a result (only the counts are printed; the caller
        reports the failure, see :func:`failure_summary`).
    """
    best = next((t for t in result.trials if t.trial_id == result.best_trial_id), None)
    console.print()
    labels = Counter(t.label for t in result.trials)
    # the ways a trial ends, each always counted but interruption, which is counted when it happened
    ends = [w for w in STATUS_LABELS if w != "running" and (labels[w] or w != "interrupted")]
    counts = ", ".join(f"{labels[w]} {w}" for w in ends)
    reason = f"; {result.stop_reason}" if result.stop_reason else ""
    say(console, f"done in {result.wall_time_s or 0:.0f}s: {counts}{reason}")
    if best is None or best.objective_best is None:
        return False
    say(console, f"best trial {best.trial_id}: {result.metric} = {best.objective_best:.6g}")
    if result.pareto_trial_ids:
        say(console, f"pareto set on {', '.join(result.objectives)}: {', '.join(result.pareto_trial_ids)}")
    for k, v in best.params.items():
        say(console, f"  {k}: {v}")
    _test_lines(console, result)
    for kf in result.kfold:
        mean = sum(kf.fold_scores) / len(kf.fold_scores) if kf.fold_scores else float("nan")
        test = f"{kf.test_score:.6g}" if kf.test_score is not None else "failed"
        folds = len(kf.fold_scores) + kf.failed_folds
        failed = f" ({kf.failed_folds} failed)" if kf.failed_folds else ""
        say(
            console,
            f"config #{kf.config_rank} ({kf.trial_id}): mean {kf.metric} over {len(kf.fold_scores)}/{folds} "
            f"folds{failed} = {mean:.6g}, test = {test}",
        )
    _where(console, result, ("report:", SweepPaths(Path(result.output_dir)).report))
    return True


def print_train_summary(console: Console, result: SweepResult, cfg: SweepConfig) -> str | None:
    """What ``hpo train`` prints when its run ends: epochs, workers, strategy and precision,
    the metric's best (with its epoch) and last values, the last epoch's validation metrics,
    the scores on the test split, and where the model, results and run are. Driver process.

    Returns:
        None, or why the run produced no model (``"training failed[: <error>]"``; nothing is
        printed then).
    """
    run = result.trials[0] if result.trials else None
    if run is None or run.label == "failed" or run.objective_best is None or run.objective_last is None:
        return f"training failed{f': {run.error}' if run and run.error else ''}"
    last = run.history[-1] if run.history else None
    best_epoch = min(run.history, key=lambda e: cfg.goal_sign * e.objective).epoch if run.history else None
    console.print()
    say(
        console,
        f"done in {result.wall_time_s or 0:.0f}s: {len(run.history)} epochs, "
        f"{cfg.backend.num_workers} worker(s), {cfg.backend.strategy}, {cfg.trainer.precision}",
    )
    say(console, f"{result.metric}: best {run.objective_best:.6g} (epoch {best_epoch}), last {run.objective_last:.6g}")
    if last is not None:
        shown = {k: v for k, v in last.metrics.items() if k.startswith(("validation/", "train/combined"))}
        for k, v in sorted(shown.items()):
            say(console, f"  {k}: {v:.6g}")
    _test_lines(console, result)
    _where(console, result, ("model:", SweepPaths(Path(result.output_dir)).best_model))
    return None
