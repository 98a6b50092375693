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

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import plotly.graph_objects as go

from dashboards._format import LABEL_ORDER, add_empty_note, metric_title, plotly_text, trial_metric, value_label
from dashboards.table import param_paths
from ludwig_hpo.results import ParamInfo, SweepResult, TrialRecord

_MISSING = object()  # a trial without the parameter
# Blues without its near-white end, so the worst lines stay visible on white:
# light = worse, dark = better once the direction is applied
_BLUES = ("#a9cce3", "#85b6dc", "#6aaed6", "#4292c6", "#2171b5", "#08519c", "#08306b", "#041e45")
COLOR_SCALE: list[list[float | str]] = [[i / (len(_BLUES) - 1), c] for i, c in enumerate(_BLUES)]
NO_METRIC_COLOR = "#c8c8c8"
NO_METRIC_LABEL = "no metric"
STATUS_AXIS = "status"
MAX_TICK_LABELS = 25  # a categorical axis with more categories labels every n-th one


class ParallelAxis(NamedTuple):
    """One vertical axis.

    Attributes:
        label: the parameter's dotted path, or the metric's name for the last axis.
        values: one number per drawn trial (log10 of the value on log axes, the category's
            index on categorical axes; NaN where a trial lacks the parameter).
        tickvals: positions of the ticks in ``values`` units, or None for plotly's own.
        ticktext: the tick labels in original units / full category text, or None.
        range: (low, high) of the axis in ``values`` units.
        note: a remark shown under the figure (e.g. "200 categories, every 8th labelled").
    """

    label: str
    values: list[float]
    tickvals: list[float] | None
    ticktext: list[str] | None
    range: tuple[float, float]
    note: str | None = None


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
            values = [t.params.get(path, _MISSING) for t in trials]
            present = [v for v in values if v is not _MISSING]
            labels = {value_label(v) for v in present}
            if len(labels) <= 1:
                fixed[path] = labels.pop() if labels else "(not set)"
                continue
            axes.append(_param_axis(info, values, [t.trial_id for t in trials]))
        axes.append(_metric_axis(result.metric, colours, no_metric))
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


def _metric_axis(label: str, values: list[float], no_metric: float | None) -> ParallelAxis:
    if no_metric is None:
        return _numeric_axis(label, values)
    scored = [v for v in values if v != no_metric]
    low, high = _extent(scored)
    ticks = _nice_ticks(low, high)
    text = [f"{t:.4g}" for t in ticks]
    return ParallelAxis(
        label,
        values,
        [*ticks, no_metric],
        [*text, NO_METRIC_LABEL],
        (min(low, no_metric), max(high, no_metric)),
    )


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick positions (1, 2, 5 × 10^n steps) inside ``[low, high]``."""
    span = high - low
    raw = span / max(count - 1, 1)
    exponent = math.floor(math.log10(raw)) if raw > 0 else 0
    step = min((m * 10.0**exponent for m in (1, 2, 5, 10) if m * 10.0**exponent >= raw), default=10.0 ** (exponent + 1))
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks or [low, high]


def parallel_coordinates_figure(info: ParallelCoordinatesInfo) -> go.Figure:
    """Draw ``info`` as a ``go.Parcoords`` figure, 520 px high.

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


def _param_axis(info: ParamInfo, values: list[Any], trial_ids: list[str]) -> ParallelAxis:
    present = [v for v in values if v is not _MISSING]
    if info.categories is not None or not all(_is_number(v) for v in present):
        return _categorical_axis(info, values)
    numbers = [math.nan if v is _MISSING else float(v) for v in values]
    if info.log:
        for value, trial_id in zip(numbers, trial_ids, strict=True):
            if not math.isnan(value) and value <= 0:
                raise ValueError(
                    f"a log-scaled parameter must be > 0, but {info.path!r} = {value!r} in trial {trial_id!r}"
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
    return ParallelAxis(label, values, [float(t) for t in ticks], [str(t) for t in ticks], (low, high))


def _categorical_axis(info: ParamInfo, values: list[Any]) -> ParallelAxis:
    # Declared categories first, in declaration order; anything else a trial used after.
    labels: list[str] = []
    for category in info.categories or ():
        if (label := value_label(category)) not in labels:
            labels.append(label)
    used = {value_label(v) for v in values if v is not _MISSING}
    labels.extend(sorted(used - set(labels)))
    note = None
    if len(labels) > MAX_TICK_LABELS:  # a crowded axis shows only the categories tried
        dropped = len(labels) - len(used)
        labels = [label for label in labels if label in used]
        if dropped:
            note = f"{len(labels)} of {len(labels) + dropped} categories tried, only those shown"
    index = {label: i for i, label in enumerate(labels)}
    mapped = [math.nan if v is _MISSING else float(index[value_label(v)]) for v in values]
    top = max(len(labels) - 1, 1)
    ticks = list(range(len(labels)))
    if len(labels) > MAX_TICK_LABELS:
        every = math.ceil(len(labels) / MAX_TICK_LABELS)
        ticks = ticks[::every]
        shown = f"every {every}{_ordinal(every)} labelled"
        note = f"{note}; {shown}" if note else f"{len(labels)} categories, {shown}"
    return ParallelAxis(
        info.path,
        mapped,
        [float(i) for i in ticks],
        [labels[i] for i in ticks],
        (0.0, float(top)),
        note,
    )


def _ordinal(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


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
