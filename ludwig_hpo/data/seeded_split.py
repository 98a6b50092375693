"""Seeded shuffle splits and k-fold splits in NumPy, drawing the same rows from the same seed
as scikit-learn's ``train_test_split`` (``ShuffleSplit`` / ``StratifiedShuffleSplit``),
``KFold`` and ``StratifiedKFold`` with ``shuffle=True``: the same ``RandomState`` calls in
the same order. ``hpo validate`` and the sweep's driver split without importing
scikit-learn and SciPy (~90 MB and ~0.6 s of imports); ``tests/unit/test_seeded_split.py``
checks every function against scikit-learn's on many seeds and label sets.

Labels are the integer class codes of one target (1-D); scikit-learn's handling of other
label types (strings, 2-D frames) is not reproduced here. Pure functions; any process.
"""

from __future__ import annotations

import numpy as np


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.RandomState) -> np.ndarray:
    """Rows drawn per class (scikit-learn's ``_approximate_mode``): the floored proportional
    share, the rows left over going to the largest remainders, ties broken by ``rng``."""
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need_to_add)
            floored[rng.choice(inds, size=add_now, replace=False)] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def shuffle_split(
    n_rows: int, n_test: int, seed: int, labels: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) positions among ``0..n_rows-1``, as
    ``train_test_split(np.arange(n_rows), test_size=n_test, random_state=seed, stratify=labels)``
    returns them (in its order, unsorted).

    Args:
        n_rows: rows to split.
        n_test: rows of the test part (a count, 0 < n_test < n_rows).
        seed: the ``RandomState`` seed.
        labels: (n_rows,) integer class codes to stratify on, or None.

    Raises:
        ValueError: ``n_test`` out of range, a class with one row, or fewer train or test
            rows than classes (scikit-learn's own refusals).
    """
    if not 0 < n_test < n_rows:
        raise ValueError(f"n_test={n_test} must be in (0, {n_rows})")
    n_train = n_rows - n_test
    rng = np.random.RandomState(seed)
    if labels is None:
        permutation = rng.permutation(n_rows)
        return permutation[n_test : n_test + n_train], permutation[:n_test]
    y = np.asarray(labels)
    if y.shape != (n_rows,):
        raise ValueError(f"labels must have shape ({n_rows},), got {y.shape}")
    classes, y_indices, class_counts = np.unique(y, return_inverse=True, return_counts=True)
    if class_counts.min() < 2:
        raise ValueError(f"classes {classes[class_counts < 2].tolist()} have a single row; stratifying needs 2")
    if min(n_train, n_test) < len(classes):
        raise ValueError(f"{n_train} train and {n_test} test rows cannot hold each of {len(classes)} classes")
    class_indices = np.split(np.argsort(y_indices, kind="stable"), np.cumsum(class_counts)[:-1])
    n_i = _approximate_mode(class_counts, n_train, rng)
    t_i = _approximate_mode(class_counts - n_i, n_test, rng)
    train: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for i in range(len(classes)):
        rows = class_indices[i].take(rng.permutation(class_counts[i]), mode="clip")
        train.extend(rows[: n_i[i]])
        test.extend(rows[n_i[i] : n_i[i] + t_i[i]])
    return rng.permutation(train), rng.permutation(test)


def kfold_splits(
    n_rows: int, k: int, seed: int, labels: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` (train, held-out) position pairs among ``0..n_rows-1``, each sorted, as
    ``KFold(k, shuffle=True, random_state=seed).split`` (``labels`` None) or
    ``StratifiedKFold(k, shuffle=True, random_state=seed).split(X, labels)`` yields them.

    Args:
        n_rows: rows to split (>= k).
        k: folds, >= 2.
        seed: the ``RandomState`` seed.
        labels: (n_rows,) integer class codes, every class with at least ``k`` rows, or None.

    Raises:
        ValueError: fewer rows than folds, or a class with fewer rows than folds.
    """
    if k < 2 or k > n_rows:
        raise ValueError(f"k={k} folds need 2 <= k <= {n_rows} rows")
    rng = np.random.RandomState(seed)
    if labels is None:
        order = np.arange(n_rows)
        rng.shuffle(order)
        sizes = np.full(k, n_rows // k, dtype=int)
        sizes[: n_rows % k] += 1
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        fold_of = np.empty(n_rows, dtype=int)
        for i in range(k):
            fold_of[order[bounds[i] : bounds[i + 1]]] = i
    else:
        y = np.asarray(labels)
        if y.shape != (n_rows,):
            raise ValueError(f"labels must have shape ({n_rows},), got {y.shape}")
        _, first_at, inverse = np.unique(y, return_index=True, return_inverse=True)
        # classes numbered by first appearance, as scikit-learn numbers them
        _, by_appearance = np.unique(first_at, return_inverse=True)
        encoded = by_appearance[inverse]
        counts = np.bincount(encoded)
        if counts.min() < k:
            raise ValueError(f"a class has {counts.min()} rows, fewer than k={k} folds")
        in_order = np.sort(encoded)
        allocation = np.asarray([np.bincount(in_order[i::k], minlength=len(counts)) for i in range(k)])
        fold_of = np.empty(n_rows, dtype="i")
        for c in range(len(counts)):
            folds_for_class = np.arange(k).repeat(allocation[:, c])
            rng.shuffle(folds_for_class)
            fold_of[encoded == c] = folds_for_class
    positions = np.arange(n_rows)
    return [(positions[fold_of != i], positions[fold_of == i]) for i in range(k)]
