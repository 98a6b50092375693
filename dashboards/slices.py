"""Slice plots (the metric against each parameter) and the rank plot (pairs of the most
important parameters, each trial coloured by its rank), as in optuna-dashboard.

Both start from the scored trials (a finite metric) and the parameters that vary among
them, most important first; a log-scaled parameter goes on a log axis, a categorical one on
a category axis (its values' full text, declared categories first).
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, NamedTuple

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards._format import add_empty_note, metric_title, plotly_text, trial_metric, value_label
from dashboards.scale import TOGGLE_HEIGHT_PX, add_scale_toggle
from dashboards.table import param_paths
from ludwig_hpo.results import ParamInfo, SweepResult

#: Slice plots per row of the figure.
SLICE_COLUMNS = 3
#: The rank plot pairs the most important parameters among this many.
RANK_PARAMS = 3
#: An integer axis spanning at most this many units ticks every whole number (never 1.5).
MAX_INTEGER_TICKS = 12
#: Category tick labels are shortened to this many characters.
MAX_TICK_CHARS = 18
#: The log/linear buttons' top in px under the bottom row, past the x-axis title of its
#: rightmost panel (tick labels and title end about 50 px under the plot).
TOGGLE_BELOW_PX = 64


class ParamValues(NamedTuple):
    """One parameter's value in each scored trial, ready for an axis.

    Attributes:
        path: the dotted path.
        kind: ``"log"``, ``"linear"`` or ``"category"``.
        values: numbers (``"log"``/``"linear"``) or the values' text (``"category"``);
            None where a trial lacks the parameter.
        categories: a category axis' order (declared categories first), else empty.
        integer: every value is a whole number (the axis ticks only whole numbers).
    """

    path: str
    kind: str
    values: list[Any]
    categories: list[str]
    integer: bool = False


class SliceInfo(NamedTuple):
    """What the slice plots draw; lists aligned with the scored trials in start order.

    Attributes:
        params: one :class:`ParamValues` per varied parameter, most important first.
        trial_ids: the scored trials.
        trial_numbers: their 1-based position in the sweep's start order (the colour).
        values: their metric (``objective_best``, else ``objective_last``).
        metric_title: the metric with its direction.
        note: why nothing is drawn, else None.
    """

    params: list[ParamValues]
    trial_ids: list[str]
    trial_numbers: list[int]
    values: list[float]
    metric_title: str
    note: str | None


def ordered_params(result: SweepResult, importance: list[str] | None) -> list[str]:
    """Parameter paths, the ranked ones (most important first) then the rest in declaration order."""
    paths = param_paths(result)
    ranked = [p for p in importance or [] if p in paths]
    return ranked + [p for p in paths if p not in ranked]


def slice_info(result: SweepResult, importance: list[str] | None = None) -> SliceInfo:
    """The scored trials' metric against each parameter that varies among them. Pure."""
    scored = [(n, t, v) for n, t in enumerate(result.trials, start=1) if (v := trial_metric(t)) is not None]
    declared = {p.path: p for p in result.parameters}
    params = []
    for path in ordered_params(result, importance):
        raw = [t.params.get(path) for _, t, _ in scored]
        if len({value_label(v) for v in raw if v is not None}) < 2:
            continue
        params.append(param_values(declared.get(path, ParamInfo(path, "unknown")), raw))
    note = None
    if not scored:
        note = "No trial reported a metric, so there is nothing to draw."
    elif not params:
        note = "No parameter varies among the scored trials."
    return SliceInfo(
        params,
        [t.trial_id for _, t, _ in scored],
        [n for n, _, _ in scored],
        [v for _, _, v in scored],
        metric_title(result),
        note,
    )


