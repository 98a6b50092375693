"""Parallel coordinates of the trials: one axis per varied parameter plus the metric.

Plotly's parallel coordinates have neither log nor categorical axes, so the info step maps
log-scaled parameters to log10 values with tick labels in original units, and categories to
integers with their full text as tick labels. Parameter axes are ordered by importance, the
most important next to the metric axis on the right; trials without a metric (failed, or
running with nothing reported yet) are drawn grey on a "no metric" tick of the metric axis,
and a status axis (completed / stopped early / failed / interrupted / running, the words of
``TrialRecord.label``) lets them be filtered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import plotly.graph_objects as go

from dashboards._format import LABEL_ORDER, add_empty_note, metric_title, plotly_text, trial_metric, value_label
from dashboards.parallel_axes import (
    MISSING_VALUE,
    NO_METRIC_LABEL,
    ParallelAxis,
    metric_axis,
    param_axis,
)
from dashboards.table import param_paths
from ludwig_hpo.results import ParamInfo, SweepResult, TrialRecord

# Blues without its near-white end, so the worst lines stay visible on white:
# light = worse, dark = better once the direction is applied
_BLUES = ("#a9cce3", "#85b6dc", "#6aaed6", "#4292c6", "#2171b5", "#08519c", "#08306b", "#041e45")
COLOR_SCALE: list[list[float | str]] = [[i / (len(_BLUES) - 1), c] for i, c in enumerate(_BLUES)]
NO_METRIC_COLOR = "#c8c8c8"
STATUS_AXIS = "status"


class ParallelCoordinatesInfo(NamedTuple):
    """What the parallel coordinates figure draws.

    Attributes:
        axes: the status axis (when trials differ in status), the varied parameters from
            least to most important (declaration order without importances), then the
            metric (empty when no trial has a metric).
        trial_ids: the drawn trials: those without a metric first, then the scored ones
            worst first, so that the best lines are drawn on top; aligned with each axis'
            ``values``.
        metric_values: the colour of each line: ``objective_best`` (else
            ``objective_last``) of each drawn trial; ``no_metric_value`` for a trial without.
        metric_title: the metric with its direction, e.g. ``"validation/label/loss (lower
            is better)"``.
        reversescale: True when low metric values are better (minimize), so the better
            end of the colour scale is always the dark one.
        fixed_params: parameters with a single value among the drawn trials, dotted path to
            the value's text; listed, not drawn.
        excluded: trials without a finite metric, counted by state label (drawn at
            ``no_metric_value`` in grey).
        no_metric_value: where trials without a metric sit on the metric axis (beyond
            its worse end), or None when every drawn trial has a metric.
        statuses: the state label of each drawn trial (``TrialRecord.label``).
        notes: extra remarks (e.g. which categories are labelled on a crowded axis).
    """

    axes: list[ParallelAxis]
    trial_ids: list[str]
    metric_values: list[float]
    metric_title: str
    reversescale: bool
    fixed_params: dict[str, str]
    excluded: dict[str, int]
    no_metric_value: float | None = None
    statuses: list[str] = []
    notes: list[str] = []


def parallel_coordinates_info(result: SweepResult, importance: list[str] | None = None) -> ParallelCoordinatesInfo:
    """Build the axes of the parallel coordinates plot of ``result``'s trials.

    Args:
        result: the sweep.
        importance: parameter paths, most important first (e.g. from
            :func:`dashboards.importance.importance_info`); the parameter axes are laid out
            so that the most important one stands next to the metric. Paths not listed
            keep declaration order, farthest from the metric.

    Trials without a finite metric (failed, or running with nothing reported) are drawn
    at ``no_metric_value`` and counted in ``excluded``; with no scored trial at all
    nothing is drawn. A parameter with one distinct value among the drawn trials goes to
    ``fixed_params`` instead of an axis.

    Raises:
        ValueError: a log-scaled parameter has a value <= 0.
    """
    scored: list[tuple[TrialRecord, float]] = []
    unscored: list[TrialRecord] = []
    excluded: Counter[str] = Counter()
    for trial in result.trials:
        metric = trial_metric(trial)
        if metric is None:
            excluded[trial.label] += 1
            unscored.append(trial)
        else:
            scored.append((trial, metric))
    if not scored:
        unscored = []
    # Worst first: plotly draws later lines on top, so the best trials stay visible.
    scored.sort(key=lambda tm: tm[1], reverse=result.goal == "minimize")
    trials = unscored + [t for t, _ in scored]
    metrics = [m for _, m in scored]
    no_metric = _no_metric_value(metrics, result.goal) if unscored else None
    colours = [no_metric] * len(unscored) + metrics if no_metric is not None else metrics

    axes: list[ParallelAxis] = []
    fixed: dict[str, str] = {}
    notes: list[str] = []
    if trials:
        statuses = [t.label for t in trials]
        if len(set(statuses)) > 1:
            axes.append(_status_axis(statuses))
        declared = {p.path: p for p in result.parameters}
        rank = {path: i for i, path in enumerate(importance or [])}
        declared_order = param_paths(result)
        # Unranked parameters first (declaration order), then from least to most important,
        # so the most important axis stands beside the metric.
        ordered = sorted(declared_order, key=lambda p: (-rank.get(p, len(rank)), declared_order.index(p)))
        for path in ordered:
            info = declared.get(path, ParamInfo(path=path, space="unknown"))
            values = [t.params.get(path, MISSING_VALUE) for t in trials]
            present = [v for v in values if v is not MISSING_VALUE]
            labels = {value_label(v) for v in present}
            if len(labels) <= 1:
                fixed[path] = labels.pop() if labels else "(not set)"
                continue
            axes.append(param_axis(info, values, [t.trial_id for t in trials]))
        axes.append(metric_axis(result.metric, colours, no_metric, result.goal))
        notes.extend(a.label + ": " + a.note for a in axes if a.note)

    return ParallelCoordinatesInfo(
        axes=axes,
        trial_ids=[t.trial_id for t in trials],
        metric_values=colours,
        metric_title=metric_title(result),
        reversescale=result.goal == "minimize",
        fixed_params=fixed,
        excluded=dict(excluded),
        no_metric_value=no_metric,
        statuses=[t.label for t in trials],
        notes=notes,
    )


def _by_label_order(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda sc: LABEL_ORDER.index(sc[0]) if sc[0] in LABEL_ORDER else len(LABEL_ORDER))


def _no_metric_value(metrics: list[float], goal: str) -> float:
    """A position beyond the worse end of the metric's range (10 % of the span away)."""
    low, high = min(metrics), max(metrics)
    gap = (high - low) * 0.1 or abs(high) * 0.1 or 1.0
    return high + gap if goal == "minimize" else low - gap


