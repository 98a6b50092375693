"""Seeded train/validation/test splits and k-fold indices: this platform's ``dataset.split``
(stratified for classification) and Ludwig's ``preprocessing.split`` types, cut the way Ludwig
cuts them (the same seed and rows give the same split). Pure functions of their inputs; run in
the driver."""

from __future__ import annotations

from typing import Any

import numpy as np

from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.seeded_split import kfold_splits, shuffle_split
from ludwig_hpo.errors import DataError


def _can_stratify(labels: np.ndarray | None, n_parts: int) -> bool:
    if labels is None:
        return False
    _, counts = np.unique(labels, return_counts=True)
    return counts.min() >= n_parts


def split_indices(
    n_rows: int, fractions: tuple[float, float, float], seed: int, labels: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Split row indices ``0..n_rows-1`` into train / validation / test.

    Args:
        n_rows: number of rows.
        fractions: (train, validation, test), summing to 1.
        seed: the split is a pure function of this seed and the inputs.
        labels: (n_rows,) class labels to stratify on, or None (regression).

    Returns:
        ``{"train": idx, "validation": idx, "test": idx}``, each sorted int64 indices.

    Raises:
        DataError: a split would be empty.
    """
    train_f, val_f, test_f = fractions
    idx = np.arange(n_rows)
    n_test, n_val = round(n_rows * test_f), round(n_rows * val_f)
    if min(n_test, n_val, n_rows - n_test - n_val) < 1:
        raise DataError(
            f"{n_rows} rows are too few for the split {fractions} (a split would be empty)",
            key="dataset.split",
            fix="use more rows or larger fractions",
        )
    n_classes = len(np.unique(labels)) if labels is not None else 0
    # stratify when every class can appear in every split; else a plain seeded split
    strat = labels if _can_stratify(labels, 3) and min(n_test, n_val) >= n_classes else None
    # scikit-learn's train_test_split, drawn in NumPy (the same rows from the same seed)
    rest_at, test = shuffle_split(n_rows, n_test, seed, strat)
    rest = idx[rest_at]
    strat_rest = strat[rest] if strat is not None else None
    train_at, val_at = shuffle_split(len(rest), n_val, seed + 1, strat_rest)
    train, val = rest[train_at], rest[val_at]
    return {"train": np.sort(train), "validation": np.sort(val), "test": np.sort(test)}


#: Split names a fixed split column may hold besides 0, 1, 2 (case and spaces ignored).
_SPLIT_NAMES = {"train": 0, "training": 0, "validation": 1, "valid": 1, "val": 1, "vali": 1, "test": 2}


def _split_code(v: Any) -> int:
    """0 / 1 / 2 for a fixed split cell (a number, a string of one, or a split name), else -1."""
    if isinstance(v, str) and v.strip().lower() in _SPLIT_NAMES:
        return _SPLIT_NAMES[v.strip().lower()]
    try:
        f = float(v)
    except (TypeError, ValueError):
        return -1
    return int(f) if f in (0.0, 1.0, 2.0) else -1


def fixed_split_indices(
    values: np.ndarray, key: str = "preprocessing.split.column", origin: DataOrigin | None = None
) -> dict[str, np.ndarray]:
    """Rows of a fixed split column, Ludwig's convention: 0 = train, 1 = validation, 2 = test
    (also written ``0.0``, ``"1"``, or the names ``train`` / ``validation`` / ``test``).

    Args:
        values: (n_rows,) the split column.
        key: the config key named in errors.
        origin: the dataset file, named in errors with the rows as it counts them.

    Returns:
        ``{"train": idx, "validation": idx, "test": idx}``, sorted int64 indices.

    Raises:
        DataError: a value other than 0, 1, 2 (or missing), or an empty split.
    """
    codes = np.fromiter((_split_code(v) for v in values), dtype=np.int64, count=len(values))
    bad = np.flatnonzero(codes < 0)
    origin = origin or DataOrigin()
    if len(bad):
        raise DataError(
            f"the split column holds {values[bad[0]]!r} at {origin.rows(bad)} ({len(bad)} such rows); "
            "it may hold only 0 (train), 1 (validation), 2 (test)",
            source=origin.source,
            key=key,
            fix="fix those rows",
        )
    out = {
        name: np.flatnonzero(codes == code).astype(np.int64)
        for code, name in enumerate(("train", "validation", "test"))
    }
    empty = [name for name, idx in out.items() if len(idx) == 0]
    if empty:
        raise DataError(
            f"the split column assigns no row to {empty[0]} ({('0', '1', '2')[list(out).index(empty[0])]})",
            source=origin.source,
            key=key,
            fix="give every split some rows",
        )
    return out


def kfold_indices(
    rows: np.ndarray, k: int, seed: int, labels: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` (train, held-out) index pairs over ``rows`` (stratified when ``labels`` allow).

    Args:
        rows: (n,) row indices to split (train + validation of the sweep).
        k: number of folds, >= 2.
        seed: shuffling seed.
        labels: (n_total_rows,) labels indexed by row, or None.

    Raises:
        DataError: fewer rows than folds.
    """
    if len(rows) < k:
        raise DataError(
            f"{len(rows)} train+validation rows are fewer than kfold.k={k}", key="kfold.k", fix="lower kfold.k"
        )
    sub = labels[rows] if labels is not None else None
    # scikit-learn's StratifiedKFold / KFold (shuffled), drawn in NumPy
    folds = kfold_splits(len(rows), k, seed, sub if _can_stratify(sub, k) else None)
    return [(np.sort(rows[a]), np.sort(rows[b])) for a, b in folds]
