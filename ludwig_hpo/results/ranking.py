"""Ranking a search's trials: best first, the distinct top-k configurations, and the epochs at
which ASHA compares trials. Pure; used by the driver after the search and by the MLflow sink's
caller to tag the rung at which a stopped trial ended."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

from ludwig_hpo.results.records import TrialRecord


def rank_trials(records: Iterable[TrialRecord], goal_sign: float) -> list[TrialRecord]:
    """The trials that reported a value and did not fail, best first (``goal_sign``: +1 when
    smaller is better, -1 when larger is). Ties keep the records' order."""
    scored = [r for r in records if r.objective_best is not None and r.status != "FAILED"]
    return sorted(scored, key=lambda r: goal_sign * (r.objective_best if r.objective_best is not None else math.nan))


def distinct_top(ranked: Sequence[TrialRecord], k: int) -> list[TrialRecord]:
    """The first ``k`` trials of ``ranked`` with distinct parameters (a repeated configuration,
    e.g. a grid point sampled twice, counts once: the better-ranked trial stands for it)."""
    seen: set[str] = set()
    out: list[TrialRecord] = []
    for r in ranked:
        if len(out) == k:
            break
        key = json.dumps(r.params, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def asha_rungs(grace_period: int, reduction_factor: float, max_t: int) -> tuple[int, ...]:
    """Epochs at which ASHA (one bracket, as Tune's ``AsyncHyperBandScheduler`` builds it)
    compares trials: ``grace_period * reduction_factor**k`` for
    ``k = 0 .. floor(log_rf(max_t / grace_period))``."""
    n = int(math.log(max_t / grace_period) / math.log(reduction_factor) + 1)
    return tuple(int(grace_period * reduction_factor**k) for k in range(n))