def param_values(info: ParamInfo, raw: list[Any]) -> ParamValues:
    """``raw`` values of one parameter as an axis takes them (see :class:`ParamValues`)."""
    present = [v for v in raw if v is not None]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    if info.categories is not None or not numeric:
        order = list(dict.fromkeys(value_label(c) for c in info.categories or ()))
        used = {value_label(v) for v in present}
        order = [c for c in order if c in used] + sorted(used - set(order))
        return ParamValues(info.path, "category", [None if v is None else value_label(v) for v in raw], order)
    numbers = [None if v is None else float(v) for v in raw]
    log = info.log and all(v > 0 for v in numbers if v is not None)
    integer = all(isinstance(v, int) for v in present)
    return ParamValues(info.path, "log" if log else "linear", numbers, [], integer and not log)


def axis_layout(param: ParamValues) -> dict[str, Any]:
    """The plotly axis settings of one parameter's axis."""
    title = {"text": plotly_text(param.path), "font": {"size": 12}}
    if param.kind == "category":
        labels = [plotly_text(c) for c in param.categories]
        return {
            "type": "category",
            "categoryorder": "array",
            "categoryarray": labels,
            "tickvals": labels,
            "ticktext": [short_label(c) for c in labels],
            "title": title,
        }
    if param.integer:
        numbers = [v for v in param.values if v is not None]
        if numbers and max(numbers) - min(numbers) <= MAX_INTEGER_TICKS:
            return {"type": "linear", "dtick": 1, "tick0": 0, "tickformat": "d", "title": title}
    return {"type": param.kind, "title": title}


def short_label(text: str) -> str:
    """A tick label of at most :data:`MAX_TICK_CHARS` characters (the hover shows the full value)."""
    return text if len(text) <= MAX_TICK_CHARS else text[: MAX_TICK_CHARS - 1] + "…"


def _axis_values(param: ParamValues) -> list[Any]:
    return [plotly_text(v) if isinstance(v, str) else v for v in param.values]


