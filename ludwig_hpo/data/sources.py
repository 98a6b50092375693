"""Dataset sources: a CSV or Parquet path, or ``sklearn:<name>`` for a dataset that ships
with scikit-learn (no download). Runs in the driver, once per sweep."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ludwig_hpo.data.bundled import load_bundled
from ludwig_hpo.data.origin import SOURCE_ATTR
from ludwig_hpo.errors import DataError

#: The dataset file formats read, by lower-case file suffix (a ``.tsv`` is a CSV with tabs).
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv"}


def csv_delimiter(suffix: str) -> str:
    """The delimiter of a CSV-format file with lower-case ``suffix``: a tab for ``.tsv``, else ``,``. Pure."""
    return "\t" if suffix == ".tsv" else ","


BUNDLED = ("digits", "breast_cancer", "wine")


def _clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")


def _bundled(name: str) -> pd.DataFrame:
    if name not in BUNDLED:
        raise DataError(
            f"unknown bundled dataset {name!r}",
            key="dataset.source",
            fix=f"use one of {', '.join('sklearn:' + b for b in BUNDLED)} or a CSV/Parquet path",
        )
    d = load_bundled(name)
    if name == "digits":
        # One column of (8, 8) pixel arrays (values 0..16) and the digit as the label.
        images = d.data.astype(np.float32).reshape(-1, 8, 8)
        return pd.DataFrame({"image": list(images), "label": d.target})
    df = pd.DataFrame(d.data, columns=[_clean(c) for c in d.feature_names])
    if name == "breast_cancer":
        df["malignant"] = (d.target == 0).astype(np.int64)  # sklearn: 0 = malignant, 1 = benign
    else:
        df["cultivar"] = [f"cultivar_{t}" for t in d.target]
    return df


def dataset_path(source: str, base_dir: Path | None) -> Path:
    """The dataset file ``source`` names: absolute, or relative to ``base_dir`` (the sweep
    file's folder; None: the current folder). Pure."""
    path = Path(source)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    return path


def dataset_folder(source: str, base_dir: Path | None) -> Path | None:
    """The folder of the dataset file, where relative paths inside it (image files) start;
    None for a bundled ``sklearn:`` dataset. Pure."""
    return None if source.startswith("sklearn:") else dataset_path(source, base_dir).parent


def load_dataframe(source: str, base_dir: Path) -> pd.DataFrame:
    """Read the whole dataset into memory, one row per sample.

    Args:
        source: ``sklearn:<name>`` or a ``.csv`` / ``.parquet`` path; a relative path is
            resolved against ``base_dir`` (the sweep file's folder).
        base_dir: the sweep file's folder.

    Returns:
        The rows; column names as in the file (bundled datasets: ``snake_case``). Its
        ``attrs[SOURCE_ATTR]`` holds the resolved path (or ``source`` for a bundled dataset),
        which preparation names in its errors (:class:`~ludwig_hpo.data.origin.DataOrigin`).

    Raises:
        DataError: unknown bundled name, missing or unreadable file, unknown format, no rows,
            a folder, glob or URI (which only a stream reads).
    """
    if source.startswith("sklearn:"):
        bundled = _bundled(source.split(":", 1)[1])
        bundled.attrs[SOURCE_ATTR] = source
        return bundled
    path = dataset_path(source, base_dir)
    if "://" in source or any(c in source for c in "*?[") or path.is_dir():
        raise DataError(
            "a folder, glob or URI of files is read as a stream (dataset.streaming), but this step reads one file",
            source=source if "://" in source else str(path),
            key="dataset.source",
            fix="point to one .csv, .tsv or .parquet file",
        )
    if not path.is_file():
        raise DataError(
            "dataset file not found",
            source=str(path),
            key="dataset.source",
            fix="check the path (relative paths start at the sweep file's folder)",
        )
    suffix = path.suffix.lower()
    try:
        if FORMATS.get(suffix) == "csv":
            df = pd.read_csv(path, sep=csv_delimiter(suffix))
        elif FORMATS.get(suffix) == "parquet":
            df = pd.read_parquet(path)
        else:
            raise DataError(
                f"unknown dataset format {suffix!r}",
                source=str(path),
                key="dataset.source",
                fix="use a .csv, .tsv or .parquet file",
            )
    except DataError:
        raise
    except PermissionError:
        raise DataError(
            "permission denied", source=str(path), key="dataset.source", fix="make the file readable"
        ) from None
    except Exception as e:  # pandas/pyarrow parse errors have many types
        raise DataError(
            f"cannot read the dataset: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
            source=str(path),
            key="dataset.source",
            fix="check the file's format",
        ) from None
    if len(df) == 0:
        raise DataError(
            "the dataset has no rows", source=str(path), key="dataset.source", fix="point to a file with data"
        )
    if FORMATS.get(suffix) == "csv":
        _refuse_duplicate_header(path, csv_delimiter(suffix))
    df.attrs[SOURCE_ATTR] = str(path)
    return df


def _refuse_duplicate_header(path: Path, sep: str) -> None:
    """pandas renames a repeated CSV header (``a``, ``a.1``), so a feature would silently read
    the first of two columns: refuse the file instead."""
    import csv

    with path.open(newline="", encoding="utf-8-sig") as f:
        header = next(csv.reader(f, delimiter=sep), [])
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise DataError(
            f"the header repeats column name(s) {dupes}",
            source=str(path),
            key="dataset.source",
            fix="give every column a unique name",
        )
