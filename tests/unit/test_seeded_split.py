"""The NumPy splits draw exactly the rows scikit-learn's splitters draw from the same seed:
a sweep split before (with scikit-learn) keeps its rows, and a Ludwig user's split is
unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

from ludwig_hpo.data.seeded_split import kfold_splits, shuffle_split
from ludwig_hpo.data.split import kfold_indices, split_indices


def _labels(draw_counts: list[int], seed: int) -> np.ndarray:
    """Integer class codes with ``draw_counts[c]`` rows of class c, in a seeded order."""
    y = np.repeat(np.arange(len(draw_counts)), draw_counts)
    return np.random.default_rng(seed).permutation(y)


@settings(max_examples=150, deadline=None)
@given(
    counts=st.lists(st.integers(2, 40), min_size=1, max_size=6),
    seed=st.integers(0, 2**31 - 1),
    test_share=st.floats(0.05, 0.6),
    stratify=st.booleans(),
)
def test_shuffle_split_draws_scikit_learns_rows(counts, seed, test_share, stratify):
    y = _labels(counts, seed)
    n = len(y)
    n_test = min(n - 1, max(1, round(n * test_share)))
    strat = y if stratify else None
    if stratify and min(n_test, n - n_test) < len(counts):
        with pytest.raises(ValueError):
            shuffle_split(n, n_test, seed, strat)
        return
    ours = shuffle_split(n, n_test, seed, strat)
    theirs = train_test_split(np.arange(n), test_size=n_test, random_state=seed, stratify=strat)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=150, deadline=None)
@given(
    counts=st.lists(st.integers(5, 40), min_size=1, max_size=5),
    seed=st.integers(0, 2**31 - 1),
    k=st.integers(2, 5),
    stratify=st.booleans(),
)
def test_kfold_splits_are_scikit_learns_folds(counts, seed, k, stratify):
    y = _labels(counts, seed)
    n = len(y)
    if stratify:
        theirs = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.arange(n), y)
    else:
        theirs = KFold(n_splits=k, shuffle=True, random_state=seed).split(np.arange(n))
    ours = kfold_splits(n, k, seed, y if stratify else None)
    for (a, b), (c, d) in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_the_sweeps_split_and_folds_are_unchanged():
    # the split of a 569-row binary target (breast cancer's shape) and its 3 folds, as the
    # scikit-learn calls this platform made before drew them
    y = _labels([212, 357], 0)
    got = split_indices(len(y), (0.7, 0.15, 0.15), 11, y)
    rest, test = train_test_split(np.arange(len(y)), test_size=85, random_state=11, stratify=y)
    train, val = train_test_split(rest, test_size=85, random_state=12, stratify=y[rest])
    for name, want in (("train", train), ("validation", val), ("test", test)):
        np.testing.assert_array_equal(got[name], np.sort(want))
    rows = np.sort(np.concatenate([train, val]))
    folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=11).split(rows, y[rows])
    for (a, b), (c, d) in zip(kfold_indices(rows, 3, 11, y), folds, strict=True):
        np.testing.assert_array_equal(a, np.sort(rows[c]))
        np.testing.assert_array_equal(b, np.sort(rows[d]))


def test_refusals():
    with pytest.raises(ValueError, match="single row"):
        shuffle_split(5, 2, 0, np.array([0, 0, 1, 1, 2]))
    with pytest.raises(ValueError, match="n_test"):
        shuffle_split(5, 5, 0)
    with pytest.raises(ValueError, match="fewer than k"):
        kfold_splits(6, 3, 0, np.array([0, 0, 0, 0, 1, 1]))
