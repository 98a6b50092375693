"""The trials table as an interactive HiPlot page (offline, one self-contained file)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from dashboards._format import value_label
from dashboards._write import write_text_atomic

# HiPlot puts the experiment into a <script> as a JS string literal without escaping
# "<", so a value holding "</script>" would end the script early. We escape "<" inside
# that literal (JS reads "\u003c" back as "<").
# If a future HiPlot lays its page out differently, "<" in the values is replaced by
# "\u2039" instead, so the page is still safe.
_PAYLOAD = re.compile(r"""eval\('\(' \+ ("(?:[^"\\]|\\.)*") \+ '\)'\)""")


def hiplot_rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of a trials table as HiPlot takes them: lists and dicts become their JSON
    text, NaN and None become None, numbers stay numbers, strings stay strings."""
    rows = []
    for record in table.to_dict(orient="records"):
        rows.append({str(k): _hiplot_value(v) for k, v in record.items()})
    return rows


#: HiPlot hides a categorical column with more distinct values than this (its default).
HIPLOT_CATEGORICAL_LIMIT = 80


def crowded_columns(table: pd.DataFrame) -> dict[str, int]:
    """Text columns (categories, lists, dicts) with more distinct values than HiPlot shows
    by default, with their counts; the page forces them visible. The trial id (unique per
    row) is not a column to draw and stays hidden."""
    out = {}
    for column in table.columns:
        if column == "trial_id":
            continue
        values = [v for v in hiplot_rows(table[[column]]) if v[str(column)] is not None]
        texts = {v[str(column)] for v in values if isinstance(v[str(column)], str)}
        if len(texts) > HIPLOT_CATEGORICAL_LIMIT:
            out[str(column)] = len(texts)
    return out


def constant_columns(table: pd.DataFrame) -> list[str]:
    """Columns with one distinct value (HiPlot does not draw them)."""
    return [str(c) for c in table.columns if len({value_label(v) for v in table[c] if v is not None and v == v}) == 1]


def hiplot_notes(table: pd.DataFrame) -> list[str]:
    """What the HiPlot page does with hard columns, in words, for the report."""
    notes = []
    crowded = crowded_columns(table)
    if crowded:
        listed = ", ".join(f"{c} ({n} values)" for c, n in crowded.items())
        notes.append(
            f"Shown although HiPlot hides categorical columns with more than "
            f"{HIPLOT_CATEGORICAL_LIMIT} values: {listed}."
        )
    constant = constant_columns(table)
    if constant:
        notes.append(f"Not drawn by HiPlot (one value for every trial): {', '.join(constant)}.")
    return notes


def write_hiplot_page(table: pd.DataFrame, path: Path) -> Path:
    """Write ``table`` (see :func:`dashboards.table.trials_table`) as a HiPlot page at
    ``path``, atomically, and return ``path``. The page needs no network. Categorical
    columns with more than :data:`HIPLOT_CATEGORICAL_LIMIT` values are forced visible
    (HiPlot would hide them); :func:`hiplot_notes` says so for the report.

    Raises:
        ImportError: hiplot is not installed.
        OSError: the page could not be written.
    """
    try:
        import hiplot
    except ImportError as err:  # pragma: no cover - hiplot is a dependency
        raise ImportError("the HiPlot page needs hiplot: pip install hiplot") from err
    rows = hiplot_rows(table)
    crowded = crowded_columns(table)

    def page_of(rows: list[dict[str, Any]]) -> str:
        exp = hiplot.Experiment.from_iterable(rows)
        if crowded:  # force high-cardinality categorical columns visible, but not the ids
            display = exp.display_data(hiplot.Displays.PARALLEL_PLOT)
            display["categoricalMaximumValues"] = max(crowded.values())
            display["hide"] = ["uid", "trial_id"]
        return exp.to_html()

    page = _escape_payload(page_of(rows))
    if page is None:
        safe_rows = [{k: v.replace("<", "\u2039") if isinstance(v, str) else v for k, v in row.items()} for row in rows]
        page = page_of(safe_rows)
    write_text_atomic(Path(path), page)
    return Path(path)


def _hiplot_value(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value_label(value)


def _escape_payload(page: str) -> str | None:
    """``page`` with "<" escaped in HiPlot's data literal; None if it cannot be found."""
    match = _PAYLOAD.search(page)
    if match is None:
        return None
    literal = match.group(1).replace("<", "\\u003c")
    return page[: match.start(1)] + literal + page[match.end(1) :]
