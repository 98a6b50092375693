"""Ludwig's ``preprocessing.split`` types, cut as Ludwig cuts them, so that a Ludwig config
trains on the rows Ludwig would train on (same rows in the same order, same seed, same split).

- ``random``: the rows shuffled by pandas' ``sample(frac=1, random_state=seed)``; the first
  ``ceil(p_train * n)`` train, the next ``int(p_validation * n)`` validation, the rest test;
  a validation or test split of 1 or 2 rows takes rows from train to reach 3.
- ``stratify``: scikit-learn's ``train_test_split`` stratified on the column, seeded, train
  against the rest, then validation against test; a value seen once goes to the first part.
- ``datetime``: rows ordered by date (ascending), cut into ``int(p * n)`` rows per split;
  the rows that rounding leaves over go to test (Ludwig drops them).
- ``hash``: CRC32 of the base64 MD5 of ``{"value": id}`` as JSON (Ludwig's ``hash_dict``) picks
  the split, so an id keeps its split as rows are added; the fractions hold only on average.
- ``fixed``: :func:`~ludwig_hpo.data.split.fixed_split_indices`.

Runs in the driver, once per sweep. Pure functions of the rows and the seed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import zlib
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.preprocessing import LudwigSplitConfig
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.split import fixed_split_indices
from ludwig_hpo.errors import DataError

#: Ludwig's smallest non-empty validation / test split (MIN_DATASET_SPLIT_ROWS).
MIN_SPLIT_ROWS = 3
_KEY = "preprocessing.split.column"


def _as_splits(parts: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    return {
        name: np.sort(np.asarray(p, dtype=np.int64))
        for name, p in zip(("train", "validation", "test"), parts, strict=True)
    }


def random_divisions(n_rows: int, probabilities: tuple[float, float, float]) -> tuple[int, int]:
    """Where Ludwig's random split cuts ``n_rows`` shuffled rows: (end of train, end of
    validation), with validation and test raised to :data:`MIN_SPLIT_ROWS` rows from train. Pure."""
    d1 = int(math.ceil(probabilities[0] * n_rows))
    d2 = d1 + int(probabilities[1] * n_rows) if probabilities[2] > 0 else n_rows
    sizes = (d1, d2 - d1, n_rows - d2)
    out = [d1, d2]
    if 0 < sizes[2] < MIN_SPLIT_ROWS and sizes[0] > 0:
        shift = min(MIN_SPLIT_ROWS - sizes[2], sizes[0])
        out = [d - shift for d in out]
    if 0 < sizes[1] < MIN_SPLIT_ROWS and sizes[0] > 0:
        out[0] -= min(MIN_SPLIT_ROWS - sizes[1], out[0])
    return out[0], out[1]


def random_split(n_rows: int, probabilities: tuple[float, float, float], seed: int) -> dict[str, np.ndarray]:
    """Ludwig's ``random`` split of rows ``0..n_rows-1``: sorted int64 indices per split."""
    order = pd.RangeIndex(n_rows).to_series().sample(frac=1, random_state=seed).to_numpy()
    d1, d2 = random_divisions(n_rows, probabilities)
    return _as_splits((order[:d1], order[d1:d2], order[d2:]))


def _column(df: pd.DataFrame, column: str, what: str, origin: DataOrigin) -> pd.Series:
    if column not in df.columns:
        fix = (
            f"add a column {column!r} (0 = train, 1 = validation, 2 = test) or set preprocessing.split.column"
            if what == "split"
            else "use one of the dataset's columns"
        )
        raise DataError(f"{what} column {column!r} is not in the dataset", source=origin.source, key=_KEY, fix=fix)
    return df[column]


def stratify_split(labels: pd.DataFrame, probabilities: tuple[float, float, float], seed: int) -> dict[str, np.ndarray]:
    """Ludwig's ``stratify`` split: ``labels`` is the one-column frame of the stratify column
    (its rows are the rows split). Sorted int64 indices per split."""
    from sklearn.model_selection import train_test_split  # driver only (see data.split)

    frac_train, frac_val, frac_test = probabilities
    column = labels.columns[0]

    def safe(pos: np.ndarray, test_size: float) -> tuple[np.ndarray, np.ndarray]:
        part = labels.iloc[pos]
        counts = part.groupby(column)[column].size()
        single = part[column].isin(counts.index[counts == 1]).to_numpy()
        first, second = train_test_split(pos[~single], test_size=test_size, random_state=seed, stratify=part[~single])
        return np.concatenate([first, pos[single]]), second

    train, rest = safe(np.arange(len(labels)), 1.0 - frac_train)
    val, test = safe(rest, frac_test / (frac_val + frac_test))
    return _as_splits((train, val, test))


