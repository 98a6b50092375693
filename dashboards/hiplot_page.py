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


def write_hiplot_page(table: pd.DataFrame, path: Path) -> Path:
    """Write ``table`` (see :func:`dashboards.table.trials_table`) as a HiPlot page at
    ``path``, atomically, and return ``path``. The page needs no network.

    Raises:
        ImportError: hiplot is not installed.
        OSError: the page could not be written.
    """
    try:
        import hiplot
    except ImportError as err:  # pragma: no cover - hiplot is a dependency
        raise ImportError("the HiPlot page needs hiplot: pip install hiplot") from err
    rows = hiplot_rows(table)
    page = _escape_payload(hiplot.Experiment.from_iterable(rows).to_html())
    if page is None:
        safe_rows = [
            {k: v.replace("<", "\u2039") if isinstance(v, str) else v for k, v in row.items()}
            for row in rows
        ]
        page = hiplot.Experiment.from_iterable(safe_rows).to_html()
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
