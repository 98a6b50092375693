"""The Pareto set of a multi-objective search: trials no other trial beats on every
objective. Pure (no Ray, no Optuna), so the sweep driver and the report read it alike."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ludwig_hpo.results.records import TrialRecord


def pareto_trial_ids(records: Iterable[TrialRecord], objectives: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """Trials not dominated on ``objectives`` (``[(reported key, goal)]``), by the metrics of
    each trial's last reported epoch; failed trials and trials missing a metric are left out.

    A trial is dominated when another is at least as good on every objective and better on
    one. ``records``: :class:`~ludwig_hpo.results.TrialRecord` values, in any order; the
    result keeps their order. Runs in the driver or the process building the report.
    """
    points: list[tuple[str, list[float]]] = []
    for r in records:
        last = r.history[-1].metrics if r.history else {}
        if r.status == "FAILED" or any(
            not isinstance(last.get(k), (int, float)) or not math.isfinite(last[k]) for k, _ in objectives
        ):
            continue
        points.append((r.trial_id, [last[k] * (1.0 if g == "minimize" else -1.0) for k, g in objectives]))

    def dominates(a: list[float], b: list[float]) -> bool:
        return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))

    return tuple(tid for tid, p in points if not any(dominates(q, p) for _, q in points))


__all__ = ["pareto_trial_ids"]
