"""The live report: rewritten from the trial book while the search runs, reloading itself only
while it is live; its writer never raises into the sweep."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from dashboards import build_report
from dashboards.report import LIVE_BANNER_ID
from ludwig_hpo.driver.live_report import LiveReport, Throttle
from ludwig_hpo.results import EpochRecord, ParamInfo, SweepResult
from ludwig_hpo.results.live import LiveTrial

pytestmark = pytest.mark.timeout(120)

REFRESH = 'http-equiv="refresh"'
LR = ParamInfo("trainer.learning_rate", "loguniform", log=True, lower=1e-4, upper=1e-1)
BASE = SweepResult(
    name="live-sweep",
    metric="validation/label/loss",
    goal="minimize",
    parameters=(LR,),
    trials=(),
    output_dir="results/live-sweep",
)


def test_throttle_writes_at_once_then_at_most_every_interval_sooner_after_a_trial_end():
    th = Throttle(interval_s=30, min_gap_s=5)
    assert th.wait_s(0.0) is None  # nothing to show yet
    th.mark()
    assert th.wait_s(0.0) == 0.0  # the first page at once
    th.wrote(0.0)
    th.mark()  # an epoch's result
    assert th.wait_s(1.0) == 29.0
    th.mark(urgent=True)  # a trial ended
    assert th.wait_s(1.0) == 4.0 and th.wait_s(6.0) == 0.0
    th.wrote(6.0)
    assert th.wait_s(7.0) is None


def test_a_slow_page_is_written_less_often():
    from ludwig_hpo.driver.live_report import BUSY_FACTOR

    th = Throttle(interval_s=30, min_gap_s=5)
    th.mark()
    th.wrote(0.0)
    th.took(20.0)  # a large sweep's page took 20 s to build
    th.mark(urgent=True)
    assert th.wait_s(0.0) == BUSY_FACTOR * 20.0  # not 5 s: the build never takes most of the driver's time


class _Recorder:
    """Writes the real page and signals each write (a test waits on it, never on the clock)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.written = threading.Event()
        self.results: list[SweepResult] = []

    def __call__(self, result: SweepResult, report: Path, hiplot: Path, live: bool) -> None:
        try:
            if self.fail:
                raise OSError("disk full")
            self.results.append(result)
            build_report(result, report, hiplot, live=live)
        finally:
            self.written.set()


def _trial(tid: str, lr: float, losses: list[float]) -> LiveTrial:
    t = LiveTrial(tid, {LR.path: lr}, {}, f"trial_{tid}")
    t.history = [EpochRecord(e, v, {"validation/label/loss": v}) for e, v in enumerate(losses, start=1)]
    return t


def test_live_page_reloads_while_running_and_not_after(tmp_path):
    recorder = _Recorder()
    live = LiveReport(
        BASE,
        tmp_path / "report.html",
        tmp_path / "hiplot.html",
        goal_sign=1.0,
        write=recorder,
        throttle=Throttle(interval_s=3600, min_gap_s=0),
    )
    a, b = _trial("a", 1e-3, [0.5, 0.3]), _trial("b", 1e-2, [0.9])
    live.trial_started(a)
    live.trial_started(b)
    a.status = "FINISHED"
    live.trial_ended(a)
    assert recorder.written.wait(60)
    live.flush()  # waits for a write in progress, then takes the reload off
    assert live.writes >= 1
    seen = recorder.results[-1]
    assert {t.trial_id for t in seen.trials} <= {"a", "b"} and seen.name == "live-sweep"
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert REFRESH not in page and f'id="{LIVE_BANNER_ID}"' not in page
    assert "live-sweep" in page and (tmp_path / "hiplot.html").is_file()
    live.trial_ended(b)  # after the phase: ignored, nothing written
    assert live.writes == len(recorder.results)


def test_the_live_page_has_the_reload_and_the_final_one_none(tmp_path):
    page = build_report(BASE, tmp_path / "live.html", tmp_path / "hiplot.html", live=True).read_text(encoding="utf-8")
    assert page.count(REFRESH) == 1 and f'id="{LIVE_BANNER_ID}"' in page
    final = build_report(BASE, tmp_path / "final.html", tmp_path / "hiplot.html").read_text(encoding="utf-8")
    assert REFRESH not in final and LIVE_BANNER_ID not in final


def test_snapshot_ranks_the_trials_so_far(tmp_path):
    live = LiveReport(
        BASE, tmp_path / "r.html", tmp_path / "h.html", 1.0, write=_Recorder(), throttle=Throttle(3600, 3600)
    )
    live.trials_restored([_trial("a", 1e-3, [0.5, 0.3]), _trial("b", 1e-2, [0.9, 0.2])])
    snap = live.snapshot()
    live.flush()
    assert [t.trial_id for t in snap.trials] == ["a", "b"] and snap.best_trial_id == "b"
    assert snap.wall_time_s is not None and snap.wall_time_s >= 0


def test_a_failing_write_is_logged_and_never_raised(tmp_path, caplog):
    recorder = _Recorder(fail=True)
    live = LiveReport(BASE, tmp_path / "r.html", tmp_path / "h.html", 1.0, write=recorder, throttle=Throttle(3600, 0))
    with caplog.at_level(logging.WARNING, logger="ludwig_hpo.driver.live_report"):
        live.trial_ended(_trial("a", 1e-3, [0.5]))
        assert recorder.written.wait(60)
        live.flush()
    assert live.writes == 0 and not (tmp_path / "r.html").exists()
    assert any("could not be written: OSError: disk full" in r.getMessage() for r in caplog.records)
