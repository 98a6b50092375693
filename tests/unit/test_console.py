"""The sweep's console: trial events fit the terminal's width with a live table of running
trials, plain one-line records anywhere else, the running count, the closing summary (only
paths that exist, the time budget's stop) and ``--help``."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ludwig_hpo.cli import app
from ludwig_hpo.driver.console import ConsoleSink
from ludwig_hpo.driver.summary import print_sweep_summary
from ludwig_hpo.results import EpochRecord, SweepResult, TrialRecord
from ludwig_hpo.results.live import LiveTrial
from ludwig_hpo.tracking import layout

LONG = {
    "trainer.learning_rate": 0.0123456,
    "combiner.output_size": 16,
    "trainer.optimizer.type": "sgd",
    "input_features.mean_concave_points.encoder.dropout": 0.25,
    "output_features.malignant.decoder.num_fc_layers": 2,
}
METRIC = "validation/malignant/roc_auc"


def _trial(i: int) -> LiveTrial:
    return LiveTrial(f"t{i:08d}", dict(LONG, **{"combiner.output_size": 8 * i}), {}, f"trial_t{i:08d}")


def _epoch(t: LiveTrial, sink: ConsoleSink, epoch: int, value: float) -> None:
    t.history.append(EpochRecord(epoch, value, {METRIC: value}))
    sink.trial_result(t, {})


def _end(t: LiveTrial, sink: ConsoleSink, status="FINISHED", stopped_by=None, error=None) -> None:
    t.status, t.stopped_by, t.error = status, stopped_by, error
    sink.trial_ended(t)


def _play(sink: ConsoleSink) -> list[LiveTrial]:
    """A recorded sequence of a search's trial events: two trials at once, one stopped early,
    one failed with a long error, one completed, then one cut off by the time budget."""
    a, b, c, d = (_trial(i) for i in range(1, 5))
    sink.trial_started(a)
    sink.trial_started(b)
    _epoch(a, sink, 1, 0.91)
    _epoch(b, sink, 1, 0.42)
    _end(b, sink, "FINISHED", layout.STOPPED_BY_SCHEDULER)
    sink.trial_started(c)
    _end(c, sink, "FAILED", error="FloatingPointError: training loss is nan at epoch 1 " + "x" * 150)
    _epoch(a, sink, 2, 0.97)
    _end(a, sink)
    sink.trial_started(d)
    _epoch(d, sink, 1, 0.5)
    _end(d, sink, "FINISHED", layout.STOPPED_BY_TIME_BUDGET)
    return [a, b, c, d]


def _terminal(width: int) -> Console:
    return Console(width=width, record=True, force_terminal=True, file=io.StringIO(), color_system="standard")


@pytest.mark.parametrize("width", [80, 160])
def test_a_terminal_shows_events_and_the_live_table_within_its_width(width):
    console = _terminal(width)
    sink = ConsoleSink(console, METRIC, -1.0, 4, epochs=2)
    console.print(sink.render())  # the live view before any trial: a spinner
    a, b = _trial(1), _trial(2)
    sink.trial_started(a)
    sink.trial_started(b)
    _epoch(a, sink, 1, 0.91)
    console.print(sink.render())  # the live view as drawn now
    _end(a, sink)
    _end(b, sink, "FINISHED", layout.STOPPED_BY_SCHEDULER)
    console.print(sink.render())
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(x for x in lines if len(x) > width)
    assert "waiting for the first trial" in lines[0]
    assert "started (1/4)" in text and "started (2/4)" in text
    assert "2 running, 0 completed of 4" in text
    table = [line for line in lines if line.startswith("trial_t00000001 ")]
    assert table and re.match(r"trial_t00000001 +1/2 +0\.91 +trainer\.learning_rate=", table[0])
    assert "best 0.91 (t00000001: " in text
    assert "completed" in text and "stopped early (scheduler)" in text
    assert "0 running, 1 completed, 1 stopped early of 4" in lines[-2]


@pytest.mark.parametrize("width", [80, 160])
def test_a_whole_recorded_search_stays_within_the_width(width):
    console = _terminal(width)
    sink = ConsoleSink(console, METRIC, -1.0, 4, epochs=2)
    _play(sink)
    console.print(sink.render())
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= width
    assert any("failed" in line for line in lines) and any("stopped early (time budget)" in line for line in lines)


def test_the_live_view_is_drawn_while_a_phase_runs_and_leaves_its_counts():
    console = _terminal(100)
    sink = ConsoleSink(console, METRIC, -1.0, 4, epochs=2)
    with sink.live():
        assert sink._live is not None and sink._live.is_started
        _play(sink)
    assert sink._live is None
    text = console.export_text()
    assert "\n      0 running, 1 completed, 2 stopped early, 1 failed of 4 | best 0.97" in text


def test_the_running_count_is_the_trials_running_now():
    console = Console(file=io.StringIO(), width=120)
    sink = ConsoleSink(console, METRIC, -1.0, 4)
    a, b = _trial(1), _trial(2)
    sink.trial_started(a)
    sink.trial_started(b)
    assert sink.counts()["running"] == 2 and sink.running() == [a, b]
    _end(a, sink)
    assert sink.counts()["running"] == 1 and sink.running() == [b]
    assert "1 running, 1 completed of 4" in console.file.getvalue().splitlines()[-1]
    _end(b, sink, "FAILED", error="boom")
    assert sink.counts() == {"completed": 1, "failed": 1}


def test_a_retried_trial_runs_again_and_is_counted_once():
    console = Console(file=io.StringIO(), width=120)
    sink = ConsoleSink(console, METRIC, -1.0, 2)
    a = _trial(1)
    sink.trial_started(a)
    a.retries, a.error = 1, "TrialError: worker died"
    sink.trial_retried(a)
    sink.trial_started(a)  # the monitor's same record, started again
    assert sink.counts()["running"] == 1 and len(sink.trials) == 1


def test_anywhere_but_a_terminal_events_are_plain_one_line_records():
    buffer = io.StringIO()
    console = Console(file=buffer, width=80)  # a file: not a terminal
    sink = ConsoleSink(console, METRIC, -1.0, 4, epochs=2)
    with sink.live():
        _play(sink)
    text = buffer.getvalue()
    assert "\x1b" not in text and "\r" not in text  # no colours, no cursor moves
    lines = text.splitlines()
    events = [line for line in lines if re.match(r"^ +\d+:\d\d trial_", line)]
    assert len(events) == 4 + 4  # every start and end, one line each
    failed = next(line for line in events if " failed " in line)
    assert failed.endswith("x" * 150)  # not wrapped, not cut
    status = [line for line in lines if line.startswith("      ") and " of 4" in line]
    assert status[-1].startswith(
        "      0 running, 1 completed, 2 stopped early, 1 failed of 4 | best 0.97 (t00000001: "
    )


def _result(out: Path, **kw) -> SweepResult:
    trials = (
        TrialRecord("a", "FINISHED", {"x": 1}, 0.9, 0.9, (EpochRecord(1, 0.9),)),
        TrialRecord("b", "FINISHED", {"x": 2}, 0.5, 0.5, (EpochRecord(1, 0.5),), stopped_by="scheduler"),
    )
    return SweepResult(
        "s", METRIC, "maximize", (), trials, best_trial_id="a", wall_time_s=3.0, output_dir=str(out), **kw
    )


def test_the_summary_names_no_report_that_was_not_written(tmp_path):
    buffer = io.StringIO()
    assert print_sweep_summary(Console(file=buffer, width=200), _result(tmp_path, tracking_uri="sqlite:///x"))
    text = buffer.getvalue()
    assert "report:" not in text and f"results: {tmp_path}" in text
    (tmp_path / "report.html").write_text("<html></html>")
    buffer = io.StringIO()
    print_sweep_summary(Console(file=buffer, width=200), _result(tmp_path))
    assert f"report:  {tmp_path / 'report.html'}" in buffer.getvalue()


def test_the_summary_says_the_time_budget_ended_the_search(tmp_path):
    buffer = io.StringIO()
    reason = "time budget reached after 2 of 8 trials"
    print_sweep_summary(Console(file=buffer, width=200), _result(tmp_path, stop_reason=reason))
    done = next(line for line in buffer.getvalue().splitlines() if line.startswith("done"))
    assert done == f"done in 3s: 1 completed, 1 stopped early, 0 failed; {reason}"


def test_the_summary_fits_a_narrow_terminal(tmp_path):
    console = Console(width=80, record=True, force_terminal=True, file=io.StringIO())
    long_dir = tmp_path / ("a-very-long-folder-name-" * 5)
    long_dir.mkdir()
    (long_dir / "report.html").write_text("")
    print_sweep_summary(console, _result(long_dir, tracking_uri=f"sqlite:///{long_dir}/mlflow.db"))
    assert max(len(line) for line in console.export_text().splitlines()) <= 80


COMMANDS = ["sweep", "resume", "train", "validate", "schema", "report", "ui"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_values_as_a_person_writes_them_and_one_example(command):
    text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "160"}).stdout
    for machine in ("<bool>", "<list[", " range>", "[x>=", "<int>", "<str>", "<path>", "{"):
        assert machine not in text, machine
    assert len(re.findall(rf"Example: hpo {command}\b", text)) == 1
    assert "Usage:" in text


def test_help_options_name_their_values():
    text = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "160"}).stdout
    assert re.search(r"--set\s+KEY=VALUE", text) and re.search(r"--num-workers\s+N\b", text)
    top = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "160"}).stdout
    assert "<bool>" not in top and "--debug" in top


@pytest.mark.parametrize(
    ("command", "usage", "argument"),
    [
        ("sweep", "hpo sweep [OPTIONS] SWEEP_FILE", "SWEEP_FILE"),
        ("resume", "hpo resume [OPTIONS] RESULTS_DIR", "RESULTS_DIR"),
        ("report", "hpo report [OPTIONS] [RESULTS_DIR]", "RESULTS_DIR"),
        ("ui", "hpo ui [OPTIONS] [RESULTS_DIR]", "RESULTS_DIR"),
    ],
)
def test_help_names_arguments_as_a_person_writes_them_at_80_columns(command, usage, argument):
    """The usage line as a person writes the command (``[...]``: may be left out) and the
    argument by its name alone, its help beside it; every line fits 80 columns."""
    text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"}, prog_name="hpo").stdout
    assert f"Usage: {usage}" in text
    row = next(line for line in text.splitlines() if line.startswith("│") and f" {argument} " in line)
    assert re.search(rf"{argument}\s+[A-Z]", row) and "<" not in row
    assert max(len(line) for line in text.splitlines()) <= 80


def _ended(i: int, stopped_by: str | None = None) -> LiveTrial:
    t = _trial(i)
    t.status, t.stopped_by = "FINISHED", stopped_by
    return t


def test_a_search_the_time_budget_ended_says_after_how_many_trials():
    from ludwig_hpo.driver.tune_run import time_budget_stop

    three = [_ended(1), _ended(2), _ended(3)]
    assert time_budget_stop(60.0, 61.0, 8, three) == "time budget reached after 3 of 8 trials"
    cut = [*three, _ended(4, layout.STOPPED_BY_TIME_BUDGET)]
    assert time_budget_stop(60.0, 61.0, 4, cut) == (
        "time budget reached after 4 of 4 trials (1 running trial(s) stopped by it)"
    )
    assert time_budget_stop(60.0, 61.0, 3, three) is None  # every trial ran
    assert time_budget_stop(None, 61.0, 8, three) is None  # no budget
    assert time_budget_stop(60.0, 30.0, 8, three) is None  # ended before the budget: not by it


def test_the_stop_reason_is_kept_in_results_json_and_old_files_still_load(tmp_path):
    import json

    from ludwig_hpo.results.io import read_result, write_result

    path = tmp_path / "results.json"
    reason = "time budget reached after 2 of 8 trials"
    write_result(_result(tmp_path, stop_reason=reason), path)
    assert json.loads(path.read_text())["stop_reason"] == reason
    assert read_result(path).stop_reason == reason
    old = json.loads(path.read_text())
    del old["stop_reason"]
    path.write_text(json.dumps(old))
    assert read_result(path).stop_reason is None


def test_the_report_says_why_the_search_ended(tmp_path):
    from dashboards import build_report

    reason = "time budget reached after 2 of 8 trials"
    page = build_report(_result(tmp_path, stop_reason=reason), tmp_path / "report.html", tmp_path / "hiplot.html")
    assert reason in page.read_text()
    page = build_report(_result(tmp_path), tmp_path / "report.html", tmp_path / "hiplot.html")
    assert "time budget reached" not in page.read_text()


@pytest.mark.parametrize("module", ["console", "summary"])
def test_state_words_printed_come_from_status_label(module):
    """What the console prints about a trial's state is spelled by ``status_label`` (one
    vocabulary): no printed f-string piece or ``Text`` is a state word typed on its own."""
    import ast

    from ludwig_hpo.results.records import STATUS_LABELS

    path = Path(__file__).parents[2] / "ludwig_hpo" / "driver" / f"{module}.py"
    printed = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.JoinedStr):
            printed += [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Text" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                printed.append(first.value)
    # a piece that is a state word on its own (in a list of counts, a trial's word) is a state shown
    assert [text for text in printed if text.strip(" ,") in STATUS_LABELS] == []


def test_a_trial_ending_past_its_best_epoch_names_that_epoch():
    console = Console(width=200, record=True, force_terminal=False, file=io.StringIO())
    sink = ConsoleSink(console, METRIC, -1.0, 1, epochs=3)
    t = _trial(1)
    sink.trial_started(t)
    for epoch, value in enumerate([0.91, 0.97, 0.95], start=1):
        _epoch(t, sink, epoch, value)
    _end(t, sink)
    assert f"{METRIC}=0.95 at epoch 3 (its best 0.97 at epoch 2)" in console.export_text()
