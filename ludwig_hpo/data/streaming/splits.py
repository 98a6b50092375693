"""Train/validation/test and k-fold folds of streamed rows, one batch at a time, without a full
load: every rank and every trial sees the same rows, and a row keeps its split as files are
added or read in another order.

- Ludwig's ``fixed`` split: the split column (0/1/2 or the split names, as in memory).
- Ludwig's ``hash`` split: Ludwig's hash of the row id (``preprocessing.split.column``), the
  same code as in memory, so the same rows land in each split.
- Ludwig's ``random`` split and this platform's ``dataset.split`` fractions: a seeded hash of the
  whole row (every column read, in name order) picks the split; the fractions hold on average,
  not row for row, and ``dataset.split`` is not stratified (a permutation needs every row).
- ``stratify`` and ``datetime`` splits order or group the whole column: refused in one line.

A row's k-fold fold is a second seeded hash (of the id with a ``hash`` split, else of the row),
modulo ``kfold.k``. Pure functions of a batch's cells; run wherever Ray Data maps the batch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.ludwig_split import hash_code
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.rows import global_preprocessing, uses_ludwig_split
from ludwig_hpo.data.split import _split_code
from ludwig_hpo.errors import DataError

_KEY = "preprocessing.split.column"


@dataclass(frozen=True)
class SplitRule:
    """How a streamed row finds its split and fold.

    Attributes:
        kind: ``"fixed"`` (a split column), ``"hash_id"`` (Ludwig's hash of an id column) or
            ``"hash_row"`` (a seeded hash of the whole row).
        column: the split or id column (None for ``hash_row``).
        probabilities: (train, validation, test) fractions of the hash splits.
        seed: seeds the row hash and the folds.
        k: ``kfold.k``, 0 without k-fold.
        key: the config key named in errors.
    """

    kind: str
    column: str | None
    probabilities: tuple[float, float, float]
    seed: int
    k: int = 0
    key: str = _KEY


def split_rule(cfg: SweepConfig) -> SplitRule:
    """The :class:`SplitRule` of a streamed sweep. Pure.

    Raises:
        DataError: a ``stratify`` or ``datetime`` split (they need the whole column).
    """
    seed = cfg.dataset.split.seed
    k = cfg.kfold.k if cfg.kfold is not None else 0
    if not uses_ludwig_split(cfg):
        sp = cfg.dataset.split
        return SplitRule("hash_row", None, (sp.train, sp.validation, sp.test), seed, k, "dataset.split")
    split = global_preprocessing(cfg).split
    if split.type in ("stratify", "datetime"):
        raise DataError(
            f"a {split.type} split needs the whole column in one place, so a streamed dataset cannot use it",
            key="preprocessing.split.type",
            fix="use type: hash (a row id), fixed (a split column) or random, or dataset.streaming: false",
        )
    kind = {"fixed": "fixed", "hash": "hash_id", "random": "hash_row"}[split.type]
    return SplitRule(kind, split.column, split.probabilities, seed, k, "preprocessing.split")


def _hash_key(seed: int, salt: str) -> str:
    # pandas' row hash takes a 16-character key: derive it from the seed so that another seed
    # draws another split
    return hashlib.md5(f"{salt}:{seed}".encode()).hexdigest()[:16]


def row_hashes(df: pd.DataFrame, seed: int, salt: str = "split") -> np.ndarray:
    """(N,) uint64 seeded hashes of each row's cells, the columns in name order (so a file whose
    columns are in another order hashes the same rows alike). Pure."""
    cols = sorted(df.columns, key=str)
    return pd.util.hash_pandas_object(df[cols], index=False, hash_key=_hash_key(seed, salt)).to_numpy(np.uint64)


def _codes_of_hashes(h: np.ndarray, probabilities: tuple[float, float, float]) -> np.ndarray:
    u = h.astype(np.float64) / float(2**64)
    p_train, p_val, _ = probabilities
    return np.where(u < p_train, 0, np.where(u < p_train + p_val, 1, 2)).astype(np.int64)


def _column(df: pd.DataFrame, rule: SplitRule, origin: DataOrigin) -> pd.Series:
    assert rule.column is not None
    if rule.column not in df.columns:
        what = "split" if rule.kind == "fixed" else "hash split"
        raise DataError(
            f"{what} column {rule.column!r} is not in this file",
            source=origin.source,
            key=_KEY,
            fix=f"add the column {rule.column!r} to every file, or set preprocessing.split.column",
        )
    return df[rule.column]


def _fixed_codes(col: pd.Series) -> np.ndarray:
    """:func:`~ludwig_hpo.data.split._split_code` of every cell; a numeric column at numpy's speed
    (a column of split names cell by cell)."""
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        x = col.to_numpy(np.float64)
        return np.where(np.isin(x, (0.0, 1.0, 2.0)), np.nan_to_num(x, nan=-1.0), -1.0).astype(np.int64)
    return np.fromiter((_split_code(v) for v in col), dtype=np.int64, count=len(col))


def split_codes(df: pd.DataFrame, rule: SplitRule, origin: DataOrigin) -> np.ndarray:
    """(N,) int64 split of each row of ``df``: 0 train, 1 validation, 2 test. Pure.

    ``df`` holds the columns the sweep reads (the features' and the split column).

    Raises:
        DataError: the split column is missing, or (``fixed``) holds another value than 0, 1,
            2 or a split name, naming the file, the column and the value.
    """
    if rule.kind == "hash_row":
        return _codes_of_hashes(row_hashes(df, rule.seed), rule.probabilities)
    col = _column(df, rule, origin)
    if rule.kind == "hash_id":
        return np.fromiter((hash_code(v, rule.probabilities) for v in col), dtype=np.int64, count=len(col))
    codes = _fixed_codes(col)
    bad = np.flatnonzero(codes < 0)
    if len(bad):
        value = col.iloc[bad[0]]
        what = "a missing value" if pd.isna(value) else repr(value)
        raise DataError(
            f"the split column {rule.column!r} holds {what} at {origin.rows(bad)}; it may hold only "
            "0 (train), 1 (validation), 2 (test) or the names train, validation (val), test",
            source=origin.source,
            key=_KEY,
            fix="fix those rows",
        )
    return codes


def fold_codes(df: pd.DataFrame, rule: SplitRule, splits: np.ndarray, origin: DataOrigin) -> np.ndarray:
    """(N,) int64 k-fold fold of each row (``0..k-1`` for train and validation rows, -1 for test
    rows and without k-fold): a seeded hash of the id (``hash`` split) or of the row. Pure."""
    if not rule.k:
        return np.full(len(df), -1, dtype=np.int64)
    cells = _column(df, rule, origin).to_frame() if rule.kind == "hash_id" else df
    folds = (row_hashes(cells, rule.seed, "fold") % np.uint64(rule.k)).astype(np.int64)
    return np.where(splits == 2, -1, folds)
