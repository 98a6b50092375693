"""Optimization history: each trial's metric in start order and the best so far."""

from __future__ import annotations

import math
from typing import NamedTuple

import plotly.graph_objects as go

from dashboards._format import LABEL_COLOURS, LABEL_ORDER, add_empty_note, metric_title, plotly_text, trial_metric
from dashboards.scale import add_scale_toggle
from ludwig_hpo.results import SweepResult


class HistoryInfo(NamedTuple):
    """What the optimization history draws; the lists are aligned, one item per trial
    with a finite metric, in start order.

    Attributes:
        trial_numbers: 1-based position of the trial in the sweep's start order (trials
            without a metric leave gaps).
        trial_ids: the trials' ids.
        statuses: the trials' states as users read them (``TrialRecord.label``: completed,
            stopped early, interrupted, running).
        values: ``objective_best`` (else ``objective_last``) of each trial.
        best_so_far: the best value among this and the earlier trials, by the goal.
        metric_title: the metric with its direction.
        n_without_metric: trials left out because they have no finite metric.
    """

    trial_numbers: list[int]
    trial_ids: list[str]
    statuses: list[str]
    values: list[float]
    best_so_far: list[float]
    metric_title: str
    n_without_metric: int


def history_info(result: SweepResult) -> HistoryInfo:
    """Collect each trial's metric in start order and the running best (by ``result.goal``)."""
    better = min if result.goal == "minimize" else max
    numbers: list[int] = []
    ids: list[str] = []
    statuses: list[str] = []
    values: list[float] = []
    best: list[float] = []
    missing = 0
    for number, trial in enumerate(result.trials, start=1):
        value = trial_metric(trial)
        if value is None:
            missing += 1
            continue
        numbers.append(number)
        ids.append(trial.trial_id)
        statuses.append(trial.label)
        values.append(value)
        best.append(better(best[-1], value) if best else value)
    return HistoryInfo(numbers, ids, statuses, values, best, metric_title(result), missing)


def history_figure(info: HistoryInfo) -> go.Figure:
    """Draw ``info``: one marker per trial (coloured by state) and a best-so-far step line.
    The metric axis is logarithmic when the values span a decade, with buttons to switch
    (:func:`dashboards.scale.add_scale_toggle`).

    With no trial to draw the figure holds only an annotation saying why.
    """
    fig = go.Figure()
    fig.update_layout(
        title={"text": "Optimization history"},
        height=420,
        margin={"l": 70, "r": 30, "t": 60, "b": 60},
        # integer ticks only: at most ~10 of them, on whole trial numbers
        xaxis={
            "title": {"text": "trial # (start order)"},
            "tick0": 1,
            "dtick": max(1, math.ceil(len(info.values) / 10)),
        },
        yaxis={"title": {"text": plotly_text(info.metric_title)}},
        plot_bgcolor="white",
        paper_bgcolor="white",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"},
    )
    fig.update_xaxes(gridcolor="#eee", zeroline=False)
    fig.update_yaxes(gridcolor="#eee", zeroline=False)
    if not info.values:
        add_empty_note(fig, "No trial reported a metric, so there is no history to draw.")
        return fig
    add_scale_toggle(fig, info.values)
    # The best-so-far line goes first, under the markers it steps through.
    fig.add_trace(
        go.Scatter(
            x=info.trial_numbers,
            y=info.best_so_far,
            mode="lines",
            line={"shape": "hv", "color": "#d62728", "width": 2},
            name="best so far",
            hovertemplate="best so far after #%{x}: %{y:.4g}<extra></extra>",
        )
    )
    for status in [s for s in LABEL_ORDER if s in info.statuses]:
        idx = [i for i, s in enumerate(info.statuses) if s == status]
        fig.add_trace(
            go.Scatter(
                x=[info.trial_numbers[i] for i in idx],
                y=[info.values[i] for i in idx],
                mode="markers",
                name=status,
                marker={"size": 8, "color": LABEL_COLOURS[status]},
                customdata=[plotly_text(info.trial_ids[i]) for i in idx],
                hovertemplate="trial %{customdata}<br>#%{x}: %{y:.4g}<extra></extra>",
            )
        )
    return fig
