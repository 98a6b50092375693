"""Ludwig's row sampling: ``sample_ratio`` / ``sample_size`` (a seeded sample of every row,
taken before the split) and ``oversample_minority`` / ``undersample_majority`` (the training
split of a binary target rebalanced). Pure functions of the rows and the seed; run in the driver.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ludwig_hpo.config.preprocessing import GlobalPreprocessing
from ludwig_hpo.errors import DataError


def _sample(positions: np.ndarray, frac: float, seed: int, replace: bool = False) -> np.ndarray:
    # pandas' sample, as Ludwig calls it on its DataFrame: the draw depends only on the length.
    return pd.Series(positions).sample(frac=frac, replace=replace, random_state=seed).to_numpy(np.int64)


def sample_rows(n_rows: int, prep: GlobalPreprocessing, seed: int, source: str | None = None) -> np.ndarray | None:
    """The rows ``sample_ratio`` / ``sample_size`` keep, in the order Ludwig's sample leaves
    them (positions in ``0..n_rows-1``); None when every row is kept in its order. A
    ``sample_size`` at least the number of rows keeps every row, as in Ludwig. ``source``:
    the dataset file, named in errors.

    Raises:
        DataError: ``sample_ratio`` keeps less than one row.
    """
    positions = np.arange(n_rows, dtype=np.int64)
    sampled = False
    if prep.sample_ratio < 1:
        if n_rows * prep.sample_ratio < 1:
            raise DataError(
                f"sample_ratio {prep.sample_ratio} keeps no row of {n_rows}",
                source=source,
                key="preprocessing.sample_ratio",
                fix="raise preprocessing.sample_ratio",
            )
        positions, sampled = _sample(positions, prep.sample_ratio, seed), True
    if prep.sample_size is not None and prep.sample_size < len(positions):
        positions, sampled = _sample(positions, prep.sample_size / len(positions), seed), True
    return positions if sampled else None


def balance_training_rows(train: np.ndarray, target: np.ndarray, prep: GlobalPreprocessing, seed: int) -> np.ndarray:
    """The training rows rebalanced on a binary ``target``, Ludwig's way: with
    ``oversample_minority: r`` the minority class is drawn with replacement to ``r`` times
    the majority's count; with ``undersample_majority: r`` the majority class is drawn without
    replacement to ``int(minority / r)`` rows. Seeded; validation and test are untouched.

    Args:
        train: (n,) the training rows (positions in ``target``).
        target: (N,) the binary target of every row (0. / 1.).
        prep: the top-level preprocessing (one of the two keys set).
        seed: the split seed.

    Returns:
        (m,) sorted training rows; an oversampled row appears more than once.
    """
    labels = pd.Series(target[train])
    counts = labels.value_counts()
    majority, minority = counts.idxmax(), counts.idxmin()
    major = train[(labels == majority).to_numpy()]
    minor = train[(labels == minority).to_numpy()]
    if len(counts) < 2:
        return np.sort(train)
    if prep.oversample_minority is not None:
        minor = _sample(minor, len(major) * prep.oversample_minority / len(minor), seed, replace=True)
    elif prep.undersample_majority is not None:
        major = _sample(major, min(1.0, int(len(minor) / prep.undersample_majority) / len(major)), seed)
    return np.sort(np.concatenate([minor, major]))
