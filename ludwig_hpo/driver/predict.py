"""``hpo predict DIR|MODEL --dataset DATA [-o OUT]``: a raw-row model's predictions of every
row of a CSV or Parquet file, written as CSV (or Parquet for a ``.parquet`` OUT) with Ludwig's
column names (:mod:`ludwig_hpo.model.predictions`), one row per dataset row in order.

Bad rows (a missing value a feature cannot fill, text in a number column, an unreadable image)
are listed one line each and nothing is written (exit 2); with ``--skip-bad-rows`` they are
left out, counted and listed, and the file holds the other rows. The file is written beside
its final name and renamed, so a failed run leaves no half-written file. The CLI process.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console

from ludwig_hpo.errors import DataError

if TYPE_CHECKING:
    from ludwig_hpo.model.raw_rows import BadRow, BadRowsError

#: Bad rows listed on the console; the rest are counted.
SHOWN_BAD_ROWS = 20


def read_rows(dataset: Path) -> tuple[pd.DataFrame, Path | None]:
    """The rows of ``dataset`` (CSV, TSV or Parquet) and the folder its relative image paths
    start at (the file's).

    Raises:
        DataError: the file does not exist or cannot be read.
    """
    from ludwig_hpo.data import dataset_folder, load_dataframe

    source = str(dataset)
    try:
        return load_dataframe(source, Path.cwd()), dataset_folder(source, Path.cwd())
    except DataError as e:  # the loader names the sweep file's key and folder; here it is the option
        fix = "check the path (relative paths start at the current folder)" if not dataset.exists() else e.fix
        raise DataError(e.message, source=e.source, key="--dataset", fix=fix) from None


def say_bad_rows(err: Console, bad: tuple[BadRow, ...], verb: str) -> None:
    """One line per bad row (at most :data:`SHOWN_BAD_ROWS`, then a count), ``verb`` saying
    what happened to them (``"left out"``, ``"refused"``)."""
    for b in bad[:SHOWN_BAD_ROWS]:
        err.print(f"bad row ({verb}): {b.where}: {b.reason}", soft_wrap=True)
    if len(bad) > SHOWN_BAD_ROWS:
        err.print(f"... and {len(bad) - SHOWN_BAD_ROWS} more bad rows ({verb})")


def refuse_bad_rows(err: Console, e: BadRowsError, *, skip_bad_rows: bool) -> DataError:
    """List ``e``'s bad rows on ``err`` and return the error to raise: ``e`` itself, or with
    ``skip_bad_rows`` (where the model refuses only when no row is left) a line saying no row
    can be scored, not one suggesting the option already given."""
    say_bad_rows(err, e.bad, "refused")
    if not skip_bad_rows:
        return e
    n = len(e.bad)
    return DataError(
        f"none of the {n} row{'s' if n != 1 else ''} can be scored", source=e.source, fix="fix the rows listed above"
    )


def check_output(out: Path) -> None:
    """Refuse an ``--output`` whose folder is missing or is not writable, before a model loads.

    Raises:
        DataError: the folder does not exist, or this process may not write in it.
    """
    if not out.parent.is_dir():
        raise DataError("no such folder", source=str(out.parent), key="--output", fix="create it or choose another")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise DataError("folder not writable", source=str(out.parent), key="--output", fix="choose another folder")
    if out.is_dir():
        raise DataError("is a folder", source=str(out), key="--output", fix="name a file in it")


def _has_cr(frame: pd.DataFrame) -> bool:
    """Whether a text cell of ``frame`` holds a carriage return (CSV quotes only newlines)."""
    text = frame.select_dtypes(exclude=["number", "bool"])
    return any(text[c].astype(str).str.contains("\r", regex=False).any() for c in text.columns)


def write_atomically(frame: pd.DataFrame | str, out: Path) -> None:
    """``frame`` as CSV, or Parquet when ``out`` ends in ``.parquet`` (a ``str``: that text):
    written to a hidden file beside ``out``, then renamed over it (no half-written file on
    failure).

    Raises:
        DataError: the folder does not exist or cannot be written.
    """
    check_output(out)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        if isinstance(frame, str):
            tmp.write_text(frame)
        elif out.suffix.lower() == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:  # a bare carriage return (an llm may generate one) ends a row in most readers unless quoted
            frame.to_csv(tmp, index=False, quoting=csv.QUOTE_NONNUMERIC if _has_cr(frame) else csv.QUOTE_MINIMAL)
        os.replace(tmp, out)
    except OSError as e:
        raise DataError(f"cannot write ({e.strerror or e})", source=str(out), key="--output") from None
    finally:
        tmp.unlink(missing_ok=True)


def predict_command(
    source: str,
    dataset: Path,
    output: Path,
    *,
    skip_bad_rows: bool,
    tracking_uri: str | None,
    out: Console,
    err: Console,
) -> Path:
    """Write the predictions of every row of ``dataset`` to ``output``; returns it.

    Raises:
        DataError: the model or the dataset cannot be read, a column the model reads is missing,
            ``output``'s folder is missing or not writable (checked before the model loads).
        BadRowsError: bad rows (listed on ``err`` first) without ``skip_bad_rows``; with it,
            a DataError when no row can be scored.
    """
    from ludwig_hpo.driver.model_source import resolve_source
    from ludwig_hpo.model.raw_rows import BadRowsError

    model = resolve_source(source, tracking_uri)
    check_output(output)
    df, data_dir = read_rows(dataset)
    served = model.load()
    try:
        scored = served.predict(df, skip_bad_rows=skip_bad_rows, data_dir=data_dir)
    except BadRowsError as e:
        raise refuse_bad_rows(err, e, skip_bad_rows=skip_bad_rows) from None
    write_atomically(scored.frame, output)
    if scored.rows.bad:
        say_bad_rows(err, scored.rows.bad, "left out")
    n = len(scored.rows.bad)
    skipped = f"; {n} bad row{'s' if n != 1 else ''} left out" if n else ""
    out.print(f"predictions: {len(scored.frame)} of {len(df)} rows -> {output}{skipped}", highlight=False)
    return output