def slice_figure(info: SliceInfo) -> go.Figure:
    """One scatter per parameter (x: its value, y: the metric), coloured by trial number,
    :data:`SLICE_COLUMNS` to a row; the metric axes switch between log and linear together."""
    n = len(info.params)
    if info.note or not n:
        fig = go.Figure()
        fig.update_layout(title={"text": "Slice plots"}, height=220, plot_bgcolor="white", paper_bgcolor="white")
        add_empty_note(fig, info.note or "Nothing to draw.")
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return fig
    cols = min(n, SLICE_COLUMNS)
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True, horizontal_spacing=0.04, vertical_spacing=0.22)
    hover = [plotly_text(t) for t in info.trial_ids]
    for i, param in enumerate(info.params):
        row, col = i // cols + 1, i % cols + 1
        fig.add_trace(
            go.Scatter(
                x=_axis_values(param),
                y=info.values,
                mode="markers",
                name=plotly_text(param.path),
                showlegend=False,
                marker={
                    "size": 8,
                    "color": info.trial_numbers,
                    "colorscale": "Blues",
                    "cmin": 1,
                    "cmax": max(info.trial_numbers),
                    "line": {"width": 0.5, "color": "#345"},
                    "showscale": i == 0,
                    "colorbar": {"title": {"text": "trial #", "side": "right"}, "thickness": 12},
                },
                customdata=list(zip(hover, info.trial_numbers, strict=True)),
                hovertemplate="trial %{customdata[0]} (#%{customdata[1]})<br>%{x}: %{y:.4g}<extra></extra>",
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(axis_layout(param), row=row, col=col)
    fig.update_yaxes(title_text=plotly_text(info.metric_title), row=1, col=1)
    fig.update_xaxes(gridcolor="#eee", zeroline=False)
    fig.update_yaxes(gridcolor="#eee", zeroline=False)
    fig.update_layout(
        title={"text": "Slice plots"},
        height=164 + 300 * rows,
        margin={"l": 70, "r": 30, "t": 50, "b": TOGGLE_BELOW_PX + TOGGLE_HEIGHT_PX + 8},
        plot_bgcolor="white",
        paper_bgcolor="white",
    )
    y_axes = ["yaxis" if i == 0 else f"yaxis{i + 1}" for i in range(rows * cols)]
    add_scale_toggle(fig, info.values, axes=y_axes, below_px=TOGGLE_BELOW_PX)
    return fig


class RankInfo(NamedTuple):
    """What the rank plot draws: pairs of the most important parameters.

    Attributes:
        params: the :data:`RANK_PARAMS` most important varied parameters (values aligned
            with ``trial_ids``).
        pairs: indices into ``params`` of each panel's (x, y) parameters.
        trial_ids: the scored trials, in start order.
        ranks: each trial's rank by the metric (1 = best, ties share the better rank).
        values: each trial's metric.
        metric_title: the metric with its direction.
        note: why nothing is drawn, else None.
    """

    params: list[ParamValues]
    pairs: list[tuple[int, int]]
    trial_ids: list[str]
    ranks: list[int]
    values: list[float]
    metric_title: str
    note: str | None


def rank_info(result: SweepResult, importance: list[str] | None = None) -> RankInfo:
    """The rank plot of ``result``: every pair among the most important varied parameters. Pure."""
    slices = slice_info(result, importance)
    params = slices.params[:RANK_PARAMS]
    sign = 1.0 if result.goal == "minimize" else -1.0
    order = sorted(sign * v for v in slices.values)
    ranks = [1 + order.index(sign * v) for v in slices.values]
    note = slices.note
    if note is None and len(params) < 2:
        note = "The rank plot needs two parameters that vary among the scored trials."
    pairs = list(combinations(range(len(params)), 2)) if note is None else []
    return RankInfo(params, pairs, slices.trial_ids, ranks, slices.values, slices.metric_title, note)


def rank_figure(info: RankInfo) -> go.Figure:
    """One scatter per parameter pair, each trial coloured by its rank (dark = best)."""
    if info.note:
        fig = go.Figure()
        fig.update_layout(title={"text": "Rank plot"}, height=220, plot_bgcolor="white", paper_bgcolor="white")
        add_empty_note(fig, info.note)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return fig
    fig = make_subplots(rows=1, cols=len(info.pairs), horizontal_spacing=0.08)
    hover = [plotly_text(t) for t in info.trial_ids]
    for i, (a, b) in enumerate(info.pairs, start=1):
        pa, pb = info.params[a], info.params[b]
        fig.add_trace(
            go.Scatter(
                x=_axis_values(pa),
                y=_axis_values(pb),
                mode="markers",
                showlegend=False,
                name=plotly_text(f"{pa.path} vs {pb.path}"),
                marker={
                    "size": 10,
                    "color": info.ranks,
                    "colorscale": "Blues",
                    "reversescale": True,  # rank 1 (best) darkest
                    "cmin": 1,
                    "cmax": max(info.ranks),
                    "line": {"width": 0.5, "color": "#345"},
                    "showscale": i == 1,
                    "colorbar": {"title": {"text": "rank (1 = best)", "side": "right"}, "thickness": 12},
                },
                customdata=list(zip(hover, info.ranks, info.values, strict=True)),
                hovertemplate="trial %{customdata[0]}: rank %{customdata[1]}, %{customdata[2]:.4g}<extra></extra>",
            ),
            row=1,
            col=i,
        )
        fig.update_xaxes(axis_layout(pa), row=1, col=i)
        fig.update_yaxes(axis_layout(pb), row=1, col=i)
    fig.update_xaxes(gridcolor="#eee", zeroline=False)
    fig.update_yaxes(gridcolor="#eee", zeroline=False)
    fig.update_layout(
        title={"text": "Rank plot"},
        height=400,
        margin={"l": 80, "r": 30, "t": 50, "b": 70},
        plot_bgcolor="white",
        paper_bgcolor="white",
    )
    return fig


__all__ = [
    "ParamValues",
    "RankInfo",
    "SliceInfo",
    "axis_layout",
    "ordered_params",
    "param_values",
    "rank_figure",
    "rank_info",
    "slice_figure",
    "slice_info",
]
