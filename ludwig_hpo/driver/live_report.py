"""The live report: ``report.html`` rewritten while the search runs. Driver process only.

:class:`LiveReport` is a :class:`~ludwig_hpo.results.live.TrialSink`: the monitor's events
only mark the page stale (no work on the sweep's thread); a writer thread of its own builds
the page from the trial book, at most every :data:`INTERVAL_S` seconds while results come
in and within :data:`MIN_GAP_S` of a trial's end (:class:`Throttle`). The live page reloads
itself in the browser; when the search phase ends (the monitor's ``flush``, interrupted or
not) the writer stops and the page loses its reload, so a page left by a stopped sweep does
not reload forever; a finished sweep then writes its final report over it. A failed write
is logged and the sweep goes on: the report is a view, never a reason to stop a sweep.
Every write is atomic (the old page or the new one, never half).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ludwig_hpo.results import SweepResult, TrialRecord
from ludwig_hpo.results.ranking import rank_trials

if TYPE_CHECKING:
    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.driver.paths import SweepPaths
    from ludwig_hpo.results.live import LiveTrial, TrialSink

log = logging.getLogger(__name__)

#: While results come in, the page is rewritten at most this often (seconds).
INTERVAL_S = 30.0
#: A trial's end is shown this soon after the last write at the latest (seconds).
MIN_GAP_S = 5.0
#: Writes are spaced by at least this many times the last write's duration, so the page's
#: building (in the driver's process) never takes more than a small share of its time.
BUSY_FACTOR = 4.0

#: ``(result, report path, hiplot path, live)`` -> writes the page; the report's builder by default.
PageWriter = Callable[[SweepResult, Path, Path, bool], Any]


class Throttle:
    """When the next write is due (pure: the caller passes the time, in seconds).

    A page is stale after any event; it is written at once the first time, then at most
    every ``interval_s`` seconds, or ``min_gap_s`` after the last write when a trial ended
    (``urgent``); never sooner than :data:`BUSY_FACTOR` times the last write's duration after it.
    """

    def __init__(self, interval_s: float = INTERVAL_S, min_gap_s: float = MIN_GAP_S) -> None:
        self.interval_s = interval_s
        self.min_gap_s = min_gap_s
        self.last: float | None = None
        self.took_s = 0.0
        self.stale = False
        self.urgent = False

    def mark(self, urgent: bool = False) -> None:
        """Something changed (``urgent``: a trial ended)."""
        self.stale = True
        self.urgent = self.urgent or urgent

    def wait_s(self, now: float) -> float | None:
        """Seconds until the next write is due (0: now); None when the page is up to date."""
        if not self.stale:
            return None
        if self.last is None:
            return 0.0
        gap = max(self.min_gap_s if self.urgent else self.interval_s, BUSY_FACTOR * self.took_s)
        return max(0.0, self.last + gap - now)

    def wrote(self, now: float) -> None:
        """A write with everything marked so far began at ``now``."""
        self.last = now
        self.stale = self.urgent = False

    def took(self, took_s: float) -> None:
        """The write begun at the last :meth:`wrote` took ``took_s`` seconds."""
        self.took_s = took_s


class LiveReport:
    """Rewrites the sweep's report while its search runs (see the module's docstring).

    Args:
        base: the sweep's fixed description (name, metric, goal, parameters, output folder,
            tracking URI); its trials, best trial and wall time are filled in at each write.
        report, hiplot: the pages' paths.
        goal_sign: +1 when the metric is minimized, -1 when maximized.
        write: builds and writes the pages (default: :func:`dashboards.build_report`).
        throttle: when to write (default: every :data:`INTERVAL_S` s, :data:`MIN_GAP_S`
            after a trial's end).
        started_s: when the sweep started (``time.time()``), the live page's wall time
            counts from it; default: now.
    """

    def __init__(
        self,
        base: SweepResult,
        report: Path,
        hiplot: Path,
        goal_sign: float,
        *,
        write: PageWriter | None = None,
        throttle: Throttle | None = None,
        started_s: float | None = None,
    ) -> None:
        self.base = base
        self.report = Path(report)
        self.hiplot = Path(hiplot)
        self.sign = goal_sign
        self._write = write or _build_page
        self._throttle = throttle or Throttle()
        self._trials: dict[str, LiveTrial] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._started = time.time() if started_s is None else started_s
        #: pages written so far (live ones); tests and logs read it
        self.writes = 0
        self._thread = threading.Thread(target=self._run, name="hpo-live-report", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- TrialSink (the sweep's thread)
    def trials_restored(self, trials: list[LiveTrial]) -> None:
        self._update(trials, urgent=True)

    def trial_retried(self, t: LiveTrial) -> None:
        self._update([t], urgent=False)

    def trial_started(self, t: LiveTrial) -> None:
        self._update([t], urgent=False)

    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None:
        self._update([t], urgent=False)

    def trial_ended(self, t: LiveTrial) -> None:
        self._update([t], urgent=True)

    def flush(self) -> None:
        """The search phase ended: stop the writer and take the reload off the page (waits
        for a write in progress). Later events are ignored. Never raises."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        if self.writes:
            try:
                from dashboards.report import freeze_live_page

                freeze_live_page(self.report)
            except Exception as e:  # the sweep goes on without it
                log.warning("the live report could not be finalized: %s", e)

    def _update(self, trials: list[LiveTrial], urgent: bool) -> None:
        with self._cond:
            if self._closed:
                return
            for t in trials:
                self._trials.setdefault(t.trial_id, t)
            self._throttle.mark(urgent)
            self._cond.notify_all()

    # ---------------------------------------------------------------- the writer thread
    def snapshot(self) -> SweepResult:
        """The sweep as it stands: every trial so far (start order), the best one, the time
        since the search began."""
        with self._cond:
            trials = list(self._trials.values())
        records: tuple[TrialRecord, ...] = tuple(t.record(self.sign) for t in trials)
        ranked = rank_trials(records, self.sign)
        return dataclasses.replace(
            self.base,
            trials=records,
            best_trial_id=ranked[0].trial_id if ranked else None,
            wall_time_s=time.time() - self._started,
        )

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    wait = self._throttle.wait_s(time.monotonic())
                    if wait == 0.0:
                        break
                    self._cond.wait(timeout=wait)
                if self._closed:
                    return
                began = time.monotonic()
                self._throttle.wrote(began)
            try:
                self._write(self.snapshot(), self.report, self.hiplot, True)
                self.writes += 1
            except Exception as e:  # never the sweep's problem: logged, and the next write tries again
                log.warning("the live report could not be written: %s: %s", type(e).__name__, e)
            with self._cond:
                self._throttle.took(time.monotonic() - began)


def _build_page(result: SweepResult, report: Path, hiplot: Path, live: bool) -> Any:
    from dashboards import build_report

    return build_report(result, report, hiplot, live=live)


def live_report_sinks(
    cfg: SweepConfig, paths: SweepPaths, tracking_uri: str, *, started_s: float | None = None
) -> list[TrialSink]:
    """``[LiveReport]`` for a sweep that writes a report (``report.enabled``), else ``[]``;
    ``started_s``: the sweep's start (``time.time()``)."""
    if not cfg.report.enabled:
        return []
    from ludwig_hpo.search.space import param_infos

    base = SweepResult(
        name=cfg.name,
        metric=cfg.hyperopt.metric_key,
        goal=cfg.hyperopt.goal,
        parameters=param_infos(cfg.hyperopt.parameters),
        trials=(),
        objectives=tuple(k for k, _ in cfg.objectives) if cfg.hyperopt.multi_objective else (),
        output_dir=str(paths.root),
        tracking_uri=tracking_uri,
    )
    return [LiveReport(base, paths.report, paths.hiplot, cfg.goal_sign, started_s=started_s)]


__all__ = ["BUSY_FACTOR", "INTERVAL_S", "MIN_GAP_S", "LiveReport", "Throttle", "live_report_sinks"]
