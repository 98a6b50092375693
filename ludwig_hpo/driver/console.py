"""What a person sees while a sweep runs (one line per trial event with the best value so far,
instead of Ray's log lines) and when it ends (the summary of ``hpo sweep`` and ``hpo train``).
Driver only."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.results import SweepResult, TrialRecord
from ludwig_hpo.results.live import LiveTrial


def fmt(v: Any) -> str:
    """Short display of a parameter or metric value."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
            return f"{v:.3g}"
        return f"{v:.4g}"
    return str(v)


def fmt_params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={fmt(v)}" for k, v in params.items())


class ConsoleSink:
    """Prints trial events (started / epoch-less progress / finished / stopped / failed) with
    counts, the best value so far and elapsed time.

    Args:
        console: where to print.
        metric: display name of the optimized metric.
        goal_sign: +1 when smaller is better.
        total: number of trials planned (for ``3/10`` counts).
        show_best: print the best value so far after each trial (the search), or not (k-fold).
    """

    def __init__(self, console: Console, metric: str, goal_sign: float, total: int, show_best: bool = True) -> None:
        self.console = console
        self.metric = metric
        self.sign = goal_sign
        self.total = total
        self.show_best = show_best
        self.t0 = time.time()
        self.counts = {"RUNNING": 0, "FINISHED": 0, "KILLED": 0, "FAILED": 0}
        self.best: tuple[float, LiveTrial] | None = None

    def _stamp(self) -> str:
        s = int(time.time() - self.t0)
        return f"[dim]{s // 60:3d}:{s % 60:02d}[/dim]"

    def trials_restored(self, trials: list[LiveTrial]) -> None:
        """A resumed sweep: count the trials that ended before the interruption."""
        for t in trials:
            if t.status in ("FINISHED", "KILLED", "FAILED"):
                self.counts[t.status] += 1
                b = t.best(self.sign)
                if b is not None and (self.best is None or self.sign * b < self.sign * self.best[0]):
                    self.best = (b, t)
        c = self.counts
        self.console.print(
            f"      kept from before: {c['FINISHED']} finished, {c['KILLED']} stopped, "
            f"{c['FAILED']} failed of {self.total}",
            highlight=False,
        )

    def trial_retried(self, t: LiveTrial) -> None:
        self.counts["RUNNING"] -= 1  # it starts again
        self.console.print(
            f"{self._stamp()} {escape(t.name)} [red]failed[/red], running it again "
            f"(retry {t.retries}): {escape(t.error or '')}",
            highlight=False,
            markup=True,
        )

    def trial_started(self, t: LiveTrial) -> None:
        self.counts["RUNNING"] += 1
        n = sum(self.counts.values())
        self.console.print(
            f"{self._stamp()} {escape(t.name)} started ({n}/{self.total}) {escape(fmt_params(t.params))}",
            highlight=False,
            markup=True,
        )

    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None:
        v = t.history[-1].objective
        if math.isfinite(v) and (self.best is None or self.sign * v < self.sign * self.best[0]):
            self.best = (v, t)

    def trial_ended(self, t: LiveTrial) -> None:
        self.counts["RUNNING"] -= 1
        self.counts[t.status] += 1
        word = {
            "FINISHED": "[green]finished[/green]",
            "KILLED": "[yellow]stopped early[/yellow]",
            "FAILED": "[red]failed[/red]",
        }[t.status]
        if t.stopped_by:
            word += f" ({t.stopped_by})"
        last = t.history[-1] if t.history else None
        detail = f"{self.metric}={fmt(last.objective)} at epoch {last.epoch}" if last else "no epoch completed"
        best_of_trial = t.best(self.sign)
        if last and best_of_trial is not None and best_of_trial != last.objective:
            detail += f" (best {fmt(best_of_trial)})"
        if t.error:
            detail += f": {escape(t.error)}"
        c = self.counts
        best = (
            f"best {fmt(self.best[0])} ({self.best[1].trial_id}: {escape(fmt_params(self.best[1].params))})"
            if self.best
            else "best -"
        )
        self.console.print(f"{self._stamp()} {escape(t.name)} {word} {detail}", highlight=False, markup=True)
        if not self.show_best:
            return
        self.console.print(
            f"      [dim]{c['RUNNING']} running, {c['FINISHED']} finished, {c['KILLED']} stopped, "
            f"{c['FAILED']} failed of {self.total} | {best}[/dim]",
            highlight=False,
            markup=True,
        )


