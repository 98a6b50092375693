"""What a user opens after a sweep, in headless Chromium: the report, its HiPlot page, and the
MLflow run list at the URL that ``hpo ui`` prints. The session's tiny real sweep (real Ray, real MLflow);
``hpo ui`` runs as a subprocess on a free loopback port and is stopped by its process group.
Each page is screenshotted into the test's folder (and ``$HPO_SHOTS_DIR`` when set) and its DOM,
after the page's scripts ran, is checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest

from ..chromium import CHROMIUM, MISSING, dom, screenshot, visible_text
from ..servers import UI_START_TIMEOUT_S, stop_process_group, wait_until_answering
from .test_sweep_cli import SWEEP_TIMEOUT_S

# The MLflow UI is a single-page app that fetches the runs after it loads: more virtual time.
MLFLOW_BUDGET_MS = 30000

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(SWEEP_TIMEOUT_S + UI_START_TIMEOUT_S + 600),
    pytest.mark.skipif(CHROMIUM is None, reason=MISSING),
]


@pytest.fixture(scope="module")
def sweep(tiny_sweep):
    """The session's ``hpo sweep sweeps/breast_cancer_tiny.yaml`` (tests/e2e/conftest.py);
    returns (output folder, its result)."""
    from ludwig_hpo.results.io import read_result

    _, out = tiny_sweep
    return out, read_result(out / "results.json")


def _read_url(proc: subprocess.Popen, lines: list[str], found: threading.Event) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if re.search(r"https?://\S+", line):
            found.set()
    found.set()  # the process ended; the caller sees no URL


@pytest.fixture(scope="module")
def ui_url(sweep):
    """``hpo ui DIR --port P`` on 127.0.0.1: yields the URL it printed, once that answers."""
    from ludwig_hpo.execution.cluster import free_port

    out, _ = sweep
    args = [sys.executable, "-m", "ludwig_hpo", "ui", str(out), "--host", "127.0.0.1", "--port", str(free_port())]
    help_text = subprocess.run([*args[:4], "--help"], capture_output=True, text=True, timeout=120).stdout
    if "--no-browser" in help_text:
        args.append("--no-browser")
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    proc = subprocess.Popen(
        args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    lines: list[str] = []
    found = threading.Event()
    threading.Thread(target=_read_url, args=(proc, lines, found), daemon=True).start()
    try:
        assert found.wait(UI_START_TIMEOUT_S), f"hpo ui printed no URL in {UI_START_TIMEOUT_S}s: {''.join(lines)}"
        urls = [m.group(0) for line in lines for m in [re.search(r"https?://\S+", line)] if m]
        assert urls, f"hpo ui ended (exit {proc.poll()}) without a URL:\n{''.join(lines)}"
        url = urls[0]
        wait_until_answering(url.split("#", 1)[0], proc, output=lambda: "".join(lines))
        yield url
    finally:
        stop_process_group(proc)


def test_mlflow_run_list_shows_the_sweep_as_one_parent_run_with_its_children(ui_url, sweep, tmp_path):
    from mlflow.tracking import MlflowClient

    out, result = sweep
    assert "#/experiments/" in ui_url, f"hpo ui printed {ui_url}, not the sweep experiment's run list"
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    experiment_id = re.search(r"#/experiments/([^/?]+)", ui_url).group(1)
    runs = client.search_runs([experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("run_kind") == "sweep"]
    assert len(parents) == 1 and len(runs) > len(result.trials), [r.data.tags.get("run_kind") for r in runs]

    page, _ = dom(ui_url, tmp_path, budget_ms=MLFLOW_BUDGET_MS)
    text = visible_text(page)
    assert parents[0].info.run_name in text, f"no parent run in the run list: {text[:2000]}"
    # the list's top level is the parent alone; its children fold under it
    assert set(re.findall(r'role="row" row-index="\d+" row-id="([0-9a-f]+)"', page)) == {parents[0].info.run_id}
    assert "ag-grid-expanders-visible" in page, "the run list shows no expandable parent"
    assert f"{len(runs)} matching runs" in text, f"not every run of the sweep is in the list: {text[:2000]}"
    # the list opens on the sweep's columns: its metric (trials) and best metric (parent) drawn
    # first, its parameters after them (the grid draws only the columns in the window)
    assert "viewStateShareKey=" in ui_url, ui_url
    for name in (result.metric, f"best/{result.metric}"):
        assert name in text, f"no column {name!r} in the run list: {text[:2000]}"
    view = next(v for k, v in client.get_experiment(experiment_id).tags.items() if "sharedViewState" in k)
    assert all(f"params.`{p.path}`" in view for p in result.parameters), view
    shot = screenshot(ui_url, tmp_path / "mlflow-runs.png", size=(1600, 1000), budget_ms=MLFLOW_BUDGET_MS)
    assert shot.stat().st_size > 20_000  # a blank page is a few kB


def test_report_has_its_figures_table_toggle_and_trial_states(sweep, tmp_path):
    from dashboards.report import (
        CONTOUR_DIV_ID,
        CURVES_DIV_ID,
        HISTORY_DIV_ID,
        IMPORTANCE_DIV_ID,
        PARALLEL_DIV_ID,
        RANK_DIV_ID,
        SLICE_DIV_ID,
        TRIALS_FILTER_ID,
        TRIALS_STATUS_FILTER_ID,
        TRIALS_TABLE_ID,
    )

    out, result = sweep
    page, console = dom((out / "report.html").as_uri(), tmp_path)
    assert console == [], f"console messages: {console}"
    figures = (
        PARALLEL_DIV_ID,
        HISTORY_DIV_ID,
        CURVES_DIV_ID,
        IMPORTANCE_DIV_ID,
        SLICE_DIV_ID,
        CONTOUR_DIV_ID,
        RANK_DIV_ID,
    )
    for div_id in figures:
        match = re.search(rf'<div id="{div_id}" class="([^"]*)"', page)
        assert match and "js-plotly-plot" in match.group(1), f"{div_id} was not rendered by plotly"
    # a figure's y axes switch between log and linear scale (plotly's buttons)
    assert {"log scale", "linear scale"} <= set(re.findall(r'data-unformatted="((?:log|linear) scale)"', page))
    # the trials table sorts by every column, and words each trial's state as the console does
    table = re.search(rf'<table id="{TRIALS_TABLE_ID}" class="([^"]*)">(.*?)</table>', page, re.DOTALL)
    assert table and "sortable" in table.group(1).split(), "the trials table is not sortable"
    headers = re.findall(r"<th ([^>]*)>", table.group(2))
    assert headers and all('class="sortable' in h for h in headers), headers
    assert sorted(re.findall(r'data-status="([^"]*)"', table.group(2))) == sorted(t.label for t in result.trials)
    assert f'id="{TRIALS_FILTER_ID}"' in page
    states = re.search(rf'<select id="{TRIALS_STATUS_FILTER_ID}"[^>]*>(.*?)</select>', page, re.DOTALL)
    assert states, "no state filter above the trials table"
    assert {t.label for t in result.trials} <= set(re.findall(r"<option[^>]*>([^<]*)</option>", states.group(1)))
    text = visible_text(page)
    counts = {label: sum(t.label == label for t in result.trials) for label in {t.label for t in result.trials}}
    assert "completed" in counts, counts  # a sweep that finished has a trial that ran to its last epoch
    for label, n in counts.items():
        assert f"{n} {label}" in text, f"the summary does not say '{n} {label}': {text[:1500]}"
    for trial in result.trials:
        assert trial.trial_id in text
    shot = screenshot((out / "report.html").as_uri(), tmp_path / "report.png", size=(1400, 6400))
    assert shot.stat().st_size > 50_000


def _axes(page: str) -> dict[str, list[str]]:
    """HiPlot's parallel-plot axes: ``{column: its tick labels}``."""
    axes = {}
    for group in re.split(r'<g class="dimension', page)[1:]:
        name = re.search(r'class="label-name[^>]*>([^<]*)', group)
        if name:
            axes[name.group(1)] = [
                t.strip() for t in re.findall(r'<g class="tick"[^>]*>.*?<text[^>]*>([^<]*)</text>', group, re.DOTALL)
            ]
    return axes


def test_hiplot_page_draws_every_parameter_and_integers_as_integers(sweep, tmp_path):
    out, result = sweep
    page, console = dom((out / "hiplot.html").as_uri(), tmp_path)
    assert console == [], f"console messages: {console}"
    axes = _axes(page)
    for param in result.parameters:
        values = [t.params.get(param.path) for t in result.trials]
        if len({repr(v) for v in values}) < 2:  # HiPlot hides a column with one value
            continue
        assert param.path in axes, f"{param.path} has no HiPlot axis: {list(axes)}"
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            assert all(re.fullmatch(r"-?\d+", tick) for tick in axes[param.path]), (param.path, axes[param.path])
    if len({len(t.history) for t in result.trials}) > 1:
        assert all(re.fullmatch(r"\d+", tick) for tick in axes["epochs"]), axes["epochs"]
    assert set(axes["status"]) <= {"completed", "stopped early", "failed", "interrupted", "running"}, axes["status"]
    shot = screenshot((out / "hiplot.html").as_uri(), tmp_path / "hiplot.png", size=(1400, 1400))
    assert shot.stat().st_size > 20_000
