"""Where a dataset's rows came from, so that every data error names the file and the rows the
way a person finds them there: the line numbers of a CSV/TSV file (its header is line 1), or
1-based data row numbers of any other source (a Parquet file, a bundled dataset).

Runs in the driver, and only on the way to an error (the line numbers are read then).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

#: ``DataFrame.attrs`` key under which :func:`~ludwig_hpo.data.sources.load_dataframe` records
#: the file (or ``sklearn:<name>``) the rows were read from.
SOURCE_ATTR = "ludwig_hpo.source"
#: Rows named in one message; the rest are counted ("and 12 more").
SHOWN_ROWS = 3


@dataclass(frozen=True)
class DataOrigin:
    """The dataset file the rows of a DataFrame were read from.

    Attributes:
        source: the file's path (as resolved) or ``sklearn:<name>``; None for a DataFrame
            built in code (messages then say "row", 1-based).
        separator: the delimiter of a CSV (``,``) or TSV (``\\t``) file, whose rows are named by
            line number; None for other sources.
        kept: when the rows were sampled or some dropped, each remaining row's position in the
            file's rows (so messages still name the file's lines); None: all rows, in order.
    """

    source: str | None = None
    separator: str | None = None
    kept: np.ndarray | None = field(default=None, compare=False)

    @classmethod
    def of(cls, df: pd.DataFrame) -> DataOrigin:
        """The origin :func:`~ludwig_hpo.data.sources.load_dataframe` recorded on ``df`` (none
        for a DataFrame built otherwise)."""
        source = df.attrs.get(SOURCE_ATTR)
        if not isinstance(source, str):
            return cls()
        suffix = Path(source).suffix.lower()
        sep = {".csv": ",", ".tsv": "\t"}.get(suffix) if not source.startswith("sklearn:") else None
        return cls(source, sep)

    def subset(self, positions: np.ndarray) -> DataOrigin:
        """The origin of ``df.iloc[positions]`` (a sample, or rows left after dropping). Pure."""
        pos = np.asarray(positions, dtype=np.int64)
        return DataOrigin(self.source, self.separator, pos if self.kept is None else self.kept[pos])

    def rows(self, positions: Sequence[int] | np.ndarray | int | np.integer) -> str:
        """``positions`` (0-based positions in the DataFrame, ascending) as the file counts them:
        ``"line 5"``, ``"lines 5, 9, 14 and 2 more"`` for a CSV/TSV file (the header is line 1;
        a quoted value spanning lines is counted), else ``"data row 4"``, ``"data rows 4, 8"``
        (1-based)."""
        pos = [int(positions)] if isinstance(positions, int | np.integer) else [int(p) for p in positions]
        if self.kept is not None:
            pos = sorted(int(self.kept[p]) for p in pos)
        shown, rest = pos[:SHOWN_ROWS], len(pos) - SHOWN_ROWS
        lines = self._lines(shown) if self.separator is not None else None
        if lines is not None:
            word, counted = ("line" if len(pos) == 1 else "lines"), lines
        else:
            word, counted = ("data row" if len(pos) == 1 else "data rows"), [p + 1 for p in shown]
        text = f"{word} {', '.join(str(n) for n in counted)}"
        return text + (f" and {rest} more" if rest > 0 else "")

    def _lines(self, positions: list[int]) -> list[int] | None:
        """The file's line number at which each data row starts (pandas skips blank lines, so
        they are skipped here too); None when the file cannot be read again."""
        assert self.source is not None and self.separator is not None
        wanted, found = set(positions), {}
        try:
            with open(self.source, newline="", encoding="utf-8-sig") as f:
                reader = csv.reader(f, delimiter=self.separator)
                start, row = 1, -1  # the header is row -1
                for record in reader:
                    if record:  # a blank line is no row
                        if row in wanted:
                            found[row] = start
                            if len(found) == len(wanted):
                                break
                        row += 1
                    start = reader.line_num + 1
        except (OSError, UnicodeDecodeError, csv.Error):
            return None
        if len(found) != len(wanted):
            return None
        return [found[p] for p in positions]
