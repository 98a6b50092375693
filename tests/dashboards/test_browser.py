"""The report in a real browser: headless Chromium loads report.html (and hiplot.html) from
disk, offline; no console errors, every figure's div rendered by plotly, injected markup never
runs; a PNG screenshot is written under the test's folder (and copied to ``$HPO_SHOTS_DIR``
when set)."""

from __future__ import annotations

import re

import pytest

from dashboards import build_report
from dashboards.report import (
    CURVES_DIV_ID,
    HISTORY_DIV_ID,
    IMPORTANCE_DIV_ID,
    KFOLD_DIV_ID,
    PARALLEL_DIV_ID,
    PARETO_DIV_ID,
)
from ludwig_hpo.results import ParamInfo
from tests.chromium import CHROMIUM, MISSING, chromium, screenshot

pytestmark = [pytest.mark.timeout(240), pytest.mark.skipif(CHROMIUM is None, reason=MISSING)]
FIGURES = (PARALLEL_DIV_ID, IMPORTANCE_DIV_ID, HISTORY_DIV_ID, CURVES_DIV_ID, PARETO_DIV_ID, KFOLD_DIV_ID)
# Markup in user strings; if any of it ran, the console would say so.
INJECTED = (
    "<script>alert(1)</script>",
    "<script>console.error('xss-script-ran')</script>",
    "<img src=x onerror=\"console.error('xss-img-ran')\">",
)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    from tests.dashboards.conftest import realistic_sweep

    base = realistic_sweep(40)
    act = ParamInfo("model.activation", "choice", categories=INJECTED)
    trials = tuple(
        t.__class__(**{**t.__dict__, "params": {**t.params, act.path: INJECTED[i % len(INJECTED)]}})
        for i, t in enumerate(base.trials)
    )
    sweep = base.__class__(
        **{**base.__dict__, "trials": trials, "parameters": (*base.parameters, act), "name": "browser <b>check</b>"}
    )
    out = tmp_path_factory.mktemp("browser")
    build_report(sweep, out / "report" / "report.html", out / "report" / "hiplot.html")
    return out


def test_report_renders_every_figure_without_console_errors(report_dir):
    page = report_dir / "report" / "report.html"
    dom, console = chromium("--dump-dom", page.as_uri(), cwd=report_dir)
    assert console == [], f"console messages: {console}"
    for div_id in FIGURES:
        match = re.search(rf'<div id="{div_id}" class="([^"]*)"', dom)
        assert match and "js-plotly-plot" in match.group(1), f"{div_id} was not rendered by plotly"
    assert dom.count('class="main-svg"') >= len(FIGURES)
    assert "gl-canvas" in dom  # the parallel coordinates' WebGL lines
    for markup in INJECTED:  # text everywhere, never an element (nothing ran: the console is empty)
        assert markup not in dom
    assert '<img src="x"' not in dom


def test_hiplot_page_renders_without_console_errors(report_dir):
    page = report_dir / "report" / "hiplot.html"
    dom, console = chromium("--dump-dom", page.as_uri(), cwd=report_dir)
    assert console == [], f"console messages: {console}"
    assert "<svg" in dom and "model.activation" in dom


def test_screenshot_is_saved(report_dir, tmp_path):
    page = report_dir / "report" / "report.html"
    shot = screenshot(page.as_uri(), tmp_path / "report-fixture.png", size=(1300, 5200))
    assert shot.stat().st_size > 50_000  # a blank page is a few kB


def test_hiplot_draws_a_two_hundred_category_column(tmp_path, make_trial, make_sweep):
    from dashboards.hiplot_page import write_hiplot_page
    from dashboards.table import trials_table

    trials = [make_trial(f"t{i}", {"model.vocab": f"w{i}", "lr": i / 1000}, 0.1 + i / 1000) for i in range(200)]
    page = write_hiplot_page(trials_table(make_sweep(trials, parameters=())), tmp_path / "hiplot.html")
    dom, console = chromium("--dump-dom", page.as_uri(), cwd=tmp_path)
    assert console == [], f"console messages: {console}"
    axes = re.findall(r'class="label-name[^>]*>([^<]*)', dom)
    assert "model.vocab" in axes and "lr" in axes  # HiPlot alone hides a column with > 80 categories
    assert "trial_id" not in axes
