"""The axes of the parallel coordinates: numeric, integer, log10 (ticks in original units) and
categorical (integers with the categories' full text as tick labels), and the metric's axis
with its "no metric" tick. Pure."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from dashboards._format import value_label
from dashboards.scale import metric_axis_type
from ludwig_hpo.results import ParamInfo

#: A trial without the parameter.
MISSING_VALUE = object()
NO_METRIC_LABEL = "no metric"
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


def metric_axis(label: str, values: list[float], no_metric: float | None, goal: str = "minimize") -> ParallelAxis:
    """The metric's axis: ``values`` (``no_metric`` where a trial has none) on a linear axis,
    or on log10 with decade ticks when the scored values are positive and span a decade
    (:func:`dashboards.scale.metric_axis_type`; plotly's parallel coordinates have no log
    axes, so this one cannot be toggled and says so in its note)."""
    scored = [v for v in values if no_metric is None or v != no_metric]
    if metric_axis_type(scored) == "log":
        return _log_metric_axis(label, values, no_metric, goal)
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


def _log_metric_axis(label: str, values: list[float], no_metric: float | None, goal: str) -> ParallelAxis:
    scored = [v for v in values if no_metric is None or v != no_metric]
    axis = _log_axis(label, scored, [])
    note = "on a log scale: its values span more than a decade"
    if no_metric is None:
        return axis._replace(values=[math.log10(v) for v in values], note=note)
    low, high = axis.range
    gap = (high - low) * 0.1 or 0.1
    where = high + gap if goal == "minimize" else low - gap  # beyond the worse end, as on a linear axis
    logs = [where if v == no_metric else math.log10(v) for v in values]
    return ParallelAxis(
        label,
        logs,
        [*(axis.tickvals or []), where],
        [*(axis.ticktext or []), NO_METRIC_LABEL],
        (min(low, where), max(high, where)),
        note,
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


def param_axis(info: ParamInfo, values: list[Any], trial_ids: list[str]) -> ParallelAxis:
    present = [v for v in values if v is not MISSING_VALUE]
    if info.categories is not None or not all(_is_number(v) for v in present):
        return _categorical_axis(info, values)
    numbers = [math.nan if v is MISSING_VALUE else float(v) for v in values]
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
    used = {value_label(v) for v in values if v is not MISSING_VALUE}
    labels.extend(sorted(used - set(labels)))
    note = None
    if len(labels) > MAX_TICK_LABELS:  # a crowded axis shows only the categories tried
        dropped = len(labels) - len(used)
        labels = [label for label in labels if label in used]
        if dropped:
            note = f"{len(labels)} of {len(labels) + dropped} categories tried, only those shown"
    index = {label: i for i, label in enumerate(labels)}
    mapped = [math.nan if v is MISSING_VALUE else float(index[value_label(v)]) for v in values]
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


__all__ = ["MAX_TICK_LABELS", "MISSING_VALUE", "NO_METRIC_LABEL", "ParallelAxis", "metric_axis", "param_axis"]
