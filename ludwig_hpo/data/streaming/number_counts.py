"""A number column's training values as counts of distinct values, in numpy arrays (24 bytes a
distinct value): what the streamed fit keeps of a number column, from which it takes the same
statistics, fill values and quartiles the in-memory path takes from the whole column. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: Batches of counts gathered before they are folded into the sorted counts (folding each
#: batch at once would re-sort the counts once per batch).
_FOLD_ABOVE = 1 << 20


@dataclass
class NumberCounts:
    """Distinct values (sorted float64), their counts and the position each was first seen at.

    ``pending`` holds counts not yet folded in; every reader folds them first.
    """

    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    @classmethod
    def of(cls, values: np.ndarray, positions: np.ndarray) -> NumberCounts:
        """The counts of ``values`` (present values only, float64) seen at ``positions``. Pure."""
        keys, first, counts = np.unique(np.asarray(values, np.float64), return_index=True, return_counts=True)
        return cls(keys, counts.astype(np.int64), np.asarray(positions, np.int64)[first])

    def merge(self, other: NumberCounts, offset: int) -> None:
        """Add ``other`` (a later batch, its positions shifted by ``offset``)."""
        other.fold()
        self.pending.append((other.values, other.counts, other.first + offset))
        if sum(len(v) for v, _, _ in self.pending) > max(_FOLD_ABOVE, len(self.values)):
            self.fold()

    def fold(self) -> None:
        """Fold the pending counts into the sorted counts."""
        if not self.pending:
            return
        values = np.concatenate([self.values, *(v for v, _, _ in self.pending)])
        counts = np.concatenate([self.counts, *(c for _, c, _ in self.pending)])
        first = np.concatenate([self.first, *(f for _, _, f in self.pending)])
        self.pending = []
        self.values, inverse = np.unique(values, return_inverse=True)
        self.counts = np.bincount(inverse, weights=counts, minlength=len(self.values)).astype(np.int64)
        self.first = np.full(len(self.values), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(self.first, inverse, first)

    @property
    def empty(self) -> bool:
        self.fold()
        return len(self.values) == 0

    def with_value(self, value: float, count: int, first: int | None) -> NumberCounts:
        """A copy with ``count`` more of ``value`` first seen at ``first`` (missing cells filled)."""
        self.fold()
        out = NumberCounts(self.values, self.counts, self.first)
        if count and first is not None:
            out.pending.append((np.array([value]), np.array([count], np.int64), np.array([first], np.int64)))
            out.fold()
        return out

    def mode(self) -> float:
        """The most frequent value, the first seen of a tie (pandas' ``value_counts().index[0]``)."""
        self.fold()
        return float(self.values[np.lexsort((self.first, -self.counts))[0]])

    def mean(self) -> float:
        """The values' mean (a sum in another order than pandas': equal to about 1e-15 relative)."""
        self.fold()
        return math.fsum(self.values * self.counts) / float(self.counts.sum())

    def statistics(self) -> dict[str, float]:
        """:func:`~ludwig_hpo.data.numbers.statistics` of the counted values: ``min``, ``max``
        and the quartiles equal, ``mean`` and ``std`` to about 1e-15 relative."""
        self.fold()
        keys, counts = self.values, self.counts
        n = int(counts.sum())
        mean = self.mean()
        std = math.sqrt(math.fsum(counts * (keys - mean) ** 2) / (n - 1)) if n > 1 else 0.0
        cum = np.cumsum(counts)
        q1, q2, q3 = (_percentile(keys, cum, n, q) for q in (25, 50, 75))
        return {"mean": mean, "std": std, "min": float(keys[0]), "max": float(keys[-1]), "q1": q1, "q2": q2, "q3": q3}


def _percentile(keys: np.ndarray, cum: np.ndarray, n: int, q: float) -> float:
    """numpy's ``linear`` percentile ``q`` of ``n`` values given as sorted distinct ``keys`` and
    their cumulative counts ``cum``, computed as numpy computes it (same index, same lerp)."""
    quantile = q / 100
    virtual = n * quantile + (1 + quantile * (1 - 1 - 1)) - 1
    lo = int(np.floor(virtual))
    lo_i, hi_i = min(max(lo, 0), n - 1), min(max(lo + 1, 0), n - 1)
    gamma = virtual - lo
    a, b = keys[np.searchsorted(cum, lo_i, side="right")], keys[np.searchsorted(cum, hi_i, side="right")]
    diff = b - a
    return float(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