def _status_axis(statuses: Sequence[str]) -> ParallelAxis:
    order: list[str] = [s for s in LABEL_ORDER if s in statuses]
    index = {s: i for i, s in enumerate(order)}
    return ParallelAxis(
        STATUS_AXIS,
        [float(index[s]) for s in statuses],
        [float(i) for i in range(len(order))],
        list(order),
        (0.0, float(max(len(order) - 1, 1))),
    )


def parallel_coordinates_figure(info: ParallelCoordinatesInfo) -> go.Figure:
    """Draw ``info`` as a ``go.Parcoords`` figure, 520 px high (more with more than two notes).

    With no drawn trial the figure holds only an annotation saying why.
    """
    n = len(info.trial_ids)
    notes = [f"{n} trial{'s' if n != 1 else ''} drawn"] if n else []
    if info.fixed_params:
        fixed = ", ".join(f"{k} = {v}" for k, v in info.fixed_params.items())
        notes.append(f"Fixed: {fixed}")
    if info.excluded and info.no_metric_value is not None:
        counts = ", ".join(f"{c} {s}" for s, c in _by_label_order(info.excluded))
        notes.append(f"Grey, at '{NO_METRIC_LABEL}': {counts} without a metric")
    elif info.excluded:
        counts = ", ".join(f"{c} {s}" for s, c in _by_label_order(info.excluded))
        notes.append(f"Not drawn (no metric): {counts}")
    notes.extend(info.notes)

    bottom = max(70, 34 + 18 * len(notes))  # room for every note under the axes
    fig = go.Figure()
    fig.update_layout(
        title={"text": "Parallel coordinates"},
        height=450 + bottom,
        margin={"l": 80, "r": 40, "t": 100, "b": bottom},
        paper_bgcolor="white",
        plot_bgcolor="white",
    )
    if not info.axes:
        add_empty_note(fig, "No trial reported a metric, so there is nothing to draw.")
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    else:
        dimensions = []
        for axis in info.axes:
            dim: dict[str, Any] = {
                "label": plotly_text(axis.label),
                "values": axis.values,
                "range": list(axis.range),
            }
            if axis.tickvals is not None:
                dim["tickvals"] = axis.tickvals
                dim["ticktext"] = [plotly_text(t) for t in axis.ticktext or []]
            else:
                dim["tickformat"] = ".4~g"
            dimensions.append(dim)
        fig.add_trace(
            go.Parcoords(
                dimensions=dimensions,
                labelangle=-15 if len(dimensions) > 5 else 0,
                labelside="top",
                domain={"x": [0.0, 0.9]},  # room on the right for the colour bar
                line={
                    "color": info.metric_values,
                    "colorscale": _colour_scale(info),
                    "cmin": min(info.metric_values),
                    "cmax": max(info.metric_values),
                    "reversescale": info.reversescale,
                    "showscale": True,
                    "colorbar": {
                        "title": {"text": plotly_text(info.metric_title), "side": "right"},
                        "x": 0.97,
                        "tickformat": ".4~g",
                    },
                },
            )
        )
    if notes:
        fig.add_annotation(
            text="<br>".join(plotly_text(n) for n in notes),
            x=0,
            y=-0.08,
            xref="paper",
            yref="paper",
            xanchor="left",
            yanchor="top",
            showarrow=False,
            align="left",
            font={"size": 12, "color": "#555"},
        )
    return fig


def _colour_scale(info: ParallelCoordinatesInfo) -> Any:
    """Blues, with a grey end for the trials without a metric.

    The grey sits at the low end of the scale; for a minimized metric plotly reverses the
    scale, and the no-metric value lies above the worst value, so grey stays at the
    worse end either way.
    """
    if info.no_metric_value is None:
        return COLOR_SCALE
    low, high = min(info.metric_values), max(info.metric_values)
    nearest = min((abs(v - info.no_metric_value) for v in info.metric_values if v != info.no_metric_value), default=0.0)
    cut = nearest / (high - low) / 2 if high > low else 0.05
    blues = [(i / (len(_BLUES) - 1), c) for i, c in enumerate(_BLUES)]  # the stops of COLOR_SCALE
    return [[0.0, NO_METRIC_COLOR], [cut, NO_METRIC_COLOR]] + [[cut + (1 - cut) * p, c] for p, c in blues]


__all__ = [
    "ParallelAxis",
    "ParallelCoordinatesInfo",
    "parallel_coordinates_figure",
    "parallel_coordinates_info",
]
