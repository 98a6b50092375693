"""Pareto front of two objectives over the trials.

A sweep optimizes one metric, but every trial also has a cost (its wall time): the front of
trials that no other trial beats on both shows what each extra second bought. The front
itself is computed for any two objectives (:func:`pareto_front`), so a sweep with two
metrics uses the same code.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import plotly.graph_objects as go

from dashboards._format import LABEL_COLOURS, LABEL_ORDER, add_empty_note, metric_title, plotly_text, trial_metric
from dashboards.scale import add_scale_toggle
from ludwig_hpo.results import SweepResult


def pareto_front(xs: list[float], ys: list[float], x_goal: str, y_goal: str) -> list[int]:
    """Indices of the non-dominated points, in increasing ``x`` order. Pure.

    A point is dominated when another is at least as good on both objectives and better on
    one (goals ``"minimize"`` / ``"maximize"``). Points with a non-finite value are ignored.
    """
    sx = 1.0 if x_goal == "minimize" else -1.0
    sy = 1.0 if y_goal == "minimize" else -1.0
    points = [
        (sx * x, sy * y, i)
        for i, (x, y) in enumerate(zip(xs, ys, strict=True))
        if math.isfinite(x) and math.isfinite(y)
    ]
    points.sort()
    front: list[int] = []
    best_y = math.inf
    last: tuple[float, float] | None = None
    for x, y, i in points:
        if y < best_y:
            front.append(i)
            best_y = y
            last = (x, y)
        elif last is not None and (x, y) == last:  # an exact tie is not dominated either
            front.append(i)
    return sorted(front, key=lambda i: xs[i])


class ParetoInfo(NamedTuple):
    """What the Pareto figure draws: every scored trial with a known wall time.

    Attributes:
        trial_ids, costs, values, statuses: aligned, one item per trial; ``costs`` in
            seconds of wall time, ``values`` the sweep's metric (for a multi-objective sweep:
            its first and second objective at the trial's last epoch), ``statuses`` the
            trials' state labels (``TrialRecord.label``).
        front: indices (into the lists above) of the non-dominated trials, by cost.
        metric_title: the metric with its direction (the y axis).
        x_title, title: the x axis and the figure's title.
    """

    trial_ids: list[str]
    costs: list[float]
    values: list[float]
    statuses: list[str]
    front: list[int]
    metric_title: str
    x_title: str = "trial wall time (s)"
    title: str = "Metric vs cost (Pareto front)"


def pareto_info(result: SweepResult) -> ParetoInfo:
    """The trials' metric against their wall time (seconds) and the front of both minimized
    cost and the sweep's goal; for a multi-objective sweep, its first two objectives and the
    Pareto set the sweep computed (``result.pareto_trial_ids``, with each objective's goal)."""
    if len(result.objectives) >= 2:
        return _objectives_info(result)
    ids: list[str] = []
    costs: list[float] = []
    values: list[float] = []
    statuses: list[str] = []
    for trial in result.trials:
        value = trial_metric(trial)
        if value is None or trial.wall_time_s is None or not math.isfinite(trial.wall_time_s):
            continue
        ids.append(trial.trial_id)
        costs.append(trial.wall_time_s)
        values.append(value)
        statuses.append(trial.label)
    front = pareto_front(costs, values, "minimize", result.goal)
    return ParetoInfo(ids, costs, values, statuses, front, metric_title(result))


def _objectives_info(result: SweepResult) -> ParetoInfo:
    kx, ky = result.objectives[:2]
    ids: list[str] = []
    xs: list[float] = []
    ys: list[float] = []
    statuses: list[str] = []
    for trial in result.trials:
        last = trial.history[-1].metrics if trial.history else {}
        x, y = last.get(kx), last.get(ky)
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue
        ids.append(trial.trial_id)
        xs.append(float(x))
        ys.append(float(y))
        statuses.append(trial.label)
    on_front = set(result.pareto_trial_ids)
    front = sorted((i for i, tid in enumerate(ids) if tid in on_front), key=lambda i: xs[i])
    return ParetoInfo(ids, xs, ys, statuses, front, ky, x_title=kx, title="Objectives (Pareto front)")


_SYMBOLS = {"stopped early": "circle-open", "interrupted": "x-thin-open", "running": "square-open"}


def pareto_figure(info: ParetoInfo) -> go.Figure:
    """Trials as points (stopped-early ones hollow), the front as a red step line; a log
    metric axis when the values span a decade, with buttons to switch."""
    fig = go.Figure()
    fig.update_layout(
        title={"text": plotly_text(info.title)},
        height=400,
        margin={"l": 70, "r": 30, "t": 40, "b": 60},
        plot_bgcolor="white",
        paper_bgcolor="white",
        xaxis={"title": {"text": plotly_text(info.x_title)}, "gridcolor": "#eee", "zeroline": False},
        yaxis={"title": {"text": plotly_text(info.metric_title)}, "gridcolor": "#eee", "zeroline": False},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"},
    )
    if not info.trial_ids:
        add_empty_note(fig, "No trial has both a metric and a wall time.")
        return fig
    add_scale_toggle(fig, info.values)
    for status in LABEL_ORDER:
        idx = [i for i, s in enumerate(info.statuses) if s == status]
        if idx:
            fig.add_trace(
                go.Scattergl(
                    x=[info.costs[i] for i in idx],
                    y=[info.values[i] for i in idx],
                    mode="markers",
                    name=status,
                    marker={"size": 7, "symbol": _SYMBOLS.get(status, "circle"), "color": LABEL_COLOURS[status]},
                    customdata=[plotly_text(info.trial_ids[i]) for i in idx],
                    hovertemplate="trial %{customdata}<br>%{x:.4g}: %{y:.4g}<extra></extra>",
                )
            )
    fig.add_trace(
        go.Scatter(
            x=[info.costs[i] for i in info.front],
            y=[info.values[i] for i in info.front],
            mode="lines+markers",
            name="Pareto front",
            line={"shape": "hv", "color": "#d62728", "width": 2},
            marker={"size": 9, "color": "#d62728"},
            customdata=[plotly_text(info.trial_ids[i]) for i in info.front],
            hovertemplate="trial %{customdata}<br>%{x:.4g}: %{y:.4g}<extra></extra>",
        )
    )
    return fig


__all__ = ["ParetoInfo", "pareto_figure", "pareto_front", "pareto_info"]