def failure_summary(trials: Sequence[TrialRecord]) -> str:
    """``"4 of 5 trial(s) failed: 3x TrialError: ...; 1x ..."``: the distinct one-line errors,
    most frequent first (or that the trials ended without reporting a metric)."""
    errors = Counter(t.error or "no error message" for t in trials if t.status == "FAILED")
    if not errors:
        return f"{len(trials)} trial(s) ended without reporting a metric"
    distinct = "; ".join(f"{n}x {e}" for e, n in errors.most_common())
    return f"{sum(errors.values())} of {len(trials)} trial(s) failed: {distinct}"


def _where(console: Console, result: SweepResult, first: tuple[str, Path]) -> None:
    """The closing lines: ``first`` (label, path), the output folder and the tracking store
    (with the ``hpo ui`` command when the store is the folder's embedded one)."""
    paths = SweepPaths(Path(result.output_dir))
    console.print(f"{first[0]:<8} {first[1]}")
    console.print(f"results: {paths.root}")
    hint = f"  (hpo ui {paths.root})" if paths.mlflow_db.is_file() else ""
    console.print(f"mlflow:  {result.tracking_uri}{hint}")


def print_sweep_summary(console: Console, result: SweepResult) -> bool:
    """What ``hpo sweep`` prints when the sweep ends: trial counts by status, the best trial
    and its parameters, the Pareto set, each k-fold configuration's mean and test score, and
    where the report, results and runs are. Driver process.

    Returns:
        False when no trial produced a result (only the counts are printed; the caller
        reports the failure, see :func:`failure_summary`).
    """
    best = next((t for t in result.trials if t.trial_id == result.best_trial_id), None)
    console.print()
    counts = {s: sum(t.status == s for t in result.trials) for s in ("FINISHED", "KILLED", "FAILED")}
    console.print(
        f"[bold]done[/bold] in {result.wall_time_s:.0f}s: {counts['FINISHED']} finished, "
        f"{counts['KILLED']} stopped early, {counts['FAILED']} failed",
        markup=True,
    )
    if best is None or best.objective_best is None:
        return False
    console.print(f"best trial {best.trial_id}: {result.metric} = {best.objective_best:.6g}")
    if result.pareto_trial_ids:
        console.print(f"pareto set on {', '.join(result.objectives)}: {', '.join(result.pareto_trial_ids)}")
    for k, v in best.params.items():
        console.print(f"  {k}: {v}")
    for kf in result.kfold:
        mean = sum(kf.fold_scores) / len(kf.fold_scores) if kf.fold_scores else float("nan")
        test = f"{kf.test_score:.6g}" if kf.test_score is not None else "failed"
        folds = len(kf.fold_scores) + kf.failed_folds
        failed = f" ({kf.failed_folds} failed)" if kf.failed_folds else ""
        console.print(
            f"config #{kf.config_rank} ({kf.trial_id}): mean {kf.metric} over {len(kf.fold_scores)}/{folds} "
            f"folds{failed} = {mean:.6g}, test = {test}"
        )
    _where(console, result, ("report:", SweepPaths(Path(result.output_dir)).report))
    return True


def print_train_summary(console: Console, result: SweepResult, cfg: SweepConfig) -> str | None:
    """What ``hpo train`` prints when its run ends: epochs, workers, strategy and precision,
    the metric's best (with its epoch) and last values, the last epoch's validation metrics,
    and where the model, results and run are. Driver process.

    Returns:
        None, or why the run produced no model (``"training failed[: <error>]"``; nothing is
        printed then).
    """
    run = result.trials[0] if result.trials else None
    if run is None or run.status == "FAILED" or run.objective_best is None or run.objective_last is None:
        return f"training failed{f': {run.error}' if run and run.error else ''}"
    last = run.history[-1] if run.history else None
    best_epoch = min(run.history, key=lambda e: cfg.goal_sign * e.objective).epoch if run.history else None
    console.print()
    console.print(
        f"[bold]done[/bold] in {result.wall_time_s:.0f}s: {len(run.history)} epochs, "
        f"{cfg.backend.num_workers} worker(s), {cfg.backend.strategy}, {cfg.trainer.precision}",
        markup=True,
    )
    console.print(f"{result.metric}: best {run.objective_best:.6g} (epoch {best_epoch}), last {run.objective_last:.6g}")
    if last is not None:
        shown = {k: v for k, v in last.metrics.items() if k.startswith(("validation/", "train/combined"))}
        for k, v in sorted(shown.items()):
            console.print(f"  {k}: {v:.6g}")
    _where(console, result, ("model:", SweepPaths(Path(result.output_dir)).best_model))
    return None
