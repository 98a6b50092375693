"""The report page read back as HTML and plotly JSON: log metric axes with their toggle, the
k-fold interval inside the metric's range, the sortable, filterable, linked trials table, one
state vocabulary, seconds, and the optuna-dashboard figures (slice, contour, rank, importance
with its direction)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dashboards import build_report
from dashboards.contour import contour_info
from dashboards.importance import importance_info
from dashboards.kfold import kfold_info
from dashboards.links import RunIds
from dashboards.report import (
    CONTOUR_DIV_ID,
    CURVES_DIV_ID,
    HISTORY_DIV_ID,
    KFOLD_DIV_ID,
    PARETO_DIV_ID,
    RANK_DIV_ID,
    SLICE_DIV_ID,
    TRIALS_FILTER_ID,
    TRIALS_STATUS_FILTER_ID,
    TRIALS_TABLE_ID,
)
from dashboards.scale import TOGGLE_HEIGHT_PX
from dashboards.slices import rank_info, slice_info
from ludwig_hpo.results import KFoldRecord, ParamInfo
from tests.dashboards.conftest import LAYERS, LR
from tests.dashboards.page import by_id, elements, figure


def _build(result, tmp_path: Path, **kwargs) -> str:
    path = build_report(result, tmp_path / "report.html", tmp_path / "hiplot.html", **kwargs)
    return path.read_text(encoding="utf-8")


def _stuck_at_chance(make_trial, make_sweep):
    """Good trials at 0.09-0.25 and two stuck at chance (~2.3): a range of more than a decade."""
    losses = [0.09, 0.12, 0.25, 0.18, 2.30, 2.31]
    trials = [
        make_trial(f"t{i}", {LR.path: 10.0 ** -(1 + i * 0.5), LAYERS.path: 1 + i % 3}, v) for i, v in enumerate(losses)
    ]
    return make_sweep(trials, parameters=[LR, LAYERS])


# ------------------------------------------------------------------ log axes with a toggle
def test_metric_spanning_a_decade_gets_a_log_axis_and_a_toggle(tmp_path, make_trial, make_sweep):
    page = _build(_stuck_at_chance(make_trial, make_sweep), tmp_path)
    for div in (HISTORY_DIV_ID, CURVES_DIV_ID, PARETO_DIV_ID, SLICE_DIV_ID):
        _, layout = figure(page, div)
        assert layout["yaxis"]["type"] == "log", div
        (menu,) = layout["updatemenus"]
        labels = [b["label"] for b in menu["buttons"]]
        assert labels == ["log scale", "linear scale"] and menu["active"] == 0
        assert menu["buttons"][1]["args"][0]["yaxis.type"] == "linear"


def test_the_slice_toggle_sits_under_the_bottom_right_axis_title(tmp_path, make_trial, make_sweep):
    # the bottom row's rightmost panel ends at the figure's right, where the
    # buttons are; its x-axis title ends about 50 px under the plot
    page = _build(_stuck_at_chance(make_trial, make_sweep), tmp_path)
    _, layout = figure(page, SLICE_DIV_ID)
    (menu,) = layout["updatemenus"]
    assert menu["yanchor"] == "top" and menu["y"] == 0.0 and menu["xanchor"] == "right"
    assert menu["pad"]["t"] >= 60, menu["pad"]
    assert layout["margin"]["b"] >= menu["pad"]["t"] + TOGGLE_HEIGHT_PX, layout["margin"]


def test_metric_within_a_decade_stays_linear_with_the_toggle(tmp_path, make_trial, make_sweep):
    trials = [make_trial(f"t{i}", {LR.path: 10.0 ** -(i + 1)}, 0.2 + 0.05 * i) for i in range(4)]
    _, layout = figure(_build(make_sweep(trials, parameters=[LR]), tmp_path), HISTORY_DIV_ID)
    assert layout["yaxis"]["type"] == "linear" and layout["updatemenus"][0]["active"] == 1


def test_no_toggle_when_a_value_is_not_positive(tmp_path, make_trial, make_sweep):
    trials = [make_trial(f"t{i}", {LR.path: 10.0 ** -(i + 1)}, v) for i, v in enumerate([-0.5, 0.1, 2.0])]
    _, layout = figure(_build(make_sweep(trials, parameters=[LR]), tmp_path), HISTORY_DIV_ID)
    assert layout["yaxis"]["type"] == "linear" and "updatemenus" not in layout


# ------------------------------------------------------------------ k-fold interval in the metric's range
def test_loss_interval_is_clipped_at_zero_and_says_so(tmp_path, make_trial, make_sweep):
    trials = [make_trial("t0", {LR.path: 1e-3}, 0.05), make_trial("t1", {LR.path: 1e-2}, 0.3)]
    # k = 3 with a wide spread: mean - t(0.975, 2)·s/√3 is below 0
    kfold = [KFoldRecord(1, "t0", trials[0].params, (0.01, 0.30, 0.02), 0.06, "label/loss")]
    result = make_sweep(trials, kfold=kfold)
    info = kfold_info(result)
    assert info is not None and info.ci_lows[0] == 0.0 and info.ci_clipped == [True]
    assert "clipped to the metric's range [0, ∞)" in info.ci_note
    page = _build(result, tmp_path)
    assert "clipped to the metric&#39;s range [0, ∞) (1 of 1 reached past it)" in page
    data, layout = figure(page, KFOLD_DIV_ID)
    mean = next(t for t in data if t["name"] == "fold mean, 95 % CI")
    assert mean["y"][0] - mean["error_y"]["arrayminus"][0] >= 0  # the bar's lower end
    assert "clipped to [0, ∞)" in mean["customdata"][0]
    assert "within [0, ∞)" in layout["annotations"][0]["text"]


def test_accuracy_interval_stays_within_zero_and_one(make_trial, make_sweep):
    trials = [make_trial("t0", {}, 0.9)]
    kfold = [KFoldRecord(1, "t0", {}, (0.99, 0.70, 0.999), 0.95, "label/accuracy")]
    info = kfold_info(dataclasses.replace(make_sweep(trials, kfold=kfold), goal="maximize"))
    assert info is not None and info.ci_highs[0] == 1.0 and info.domain == (0.0, 1.0)


# ------------------------------------------------------------------ the trials table
def test_table_is_sortable_filterable_with_numeric_sort_keys(tmp_path, sweep):
    page = _build(sweep, tmp_path)
    table = by_id(page, TRIALS_TABLE_ID)
    assert table is not None and "sortable" in table[1]["class"]
    assert by_id(page, TRIALS_FILTER_ID) is not None
    status_filter = by_id(page, TRIALS_STATUS_FILTER_ID)
    assert status_filter is not None and status_filter[0] == "select"
    heads = [a for t, a in elements(page, "th") if "sortable" in a.get("class", "")]
    assert {h["data-type"] for h in heads} == {"num", "text"}
    script = page[page.index(f'id="{TRIALS_TABLE_ID}"') :]
    assert "<script>" in script and "sortBy" in script and "data-sort" in script
    cells = [a for t, a in elements(page, "td") if "data-sort" in a]
    numeric = [a["data-sort"] for a in cells if a["class"] == "num" and a["data-sort"]]
    assert numeric and all(float(v) == float(v) for v in numeric)  # numbers, so 10 sorts after 9
    assert 'src="http' not in page  # the script is inline: the page works offline


def test_rows_link_to_their_mlflow_runs_when_the_ui_is_known(tmp_path, sweep):
    ids = RunIds("7", {t.trial_id: f"run{i:02d}" for i, t in enumerate(sweep.trials)})
    page = _build(sweep, tmp_path, mlflow_ui_url="http://127.0.0.1:5000/", run_ids=ids)
    links = [a["href"] for t, a in elements(page, "a") if "run-link" in a.get("class", "")]
    assert len(links) == len(sweep.trials)
    assert links[0] == "http://127.0.0.1:5000/#/experiments/7/runs/run00"
    plain = _build(sweep, tmp_path, run_ids=ids)  # a SQLite store without a UI: no links
    assert not [a for t, a in elements(plain, "a") if "run-link" in a.get("class", "")]
    # ... and says how to get them
    folder = sweep.output_dir or "DIR"
    assert f"<code>hpo ui {folder}</code>, then <code>hpo report {folder} --mlflow-ui URL</code>" in plain
    assert "--mlflow-ui URL" not in page


def test_long_cells_are_shortened_with_the_full_text_as_tooltip(tmp_path, make_trial, make_sweep):
    long = "x" * 80
    trials = [make_trial("t0", {"model.note": long}, 0.1), make_trial("t1", {"model.note": "short"}, 0.2)]
    page = _build(make_sweep(trials, parameters=()), tmp_path)
    titled = [a for t, a in elements(page, "td") if a.get("title") == long]
    assert len(titled) == 1


def test_times_are_seconds(tmp_path, sweep):
    page = _build(sweep, tmp_path)
    _, layout = figure(page, PARETO_DIV_ID)
    assert layout["xaxis"]["title"]["text"] == "trial wall time (s)"
    assert "(3725.0 s)" in page  # the header's wall time, also in seconds
    assert "wall_time_s" in [c for c in page.split("<th")[1:] if "wall_time_s" in c][0]


# ------------------------------------------------------------------ one state vocabulary
def test_every_state_shown_uses_the_status_label_words(tmp_path, make_trial, make_sweep):
    trials = [
        make_trial("done", {LR.path: 1e-3}, 0.2),
        make_trial("asha", {LR.path: 1e-2}, 0.5, epochs=1, stopped_by="scheduler"),
        make_trial("old", {LR.path: 2e-2}, 0.6, status="KILLED", epochs=1, stopped_by="scheduler"),
        make_trial("cut", {LR.path: 3e-2}, 0.7, status="KILLED", epochs=1, stopped_by="interrupted"),
        make_trial("boom", {LR.path: 4e-2}, None, status="FAILED"),
    ]
    page = _build(make_sweep(trials, parameters=[LR]), tmp_path)
    assert "1 completed" in page and "2 stopped early" in page and "1 interrupted" in page and "1 failed" in page
    for word in ("FINISHED", "KILLED", ">finished<"):
        assert word not in page.split("<script")[0]  # nothing before the first script shows raw statuses
    rows = {a.get("data-status") for t, a in elements(page, "tr") if "data-status" in a}
    assert rows == {"completed", "stopped early", "interrupted", "failed"}
    data, _ = figure(page, HISTORY_DIV_ID)
    colours = {t["name"]: t["marker"]["color"] for t in data if t.get("mode") == "markers"}
    assert set(colours) == {"completed", "stopped early", "interrupted"}
    assert colours["stopped early"] != "#c0392b"  # not the failure red


# ------------------------------------------------------------------ optuna-dashboard figures
def test_slice_contour_and_rank_figures(tmp_path, make_trial, make_sweep):
    result = _stuck_at_chance(make_trial, make_sweep)
    page = _build(result, tmp_path)
    data, layout = figure(page, SLICE_DIV_ID)
    assert [t["name"] for t in data] == [LR.path, LAYERS.path] or [t["name"] for t in data] == [LAYERS.path, LR.path]
    lr_axis = next(layout[f"xaxis{'' if i == 0 else i + 1}"] for i, t in enumerate(data) if t["name"] == LR.path)
    assert lr_axis["type"] == "log"  # a log-scaled parameter on a log axis
    data, _ = figure(page, CONTOUR_DIV_ID)
    assert [t["type"] for t in data] == ["contour", "scatter"]
    data, _ = figure(page, RANK_DIV_ID)
    assert len(data) == 1 and sorted(data[0]["marker"]["color"]) == [1, 2, 3, 4, 5, 6]
    info = slice_info(result)
    assert {p.kind for p in info.params} == {"log", "linear"}
    importance = importance_info(result).params
    contour = contour_info(result, importance)
    assert contour.x is not None and contour.y is not None
    assert [contour.x.path, contour.y.path] == importance[:2]  # the two most important
    assert rank_info(result, importance).ranks[0] == 1  # t0 (0.09) is the best


def test_slice_and_contour_explain_what_is_missing(make_trial, make_sweep):
    one = make_sweep([make_trial("t0", {LR.path: 1e-3}, 0.2), make_trial("t1", {LR.path: 1e-2}, 0.3)], parameters=[LR])
    assert slice_info(one).note is None and len(slice_info(one).params) == 1
    assert "two parameters" in (contour_info(one).note or "")
    assert "two parameters" in (rank_info(one).note or "")


@pytest.mark.parametrize("goal, better", [("minimize", "lower"), ("maximize", "higher")])
def test_importance_gives_the_direction_of_the_effect(make_trial, make_sweep, goal, better):
    # the metric rises with the learning rate
    trials = [
        make_trial(
            f"t{i}", {LR.path: 10.0 ** -(4 - i * 0.5), LAYERS.path: 1 + (i * 7) % 3}, 0.1 + 0.1 * i + 0.01 * (i % 2)
        )
        for i in range(7)
    ]
    info = importance_info(dataclasses.replace(make_sweep(trials, parameters=[LR, LAYERS]), goal=goal))
    i = info.params.index(LR.path)
    rho = info.correlations[i]
    assert rho is not None and rho > 0.9
    assert info.effects[i].startswith(f"{better} is better")


def test_integer_parameters_tick_whole_numbers_and_long_categories_are_shortened(make_trial, make_sweep):
    from dashboards.slices import MAX_TICK_CHARS, axis_layout

    long = ParamInfo(
        "trainer.optimizer", "choice", categories=({"type": "sgd", "momentum": 0.9, "nesterov": True}, "adam")
    )
    trials = [
        make_trial(f"t{i}", {LAYERS.path: 1 + i % 3, long.path: long.categories[i % 2]}, 0.1 * (i + 1))
        for i in range(6)
    ]
    info = slice_info(make_sweep(trials, parameters=[LAYERS, long]))
    layers = next(p for p in info.params if p.path == LAYERS.path)
    assert layers.integer and axis_layout(layers)["dtick"] == 1  # 1, 2, 3: never 1.5
    optimizer = axis_layout(next(p for p in info.params if p.path == long.path))
    assert max(len(t) for t in optimizer["ticktext"]) <= MAX_TICK_CHARS
    assert optimizer["tickvals"] == optimizer["categoryarray"]  # full values, short labels


def test_run_url_takes_the_ui_address_or_a_page_of_it():
    from dashboards.links import run_url

    for ui in ("http://127.0.0.1:5000", "http://127.0.0.1:5000/", "http://127.0.0.1:5000/#/experiments/1"):
        assert run_url(ui, "1", "abc") == "http://127.0.0.1:5000/#/experiments/1/runs/abc"


def test_parallel_coordinates_metric_axis_is_log_when_the_metric_spans_a_decade(make_trial, make_sweep):
    import math

    from dashboards.parallel import parallel_coordinates_info

    result = _stuck_at_chance(make_trial, make_sweep)
    failed = make_trial("boom", {LR.path: 1e-3, LAYERS.path: 1}, None, status="FAILED")
    info = parallel_coordinates_info(dataclasses.replace(result, trials=(*result.trials, failed)))
    metric = info.axes[-1]
    assert metric.note is not None and "log scale" in metric.note
    scored = [v for v, tid in zip(metric.values, info.trial_ids, strict=True) if tid != "boom"]
    assert sorted(scored) == sorted(math.log10(t.objective_best) for t in result.trials)
    assert metric.ticktext[-1] == "no metric" and metric.tickvals[-1] > max(scored)  # beyond the worse end
    assert "0.1" in metric.ticktext or "1" in metric.ticktext  # decade ticks in the metric's units


def test_column_titles_break_after_the_dots_of_a_path(tmp_path, sweep):
    page = _build(sweep, tmp_path)
    assert ">trainer.<wbr>learning_rate</th>" in page
