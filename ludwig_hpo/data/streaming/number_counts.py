"""A number column's training values as counts of distinct values, in numpy arrays (24 bytes a
distinct value): what the streamed fit keeps of a number column, from which it takes the same
statistics, fill values and quartiles the in-memory path takes from the whole column. Above
:data:`EXACT_LIMIT` distinct values the counts are compacted, so a column costs the driver at
most a few MB whatever the rows: ``min``, ``max``, ``mean`` and ``std`` stay exact (the latter
two from merged moments), the quartiles and the mode come from the compacted counts. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: Distinct values counted exactly; past it, neighbouring values are merged into buckets of a
#: few ``n / EXACT_LIMIT`` values each (see :meth:`NumberCounts._compact`).
EXACT_LIMIT = 1 << 17
#: Batches of counts gathered before they are folded into the sorted counts (folding each
#: batch at once would re-sort the counts once per batch).
_FOLD_ABOVE = EXACT_LIMIT


@dataclass(frozen=True)
class Moments:
    """Count, mean, sum of squared deviations (``m2``), minimum and maximum of values, merged
    with Chan et al.'s pairwise update: exact to rounding however the values are batched. Pure."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    @classmethod
    def of(cls, values: np.ndarray, counts: np.ndarray) -> Moments:
        """The moments of ``values`` each repeated ``counts`` times."""
        n = int(counts.sum())
        if not n:
            return cls()
        mean = float(np.sum(values * counts)) / n  # numpy's pairwise sums: rounding grows as log n
        m2 = float(np.sum(counts * (values - mean) ** 2))
        return cls(n, mean, m2, float(values.min()), float(values.max()))

    def plus(self, other: Moments) -> Moments:
        """These values and ``other``'s."""
        if not other.n:
            return self
        if not self.n:
            return other
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return Moments(n, mean, m2, min(self.min, other.min), max(self.max, other.max))


@dataclass
class NumberCounts:
    """Distinct values (sorted float64), their counts and the position each was first seen at,
    and the values' :class:`Moments`.

    ``pending`` holds counts not yet folded in; every reader folds them first. ``compacted``:
    past :data:`EXACT_LIMIT` distinct values, an entry stands for several neighbouring values.
    """

    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    moments: Moments = field(default_factory=Moments)
    compacted: bool = False

    @classmethod
    def of(cls, values: np.ndarray, positions: np.ndarray) -> NumberCounts:
        """The counts of ``values`` (present values only, float64) seen at ``positions``. Pure."""
        keys, first, counts = np.unique(np.asarray(values, np.float64), return_index=True, return_counts=True)
        counts = counts.astype(np.int64)
        out = cls(keys, counts, np.asarray(positions, np.int64)[first], moments=Moments.of(keys, counts))
        out._compact()
        return out

    def merge(self, other: NumberCounts, offset: int) -> None:
        """Add ``other`` (a later batch, its positions shifted by ``offset``)."""
        other.fold()
        self.pending.append((other.values, other.counts, other.first + offset))
        self.moments = self.moments.plus(other.moments)
        self.compacted = self.compacted or other.compacted
        if sum(len(v) for v, _, _ in self.pending) > _FOLD_ABOVE:
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
        self._compact()

    def _compact(self) -> None:
        """Merge neighbouring entries into buckets of at most ``w`` values' rank, ``w`` the
        smallest power-of-two multiple of ``4 n / EXACT_LIMIT`` that leaves at most
        :data:`EXACT_LIMIT` entries. An entry heavier than ``w`` (a value seen that often, or an
        earlier bucket) stays alone; a bucket keeps its most frequent entry's value (the first
        seen of a tie, so a frequent value survives as the mode), both counts and the earlier
        first position. A bucket never holds more than ``2 w`` values, whatever order the
        values came in, which bounds a quartile's rank error by ``8 / EXACT_LIMIT``."""
        if len(self.values) <= EXACT_LIMIT:
            return
        self.compacted = True
        n = int(self.counts.sum())
        w = -(-4 * n // EXACT_LIMIT)
        while True:
            start = np.cumsum(self.counts) - self.counts  # the rank each entry starts at
            bucket = start // w
            heavy = self.counts > w
            new = np.ones(len(self.values), bool)
            new[1:] = (bucket[1:] != bucket[:-1]) | heavy[1:] | heavy[:-1]
            if int(new.sum()) <= EXACT_LIMIT:
                break
            w *= 2
        edges = np.flatnonzero(new)
        ids = np.cumsum(new) - 1
        order = np.lexsort((self.first, -self.counts, ids))  # per bucket: most frequent, then first seen
        leaders = order[np.flatnonzero(np.r_[True, ids[order][1:] != ids[order][:-1]])]
        self.values = self.values[leaders]
        self.counts = np.add.reduceat(self.counts, edges)
        self.first = np.minimum.reduceat(self.first, edges)

    @property
    def empty(self) -> bool:
        self.fold()
        return len(self.values) == 0

    def with_value(self, value: float, count: int, first: int | None) -> NumberCounts:
        """A copy with ``count`` more of ``value`` first seen at ``first`` (missing cells filled)."""
        self.fold()
        out = NumberCounts(self.values, self.counts, self.first, moments=self.moments, compacted=self.compacted)
        if count and first is not None:
            out.pending.append((np.array([value]), np.array([count], np.int64), np.array([first], np.int64)))
            out.moments = out.moments.plus(Moments(count, float(value), 0.0, float(value), float(value)))
            out.fold()
        return out

    def mode(self) -> float:
        """The most frequent value, the first seen of a tie (pandas' ``value_counts().index[0]``);
        once compacted, the most frequent entry's value."""
        self.fold()
        return float(self.values[np.lexsort((self.first, -self.counts))[0]])

    def mean(self) -> float:
        """The values' mean (a sum in another order than pandas': equal to about 1e-15 relative)."""
        self.fold()
        if self.compacted:
            return self.moments.mean
        return math.fsum(self.values * self.counts) / float(self.counts.sum())

    def statistics(self) -> dict[str, float]:
        """:func:`~ludwig_hpo.data.numbers.statistics` of the counted values: ``min``, ``max``
        and the quartiles equal, ``mean`` and ``std`` to about 1e-15 relative; once compacted,
        the quartiles are those of the compacted counts (within ``8 / EXACT_LIMIT`` of their
        rank, whatever the values' order)."""
        self.fold()
        keys, counts = self.values, self.counts
        n = int(counts.sum())
        cum = np.cumsum(counts)
        q1, q2, q3 = (_percentile(keys, cum, n, q) for q in (25, 50, 75))
        if self.compacted:
            m = self.moments
            std = math.sqrt(m.m2 / (n - 1)) if n > 1 else 0.0
            return {"mean": m.mean, "std": std, "min": m.min, "max": m.max, "q1": q1, "q2": q2, "q3": q3}
        mean = self.mean()
        std = math.sqrt(math.fsum(counts * (keys - mean) ** 2) / (n - 1)) if n > 1 else 0.0
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
