"""Statistics of fold scores: the t interval of a mean and the paired comparison of two
configurations over the same folds. Pure."""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
ALPHA = 0.05


class PairedTest(NamedTuple):
    """Paired comparison of two configurations over the same folds.

    Attributes:
        a, b: config ranks compared (``a < b``).
        n: number of paired folds.
        mean_diff: mean of (score of ``a`` − score of ``b``) over the folds, metric units.
        t_pvalue: two-sided p-value of the paired t-test (``scipy.stats.ttest_rel``); None
            when it cannot be computed (fewer than 2 folds, or identical scores).
        wilcoxon_pvalue: two-sided p-value of the Wilcoxon signed-rank test
            (``scipy.stats.wilcoxon``); None when every difference is 0 or n < 2.
        verdict: one plain sentence, e.g. ``"#1 and #2 are not distinguishable at 5 %"``.
    """

    a: int
    b: int
    n: int
    mean_diff: float | None
    t_pvalue: float | None
    wilcoxon_pvalue: float | None
    verdict: str


def t_interval(scores: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The ``confidence`` interval of the mean of ``scores`` from Student's t with the
    sample standard deviation (ddof=1): ``mean ± t((1+c)/2, n−1)·s/√n``. None when n < 2."""
    n = len(scores)
    if n < 2:
        return None
    mean = float(np.mean(scores))
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * float(np.std(scores, ddof=1)) / math.sqrt(n)
    return mean - half, mean + half


def paired_test(a: int, b: int, scores_a: list[float], scores_b: list[float], goal: str) -> PairedTest:
    """Compare configurations ranked ``a`` and ``b`` over the same folds (pure).

    The verdict uses the paired t-test at 5 %; the Wilcoxon p-value is given beside it
    (with fewer than 6 folds it cannot fall below 5 %, so it never decides alone).
    """
    n = len(scores_a)
    if n != len(scores_b) or n < 2:
        return PairedTest(
            a, b, n, None, None, None, f"#{a} and #{b} cannot be compared: fewer than 2 folds scored for both"
        )
    diff = np.asarray(scores_a, dtype=float) - np.asarray(scores_b, dtype=float)
    mean_diff = float(diff.mean())
    if np.allclose(diff, 0.0):
        return PairedTest(a, b, n, mean_diff, None, None, f"#{a} and #{b} scored the same on every fold")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if np.allclose(diff, diff[0]):  # no spread: the t statistic is infinite
            t_p = 0.0
        else:
            t_p = float(stats.ttest_rel(scores_a, scores_b).pvalue)
        w_p = float(stats.wilcoxon(diff).pvalue)
    better_a = (mean_diff < 0) == (goal == "minimize")
    if t_p < ALPHA:
        first, second = (a, b) if better_a else (b, a)
        verdict = f"#{first} is better than #{second} at 5 % (paired t-test p = {t_p:.3g}, {n} folds)"
    else:
        verdict = f"#{a} and #{b} are not distinguishable at 5 % (paired t-test p = {t_p:.3g}, {n} folds)"
    return PairedTest(a, b, n, mean_diff, t_p, w_p, verdict)


__all__ = ["ALPHA", "CONFIDENCE", "PairedTest", "paired_test", "t_interval"]
