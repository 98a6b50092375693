"""Turning trial values into readable text, shared by the figures and the page."""

from __future__ import annotations

import html
import json
import math
from typing import Any

from ludwig_hpo.results import SweepResult, TrialRecord
from ludwig_hpo.results.records import STATUS_LABELS, StatusLabel

MISSING = "—"


def value_label(value: Any) -> str:
    """Readable full text of one parameter value or category.

    Strings are shown as they are; everything else as JSON (``true``, ``null``, ``[1, 2]``,
    ``{"a": 1}``) so that lists and dicts read like the sweep file. Tuples read like lists,
    and equal values always get equal labels (dict keys are sorted), so labels can be used
    as keys to compare values that are not hashable.
    """
    value = plain(value)
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError):  # e.g. dict keys of mixed types
        return repr(value)


def plain(value: Any) -> Any:
    """A numpy scalar as the Python number it holds; anything else unchanged."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def _json_default(value: Any) -> Any:
    number = plain(value)
    return str(value) if number is value else number


def format_number(value: float | None, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits, or an em dash for None."""
    value = plain(value)
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return value_label(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}g}"


def format_cell(value: Any) -> str:
    """One trials-table cell: numbers to 4 significant digits, None as an em dash."""
    value = plain(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format_number(value)
    return value_label(value)


def format_duration(seconds: float | None) -> str:
    """Seconds as ``"1 h 02 min 03 s"``, ``"4 min 05 s"`` or ``"12.3 s"``."""
    if seconds is None:
        return MISSING
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    return f"{minutes} min {secs:02d} s"


def plotly_text(text: str) -> str:
    """``text`` escaped for plotly's pseudo-HTML labels (titles, ticks, annotations).

    Plotly interprets a few tags (``<b>``, ``<br>``) and entities in labels; escaping makes
    a user string such as a category value show literally.
    """
    return html.escape(text, quote=False)


def trial_metric(trial: TrialRecord) -> float | None:
    """The value a trial is judged by: ``objective_best``, else ``objective_last``.

    Returns None when the trial reported nothing or a non-finite value (NaN, inf).
    """
    value = trial.objective_best if trial.objective_best is not None else trial.objective_last
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def better_phrase(goal: str) -> str:
    """``"lower is better"`` for minimize, ``"higher is better"`` for maximize."""
    return "lower is better" if goal == "minimize" else "higher is better"


def metric_title(result: SweepResult) -> str:
    """The metric with its direction, e.g. ``"validation/label/loss (lower is better)"``."""
    return f"{result.metric} ({better_phrase(result.goal)})"


#: The range each metric the sweep reports can take: losses and errors are >= 0, accuracy,
#: ROC AUC and the other rates lie in [0, 1], r2 is at most 1. An interval drawn past its
#: metric's range is clipped to it.
METRIC_DOMAINS: dict[str, tuple[float, float]] = {
    "loss": (0.0, math.inf),
    "mae": (0.0, math.inf),
    "mean_squared_error": (0.0, math.inf),
    "mean_absolute_error": (0.0, math.inf),
    "root_mean_squared_error": (0.0, math.inf),
    "root_mean_squared_percentage_error": (0.0, math.inf),
    "mean_absolute_percentage_error": (0.0, math.inf),
    "r2": (-math.inf, 1.0),
    "accuracy": (0.0, 1.0),
    "roc_auc": (0.0, 1.0),
    "precision": (0.0, 1.0),
    "recall": (0.0, 1.0),
    "specificity": (0.0, 1.0),
    "hits_at_k": (0.0, 1.0),
    "jaccard": (0.0, 1.0),
    # model_type llm's text output
    "perplexity": (1.0, math.inf),
    "token_accuracy": (0.0, 1.0),
    "sequence_accuracy": (0.0, 1.0),
    "exact_match": (0.0, 1.0),
    "rouge_l": (0.0, 1.0),
}


def metric_domain(metric: str) -> tuple[float, float]:
    """``(low, high)`` a metric can take, from its last name part (``"label/loss"`` ->
    ``(0, inf)``); ``(-inf, inf)`` for a metric not in :data:`METRIC_DOMAINS`."""
    return METRIC_DOMAINS.get(metric.rsplit("/", 1)[-1], (-math.inf, math.inf))


def domain_text(domain: tuple[float, float]) -> str:
    """``[0, 1]``, ``[0, ∞)`` or ``(−∞, ∞)``."""
    low, high = domain
    left = "(−∞" if math.isinf(low) else f"[{low:g}"
    right = "∞)" if math.isinf(high) else f"{high:g}]"
    return f"{left}, {right}"


def add_empty_note(fig: Any, text: str) -> None:
    """Write ``text`` across the middle of an empty plotly figure (nothing to draw)."""
    fig.add_annotation(
        text=plotly_text(text), x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 16}
    )


#: The order states are listed in (legends, counts, the status axis): the words of
#: :func:`ludwig_hpo.results.records.status_label`, the one vocabulary of console and report.
LABEL_ORDER: tuple[StatusLabel, ...] = STATUS_LABELS

#: One colour per state. "stopped early" is a lighter shade of "completed" (the scheduler
#: stopping a trial is the search working, not a fault); only "failed" is red.
LABEL_COLOURS: dict[str, str] = {
    "completed": "#1f5fa8",
    "stopped early": "#7fa7d6",
    "failed": "#c0392b",
    "interrupted": "#8c8c8c",
    "running": "#e0a030",
}


def label_of(trial: TrialRecord) -> StatusLabel:
    """The word users see for ``trial``'s state (``TrialRecord.label``)."""
    return trial.label


def label_css(label: str) -> str:
    """A CSS class for a state label: ``"stopped early"`` -> ``"stopped-early"``."""
    return label.replace(" ", "-")