def datetime_split(
    dates: pd.Series,
    probabilities: tuple[float, float, float],
    fmt: str | None,
    origin: DataOrigin,
    fill_value: str | None = None,
) -> dict[str, np.ndarray]:
    """Ludwig's ``datetime`` split: rows ordered by ``dates`` (read with ``fmt``, else pandas'
    inference; a missing date reads as ``fill_value`` when given); the first
    ``int(p_train * n)`` train, the next ``int(p_validation * n)`` validation, the rest test.

    Raises:
        DataError: a missing date (without ``fill_value``), or one that cannot be read
            (naming the rows).
    """
    if fill_value is not None:
        dates = dates.astype(object).where(dates.notna(), fill_value)
    text = dates.map(lambda v: v if isinstance(v, str) or pd.isna(v) else str(v))
    parsed = pd.to_datetime(text, format=fmt, errors="coerce")
    bad = parsed.isna().to_numpy()
    if bad.any():
        rows = np.flatnonzero(bad)
        cell = dates.iloc[rows[0]]
        what = "missing dates" if pd.isna(cell) else f"dates that cannot be read (e.g. {cell!r})"
        raise DataError(
            f"the datetime split column {dates.name!r} has {len(rows)} {what} ({origin.rows(rows)})",
            source=origin.source,
            key=_KEY,
            fix="fill or drop those rows"
            if pd.isna(cell)
            else "fix those rows or set preprocessing.split.datetime_format",
        )
    order = pd.Series(parsed.to_numpy().astype("int64")).sort_values().index.to_numpy()
    n = len(order)
    ends = np.cumsum([int(p * n) for p in probabilities])
    return _as_splits((order[: ends[0]], order[ends[0] : ends[1]], order[ends[1] :]))


def _json_default(v: Any) -> Any:
    # Ludwig's NumpyEncoder: numpy scalars and arrays as their Python values.
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray | set | tuple):
        return list(v)
    raise TypeError(f"cannot hash {type(v).__name__}")


def hash_code(value: Any, probabilities: tuple[float, float, float]) -> int:
    """The split (0 train, 1 validation, 2 test) Ludwig's ``hash`` split gives one id. Pure."""
    text = json.dumps({"value": value}, default=_json_default, sort_keys=True, ensure_ascii=True)
    digest = base64.b64encode(hashlib.md5(text.encode()).digest(), altchars=b"__")
    h = zlib.crc32(digest)
    limits = [p * 2**32 for p in probabilities]
    return 0 if h < limits[0] else (1 if h < limits[0] + limits[1] else 2)


def hash_split(ids: pd.Series, probabilities: tuple[float, float, float]) -> dict[str, np.ndarray]:
    """Ludwig's ``hash`` split: each row's split from :func:`hash_code` of its id."""
    codes = np.fromiter((hash_code(v, probabilities) for v in ids), dtype=np.int64, count=len(ids))
    return _as_splits((np.flatnonzero(codes == 0), np.flatnonzero(codes == 1), np.flatnonzero(codes == 2)))


def ludwig_split(df: pd.DataFrame, split: LudwigSplitConfig, seed: int, origin: DataOrigin) -> dict[str, np.ndarray]:
    """The rows of ``df`` per split, by Ludwig's ``preprocessing.split`` ``split``.

    Args:
        df: the rows to split (after sampling and dropped rows), in dataset order.
        split: the split section.
        seed: the split seed (Ludwig's ``random_seed``, 42 unless ``dataset.split.seed`` says).
        origin: the dataset file, named in errors.

    Returns:
        ``{"train", "validation", "test"}`` -> sorted int64 positions in ``df``.

    Raises:
        DataError: the split column is missing, or holds values the split type cannot read.
    """
    p = split.probabilities
    if split.type == "random":
        return random_split(len(df), p, seed)
    assert split.column is not None  # every other type has a column (LudwigSplitConfig)
    what = {"fixed": "split", "stratify": "stratify", "datetime": "datetime split", "hash": "hash split"}[split.type]
    col = _column(df, split.column, what, origin)
    if split.type == "fixed":
        return fixed_split_indices(col.to_numpy(), _KEY, origin)
    if split.type == "stratify":
        return stratify_split(df[[split.column]], p, seed)
    if split.type == "datetime":
        return datetime_split(col, p, split.datetime_format, origin, split.fill_value)
    return hash_split(col, p)
