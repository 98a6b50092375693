"""What a person sees while a sweep runs, instead of Ray's log lines. Driver only.

On a terminal: a spinner while Ray and the warm worker groups start, then one line per trial
event above a live table of the running trials, the counts and the best trial so far (rich's
``Live``), every line cut or wrapped to the terminal's width. Anywhere else (a file, a pipe,
CI): the same events as plain one-line records, no control codes.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ludwig_hpo.results.live import LiveTrial
from ludwig_hpo.results.records import STATUS_LABELS, StatusLabel, status_label

#: The colour of each state word on a terminal.
_STYLE: dict[StatusLabel, str] = {
    "completed": "green",
    "stopped early": "yellow",
    "failed": "red",
    "interrupted": "magenta",
    "running": "cyan",
}
#: Running trials listed in the live table; the rest are counted on its last line.
_MAX_ROWS = 12
#: The order of the counts: what is going on, then how the others ended.
_COUNT_ORDER: tuple[StatusLabel, ...] = ("running", *(w for w in STATUS_LABELS if w != "running"))


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
    """``"trainer.learning_rate=0.01 combiner.output_size=16"``."""
    return " ".join(f"{k}={fmt(v)}" for k, v in params.items())


def is_live(console: Console) -> bool:
    """Whether ``console`` draws live displays (a terminal that understands cursor moves)."""
    return console.is_terminal and not console.is_dumb_terminal


def say(console: Console, text: str) -> None:
    """Print one line of product text (no markup): wrapped to the width on a terminal, one
    line as is elsewhere."""
    console.print(text, markup=False, highlight=False, soft_wrap=not is_live(console))


@contextlib.contextmanager
def activity(console: Console, text: str) -> Iterator[None]:
    """Show that ``text`` is under way while the body runs: a spinner on a terminal, the line
    ``text...`` elsewhere. Driver only; no other live display may be active."""
    if not is_live(console):
        say(console, f"{text}...")
        yield
        return
    with console.status(Text(text), spinner="dots"):
        yield


class ConsoleSink:
    """Shows the trial events of one phase (search or k-fold): a line per start, retry and
    end, and (:meth:`live`) the table of running trials with the counts and the best so far.
    A :class:`~ludwig_hpo.results.live.TrialSink`; Tune's event thread calls it, the live
    table's refresh thread reads it (both in the driver).

    Args:
        console: where to print.
        metric: display name of the optimized metric.
        goal_sign: +1 when smaller is better.
        total: number of trials planned (for ``3/10`` counts).
        show_best: show the best value so far (the search), or not (k-fold).
        t0: the clock the time stamps count from (``time.time()``; default: now).
        epochs: epochs of a complete trial (for the table's ``1/2`` epoch column), None to
            show the epoch alone.
    """

    def __init__(
        self,
        console: Console,
        metric: str,
        goal_sign: float,
        total: int,
        show_best: bool = True,
        *,
        t0: float | None = None,
        epochs: int | None = None,
    ) -> None:
        self.console = console
        self.metric = metric
        self.sign = goal_sign
        self.total = total
        self.show_best = show_best
        self.epochs = epochs
        self.t0 = time.time() if t0 is None else t0
        #: every trial this phase has heard of, by id: the monitor's own records, so a state
        #: read here is the trial's state now
        self.trials: dict[str, LiveTrial] = {}
        self.best: tuple[float, LiveTrial] | None = None
        self.waiting = "waiting for the first trial to start"
        self._lock = threading.Lock()
        self._live: Live | None = None

    # ------------------------------------------------------------------ state
    def counts(self) -> Counter[StatusLabel]:
        """Trials by the word users see (:func:`~ludwig_hpo.results.records.status_label`)."""
        with self._lock:
            return Counter(status_label(t.status, t.stopped_by) for t in self.trials.values())

    def running(self) -> list[LiveTrial]:
        """The trials running now, in start order."""
        with self._lock:
            return [t for t in self.trials.values() if t.status == "RUNNING"]

    def _consider(self, t: LiveTrial) -> None:
        b = t.best(self.sign)
        if b is not None and (self.best is None or self.sign * b < self.sign * self.best[0]):
            self.best = (b, t)

    def _stamp(self) -> str:
        s = int(time.time() - self.t0)
        return f"{s // 60:3d}:{s % 60:02d}"

    # ------------------------------------------------------------------ output
    def _event(self, t: LiveTrial, *parts: Text | str) -> None:
        """One event line: time stamp, trial name, ``parts``."""
        line = Text.assemble(" ", t.name, " ", *parts)
        if not is_live(self.console):
            self.console.print(f"{self._stamp()}{line.plain}", markup=False, highlight=False, soft_wrap=True)
            return
        grid = Table.grid(padding=0)
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row(self._stamp(), line)
        self.console.print(grid)

    def _summary_text(self) -> str:
        c = self.counts()
        text = ", ".join(f"{c[w]} {w}" for w in _COUNT_ORDER if c[w] or w in ("running", "completed"))
        return f"{text} of {self.total}"

    def _best_text(self) -> str:
        if not self.show_best:
            return ""
        if self.best is None:
            return "best -"
        value, t = self.best
        return f"best {fmt(value)} ({t.trial_id}: {fmt_params(t.params)})"

    def _status_line(self) -> None:
        """The counts and the best so far, after a trial ends (the plain form of the table)."""
        best = self._best_text()
        text = f"{self._summary_text()}{f' | {best}' if best else ''}"
        if not is_live(self.console):
            self.console.print(f"      {text}", markup=False, highlight=False, soft_wrap=True, style="dim")
            return
        grid = Table.grid(padding=0)
        grid.add_column(width=6)
        grid.add_column(overflow="fold", style="dim")
        grid.add_row("", text)
        self.console.print(grid)

    def _epoch_text(self, t: LiveTrial) -> str:
        if not t.history:
            return "-"
        e = t.history[-1].epoch
        return f"{e}/{self.epochs}" if self.epochs else str(e)

    def render(self) -> RenderableType:
        """The live view: a spinner until a trial starts, then the running trials (name,
        epoch, last metric, parameters), the counts with the elapsed time and the best so
        far. Every line fits the console's width (long parameters are cut with ``…``)."""
        running = self.running()
        if not self.trials:
            return Spinner("dots", Text(f"{self.waiting} ({self._stamp().strip()})"))
        # the parameters take what the other columns leave of the width (``expand``), cut with …
        table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False, expand=True)
        table.add_column("running", no_wrap=True, overflow="ellipsis", max_width=24)
        table.add_column("epoch", no_wrap=True, justify="right")
        table.add_column(self.metric.rsplit("/", 1)[-1], no_wrap=True, justify="right")
        table.add_column("parameters", no_wrap=True, overflow="ellipsis", ratio=1)
        for t in running[:_MAX_ROWS]:
            last = t.history[-1].objective if t.history else None
            table.add_row(t.name, self._epoch_text(t), fmt(last) if last is not None else "-", fmt_params(t.params))
        more = len(running) - _MAX_ROWS
        status = Text(f"{self._summary_text()}  {self._stamp().strip()}")
        if more > 0:
            status.append(f"  (+{more} running not listed)")
        parts: list[RenderableType] = [table] if running else []
        parts.append(Spinner("dots", status))
        best = self._best_text()
        if best:
            parts.append(Text(best, no_wrap=True, overflow="ellipsis", style="bold"))
        return Group(*parts)

    @contextlib.contextmanager
    def live(self) -> Iterator[ConsoleSink]:
        """While the body runs (the phase's Tune experiment), keep the live view on screen
        (on a terminal; elsewhere nothing). It is redrawn on every trial event and a few times
        a second for the spinner and clock, and left off the screen when the body ends."""
        if not is_live(self.console):
            yield self
            return

        with Live(
            get_renderable=self.render,
            console=self.console,
            refresh_per_second=4,
            transient=True,
            redirect_stdout=True,
            redirect_stderr=True,
        ) as self._live:
            refresher = self._live._refresh_thread
            try:
                yield self
            finally:
                self._live = None
        if refresher is not None:  # rich only signals its redraw thread to stop: wait for it
            refresher.join()
        if self.trials:  # the table is gone: its last counts stay as one line
            self._status_line()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    # ------------------------------------------------------------------ TrialSink
    def trials_restored(self, trials: list[LiveTrial]) -> None:
        """A resumed sweep: count the trials that ended before the interruption."""
        with self._lock:
            for t in trials:
                if t.status != "RUNNING":
                    self.trials[t.trial_id] = t
        for t in trials:
            self._consider(t)
        c = self.counts()
        kept = ", ".join(f"{c[w]} {w}" for w in STATUS_LABELS if w != "running" and c[w]) or "none"
        say(self.console, f"      kept from before: {kept} (of {self.total})")
        self._refresh()

    def trial_retried(self, t: LiveTrial) -> None:
        failed = status_label("FAILED", None)
        self._event(t, Text(failed, style=_STYLE[failed]), f", running it again (retry {t.retries}): {t.error or ''}")
        self._refresh()

    def trial_started(self, t: LiveTrial) -> None:
        with self._lock:
            self.trials[t.trial_id] = t
            n = len(self.trials)
        self._event(t, f"started ({n}/{self.total}) {fmt_params(t.params)}")
        self._refresh()

    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None:
        v = t.history[-1].objective
        if math.isfinite(v) and (self.best is None or self.sign * v < self.sign * self.best[0]):
            self.best = (v, t)
        self._refresh()

    def trial_ended(self, t: LiveTrial) -> None:
        with self._lock:
            self.trials[t.trial_id] = t
        label = status_label(t.status, t.stopped_by)
        word = Text(label, style=_STYLE[label])
        if t.stopped_by and label == "stopped early":
            word.append(f" ({t.stopped_by})")
        last = t.history[-1] if t.history else None
        detail = f" {self.metric}={fmt(last.objective)} at epoch {last.epoch}" if last else " no epoch completed"
        best_of_trial = t.best(self.sign)
        if last and best_of_trial is not None and best_of_trial != last.objective:
            # the trial's own best epoch (its kept weights), not the sweep's best so far
            at = next(h.epoch for h in t.history if h.objective == best_of_trial)
            detail += f" (its best {fmt(best_of_trial)} at epoch {at})"
        if t.error:
            detail += f": {t.error}"
        self._event(t, word, detail)
        if self.show_best and not is_live(self.console):
            self._status_line()
        self._refresh()
