"""Parallel coordinates of the trials: one axis per varied parameter plus the metric.

Plotly's parallel coordinates have neither log nor categorical axes, so the info step maps
log-scaled parameters to log10 values with tick labels in original units, and categories to
integers with their full text as tick labels.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, NamedTuple

import plotly.graph_objects as go

from dashboards._format import add_empty_note, metric_title, plotly_text, trial_metric, value_label
from dashboards.table import param_paths
from ludwig_hpo.results import ParamInfo, SweepResult, TrialRecord

_MISSING = object()  # a trial without the parameter
COLOR_SCALE = "Blues"  # light = worse, dark = better once the direction is applied


class ParallelAxis(NamedTuple):
    """One vertical axis.

    Attributes:
        label: the parameter's dotted path, or the metric's name for the last axis.
        values: one number per drawn trial (log10 of the value on log axes, the category's
            index on categorical axes; NaN where a trial lacks the parameter).
        tickvals: positions of the ticks in ``values`` units, or None for plotly's own.
        ticktext: the tick labels in original units / full category text, or None.
        range: (low, high) of the axis in ``values`` units.
    """

    label: str
    values: list[float]
    tickvals: list[float] | None
    ticktext: list[str] | None
    range: tuple[float, float]


class ParallelCoordinatesInfo(NamedTuple):
    """What the parallel coordinates figure draws.

    Attributes:
        axes: the varied parameters in declaration order, then the metric (empty when no
            trial has a metric).
        trial_ids: the drawn trials, worst first, so that the best lines are drawn on top;
            aligned with each axis' ``values``.
        metric_values: the colour of each line: ``objective_best`` (else
            ``objective_last``) of each drawn trial.
        metric_title: the metric with its direction, e.g. ``"validation/label/loss (lower
            is better)"``.
        reversescale: True when low metric values are better (minimize), so the better
            end of the colour scale is always the dark one.
        fixed_params: parameters with a single value among the drawn trials, dotted path to
            the value's text; listed, not drawn.
        excluded: trials not drawn because they have no finite metric, counted by status.
    """

    axes: list[ParallelAxis]
    trial_ids: list[str]
    metric_values: list[float]
    metric_title: str
    reversescale: bool
    fixed_params: dict[str, str]
    excluded: dict[str, int]


def parallel_coordinates_info(result: SweepResult) -> ParallelCoordinatesInfo:
    """Build the axes of the parallel coordinates plot of ``result``'s trials.

    Trials without a finite metric (failed, or running with nothing reported) are left
    out and counted in ``excluded``. A parameter with one distinct value among the drawn
    trials goes to ``fixed_params`` instead of an axis.

    Raises:
        ValueError: a log-scaled parameter has a value <= 0.
    """
    drawn: list[tuple[TrialRecord, float]] = []
    excluded: Counter[str] = Counter()
    for trial in result.trials:
        metric = trial_metric(trial)
        if metric is None:
            excluded[trial.status] += 1
        else:
            drawn.append((trial, metric))
    # Worst first: plotly draws later lines on top, so the best trials stay visible.
    drawn.sort(key=lambda tm: tm[1], reverse=result.goal == "minimize")
    trials = [t for t, _ in drawn]
    metrics = [m for _, m in drawn]

    axes: list[ParallelAxis] = []
    fixed: dict[str, str] = {}
    if trials:
        declared = {p.path: p for p in result.parameters}
        for path in param_paths(result):
            info = declared.get(path, ParamInfo(path=path, space="unknown"))
            values = [t.params.get(path, _MISSING) for t in trials]
            present = [v for v in values if v is not _MISSING]
            labels = {value_label(v) for v in present}
            if len(labels) <= 1:
                fixed[path] = labels.pop() if labels else "(not set)"
                continue
            axes.append(_param_axis(info, values, [t.trial_id for t in trials]))
        axes.append(_numeric_axis(result.metric, metrics))

    return ParallelCoordinatesInfo(
        axes=axes,
        trial_ids=[t.trial_id for t in trials],
        metric_values=metrics,
        metric_title=metric_title(result),
        reversescale=result.goal == "minimize",
        fixed_params=fixed,
        excluded=dict(excluded),
    )


def parallel_coordinates_figure(info: ParallelCoordinatesInfo) -> go.Figure:
    """Draw ``info`` as a ``go.Parcoords`` figure, 520 px high.

    With no drawn trial the figure holds only an annotation saying why.
    """
    n = len(info.trial_ids)
    notes = [f"{n} trial{'s' if n != 1 else ''} drawn"] if n else []
    if info.fixed_params:
        fixed = ", ".join(f"{k} = {v}" for k, v in info.fixed_params.items())
        notes.append(f"Fixed: {fixed}")
    if info.excluded:
        counts = ", ".join(f"{c} {s.lower()}" for s, c in sorted(info.excluded.items()))
        notes.append(f"Not drawn (no metric): {counts}")

    fig = go.Figure()
    fig.update_layout(
        title={"text": "Parallel coordinates"},
        height=520,
        margin={"l": 80, "r": 40, "t": 100, "b": 70},
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
                    "colorscale": COLOR_SCALE,
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


def _param_axis(info: ParamInfo, values: list[Any], trial_ids: list[str]) -> ParallelAxis:
    present = [v for v in values if v is not _MISSING]
    if info.categories is not None or not all(_is_number(v) for v in present):
        return _categorical_axis(info, values)
    numbers = [math.nan if v is _MISSING else float(v) for v in values]
    if info.log:
        for value, trial_id in zip(numbers, trial_ids, strict=True):
            if not math.isnan(value) and value <= 0:
                raise ValueError(
                    f"a log-scaled parameter must be > 0, but {info.path!r} = {value!r} "
                    f"in trial {trial_id!r}"
                )
        bounds = [b for b in (info.lower, info.upper) if b is not None and b > 0]
        return _log_axis(info.path, numbers, bounds)
    if all(isinstance(v, int) for v in present):
        return _integer_axis(info.path, numbers)
    return _numeric_axis(info.path, numbers)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric_axis(label: str, values: list[float]) -> ParallelAxis:
    return ParallelAxis(label, values, None, None, _extent(values))


def _integer_axis(label: str, values: list[float]) -> ParallelAxis:
    low, high = _extent(values)
    if high - low > 12:  # plotly's own ticks read better than a crowd of integers
        return ParallelAxis(label, values, None, None, (low, high))
    ticks = list(range(math.ceil(low), math.floor(high) + 1))
    return ParallelAxis(
        label, values, [float(t) for t in ticks], [str(t) for t in ticks], (low, high)
    )


def _categorical_axis(info: ParamInfo, values: list[Any]) -> ParallelAxis:
    # Declared categories first, in declaration order; anything else a trial used after.
    labels: list[str] = []
    for category in info.categories or ():
        if (label := value_label(category)) not in labels:
            labels.append(label)
    used = sorted({value_label(v) for v in values if v is not _MISSING} - set(labels))
    labels.extend(used)
    index = {label: i for i, label in enumerate(labels)}
    mapped = [math.nan if v is _MISSING else float(index[value_label(v)]) for v in values]
    top = max(len(labels) - 1, 1)
    return ParallelAxis(
        info.path, mapped, [float(i) for i in range(len(labels))], labels, (0.0, float(top))
    )


def _log_axis(label: str, values: list[float], bounds: list[float]) -> ParallelAxis:
    """Values on log10, spanning the data and the declared bounds (where the trials
    landed in the space shows), with ticks at decades, else 1-2-5, else 1..9 steps."""
    logs = [math.log10(v) if not math.isnan(v) else math.nan for v in values]
    low, high = _extent(logs + [math.log10(b) for b in bounds])
    ticks: list[tuple[int, int]] = []  # (mantissa, exponent)
    for mantissas, enough in (((1,), 3), ((1, 2, 5), 2), (tuple(range(1, 10)), 2)):
        ticks = [
            (m, e)
            for e in range(math.floor(low) - 1, math.ceil(high) + 1)
            for m in mantissas
            if low - 1e-9 <= math.log10(m) + e <= high + 1e-9
        ]
        if len(ticks) >= enough:
            break
    tickvals = [math.log10(m) + e for m, e in ticks]
    plain = all(-2 <= e <= 3 for _, e in ticks)
    ticktext = [_decade_label(m, e, plain) for m, e in ticks]
    if len(ticks) < 2:  # a very narrow range: label its ends
        tickvals = [low, high]
        ticktext = [f"{10**low:.3g}", f"{10**high:.3g}"]
    return ParallelAxis(label, logs, tickvals, ticktext, (low, high))


def _decade_label(mantissa: int, exponent: int, plain: bool) -> str:
    if plain:
        return f"{mantissa * 10.0**exponent:g}"
    return f"{mantissa}e{exponent}"


def _extent(values: list[float]) -> tuple[float, float]:
    finite = [v for v in values if not math.isnan(v)]
    low, high = min(finite), max(finite)
    if low == high:  # one trial: give the axis some height
        pad = abs(low) * 0.05 or 0.5
        return low - pad, high + pad
    return low, high


__all__ = [
    "ParallelAxis",
    "ParallelCoordinatesInfo",
    "parallel_coordinates_figure",
    "parallel_coordinates_info",
]
