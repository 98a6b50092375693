"""The trials table as the report's page shows it: text, sort keys, alignment and links.

The page sorts and filters the rows with a small inline script (no network): each cell
carries its sort key (``data-sort``: the number for numeric columns, so 10 sorts after 9,
the text otherwise) beside the text shown (numbers to 4 significant digits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import pandas as pd
from markupsafe import Markup, escape

from dashboards._format import format_cell, label_css, plain


class TableCell(NamedTuple):
    """One cell: ``text`` shown, ``sort`` its sort key (``""`` sorts last), ``title`` the
    full value when ``text`` is shortened (else ``""``)."""

    text: str
    sort: str
    title: str


class TableRow(NamedTuple):
    """One trial's row: its cells, CSS classes (state, ``best``), and its MLflow run page
    (``""`` when unknown)."""

    cells: list[TableCell]
    css: str
    link: str


class TableView(NamedTuple):
    """The whole table: column names, ``"num"``/``"text"`` per column, rows in start order,
    and the column titles as HTML that may break after each dot of a dotted path (a narrow
    table: ``trainer.learning_rate`` takes two short lines, not one long one)."""

    columns: list[str]
    align: list[str]
    rows: list[TableRow]
    titles: list[Markup] = []


#: Text longer than this is shortened in its cell (the full value is the cell's tooltip).
MAX_CELL_CHARS = 32


def table_view(table: pd.DataFrame, best_trial_id: str | None, links: Mapping[str, str]) -> TableView:
    """The trials table (:func:`dashboards.table.trials_table`) as the page draws it. Pure.

    Args:
        table: the trials table.
        best_trial_id: highlighted row.
        links: trial id -> MLflow run page; a trial without one has no link.
    """
    columns = [str(c) for c in table.columns]
    align = [_alignment(table[c]) for c in table.columns]
    rows = []
    for record in table.itertuples(index=False):
        values = list(record)
        cells = [_cell(v, a == "num") for v, a in zip(values, align, strict=True)]
        trial_id, status = str(values[0]), str(values[1])
        css = label_css(status) + (" best" if trial_id == best_trial_id else "")
        rows.append(TableRow(cells, css, links.get(trial_id, "")))
    titles = [Markup(".<wbr>").join(escape(part) for part in c.split(".")) for c in columns]
    return TableView(columns, align, rows, titles)


def _cell(value: Any, numeric: bool) -> TableCell:
    text = format_cell(value)
    value = plain(value)
    if numeric:
        missing = value is None or (isinstance(value, float) and math.isnan(value))
        sort = "" if missing else repr(float(value))
    else:
        sort = text
    if len(text) > MAX_CELL_CHARS:
        return TableCell(text[: MAX_CELL_CHARS - 1] + "…", sort, text)
    return TableCell(text, sort, "")


def _alignment(column: Any) -> str:
    """``"num"`` for a column of numbers (right-aligned, sorted as numbers), else ``"text"``."""
    values = [plain(v) for v in column if v is not None and not (isinstance(v, float) and math.isnan(v))]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return "num" if values and numeric else "text"


__all__ = ["MAX_CELL_CHARS", "TableCell", "TableRow", "TableView", "table_view"]
