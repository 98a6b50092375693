"""The trials table as an interactive HiPlot page (offline, one self-contained file).

HiPlot infers each column's scale from its values; the page sets the ones it gets wrong:
whole-number columns with few values (``epochs``, a ``choice`` of integers, ``batch_size``)
become categorical, so their ticks are the values and never 1.5 (as right-aligned text, since
HiPlot orders categories, and its row ids, as text); a log-scaled parameter gets
a log axis; the states get the report's colours; the ids (``trial_id``, HiPlot's own ``uid``/``from_uid``) are not drawn as axes
(they are noise, sorted as strings), and the table hides HiPlot's ids. Floats are rounded to
:data:`SIGNIFICANT_DIGITS` significant digits, as in the report. The parallel plot gets a
wider left margin so the first axis' labels are not cut off.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dashboards._format import LABEL_COLOURS, value_label
from dashboards._write import write_text_atomic
from ludwig_hpo.results import ParamInfo

#: Floats on the HiPlot page keep this many significant digits (the report shows 4).
SIGNIFICANT_DIGITS = 4
#: A column of whole numbers with at most this many distinct values is drawn as categories.
MAX_INTEGER_CATEGORIES = 12
#: Columns that identify a row: never an axis of the parallel plot.
ID_COLUMNS = ("uid", "from_uid", "trial_id")
#: Columns drawn first, when present (short tick labels).
FIRST_COLUMNS = ("epochs",)
#: HiPlot's own row ids: hidden in its table too.
HIPLOT_ID_COLUMNS = ("uid", "from_uid")
# HiPlot's parallel plot keeps a 10 px left margin ([top, right, bottom, left]); the first
# axis' tick labels are drawn left of it and were cut off.
_PPLOT_MARGIN = "n.m=[80,40,10,10]"
_PPLOT_MARGIN_WIDE = "n.m=[80,40,10,70]"

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


def column_types(table: pd.DataFrame, parameters: Sequence[ParamInfo] = ()) -> dict[str, str]:
    """The HiPlot value type (``"categorical"``, ``"numericlog"``) of each column whose
    inferred type would be wrong (see the module's docstring). Pure."""
    declared = {p.path: p for p in parameters}
    out: dict[str, str] = {}
    for column in table.columns:
        name = str(column)
        if name in ID_COLUMNS:
            continue
        values = [v for v in (_hiplot_value(v) for v in table[column]) if v is not None]
        info = declared.get(name)
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if info is not None and info.log and numbers and min(numbers) > 0:
            out[name] = "numericlog"
        elif (info is not None and info.categories is not None) or (
            values
            and len(numbers) == len(values)
            and all(float(v).is_integer() for v in numbers)
            and len(set(numbers)) <= MAX_INTEGER_CATEGORIES
        ):
            out[name] = "categorical"
    return out


def write_hiplot_page(table: pd.DataFrame, path: Path, parameters: Sequence[ParamInfo] = ()) -> Path:
    """Write ``table`` (see :func:`dashboards.table.trials_table`) as a HiPlot page at
    ``path``, atomically, and return ``path``. The page needs no network. Categorical
    columns with more than :data:`HIPLOT_CATEGORICAL_LIMIT` values are forced visible
    (HiPlot would hide them); :func:`hiplot_notes` says so for the report. ``parameters``
    (the search space) gives log axes to log-scaled parameters and categories to choices.

    Raises:
        ImportError: hiplot is not installed.
        OSError: the page could not be written.
    """
    try:
        import hiplot
    except ImportError as err:  # pragma: no cover - hiplot is a dependency
        raise ImportError("the HiPlot page needs hiplot: pip install hiplot") from err
    if table.empty:  # HiPlot refuses an experiment without a row
        write_text_atomic(Path(path), _EMPTY_PAGE)
        return Path(path)
    types = column_types(table, parameters)
    rows = _sortable_rows(hiplot_rows(table), [c for c, kind in types.items() if kind == "categorical"])
    crowded = crowded_columns(table)
    # Left to right: a column with short labels first (the first axis' labels stand left of it,
    # in the margin), then the parameters, the metric and the state. HiPlot lays its "order"
    # out from the right.
    first = [c for c in FIRST_COLUMNS if c in table.columns]
    left_to_right = first + [str(c) for c in reversed(table.columns) if str(c) not in first]
    order = left_to_right[::-1]

    def page_of(rows: list[dict[str, Any]]) -> str:
        exp = hiplot.Experiment.from_iterable(rows)
        for column, kind in types.items():
            exp.parameters_definition[column].type = hiplot.ValueType(kind)
        if "status" in table.columns:  # the report's colours: "stopped early" is no failure
            exp.parameters_definition["status"].colors = dict(LABEL_COLOURS)
        display = exp.display_data(hiplot.Displays.PARALLEL_PLOT)
        display["hide"] = list(ID_COLUMNS)
        display["order"] = order
        if "objective_best" in table.columns:
            exp.colorby = "objective_best"
        if crowded:  # force high-cardinality categorical columns visible
            display["categoricalMaximumValues"] = max(crowded.values())
        table_display = exp.display_data(hiplot.Displays.TABLE)
        table_display["hide"] = list(HIPLOT_ID_COLUMNS)
        table_display["order_by"] = [["uid", "asc"]]  # start order: the uids are zero-padded
        return exp.to_html().replace(_PPLOT_MARGIN, _PPLOT_MARGIN_WIDE, 1)

    page = _escape_payload(page_of(rows))
    if page is None:
        safe_rows = [{k: v.replace("<", "\u2039") if isinstance(v, str) else v for k, v in row.items()} for row in rows]
        page = page_of(safe_rows)
    write_text_atomic(Path(path), page)
    return Path(path)


_EMPTY_PAGE = (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>HiPlot</title></head>'
    '<body style="font: 14px system-ui, sans-serif; color: #5b6673">No trial yet.</body></html>\n'
)


def _sortable_rows(rows: list[dict[str, Any]], categorical: list[str]) -> list[dict[str, Any]]:
    """``rows`` with zero-padded uids (HiPlot sorts its ids as text: 10 would come before 9)
    and the whole numbers of ``categorical`` columns as right-aligned text (HiPlot orders
    categories as text; padded with spaces, " 9" sorts before "10")."""
    widths = {}
    for column in categorical:
        values = [r.get(column) for r in rows if r.get(column) is not None]
        if values and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            widths[column] = max(len(str(v)) for v in values)
    out = []
    for i, row in enumerate(rows):
        padded = {c: str(row[c]).rjust(w) for c, w in widths.items() if row.get(c) is not None}
        out.append({**row, **padded, "uid": f"{i:06d}"})
    return out


def _hiplot_value(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item") and type(value).__module__ == "numpy":  # numpy scalars
        value = value.item()
    if isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else None
    return value_label(value)


def _escape_payload(page: str) -> str | None:
    """``page`` with "<" escaped in HiPlot's data literal; None if it cannot be found."""
    match = _PAYLOAD.search(page)
    if match is None:
        return None
    literal = match.group(1).replace("<", "\\u003c")
    return page[: match.start(1)] + literal + page[match.end(1) :]
