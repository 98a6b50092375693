"""What a person sees while a sweep runs: one line per trial event with the best value so
far, instead of Ray's log lines. Driver only."""

from __future__ import annotations

import math
import time
from typing import Any

from rich.console import Console
from rich.markup import escape

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
