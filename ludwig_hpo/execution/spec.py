"""What one trial's workers are handed: a frozen, picklable :class:`TrialSpec`.

The same spec reaches every executor's ranks: the fresh Ray Train job's workers, the Tune
trial actor of a 1-worker trial, a warm group's :class:`~ludwig_hpo.execution.pool_worker.PoolWorker`
and the Ray-free processes of :mod:`ludwig_hpo.execution.local`. Imports no Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ludwig_hpo.train.job import Job

#: Which way a trial's checkpoints rank (by ``checkpoint_objective``).
Mode = Literal["min", "max"]


@dataclass(frozen=True)
class TrialSpec:
    """Everything one trial's worker needs besides the prepared data, the device and a reporter.

    Built in the Tune trial actor (or by :mod:`ludwig_hpo.execution.local`), pickled to each
    rank; every rank of a trial gets the same spec.

    Attributes:
        raw: the sweep file's mapping as parsed (parameters not applied).
        params: the trial's sampled ``{dotted path: value}`` (decoded: choice parameters hold
            their category, not its index); applied to ``raw`` on each rank.
        job: what the run fits and scores, with its resume folder, seed offset and
            checkpoint schedule.
        trial_id: Tune's trial id; names the trial's folder under ``storage_path`` and its
            Ray Train run.
        storage_path: folder that holds each trial's checkpoints (``<storage_path>/<trial_id>/``).
        mode: ``"min"`` or ``"max"``: which checkpoint a trial keeps (by ``checkpoint_objective``).
        batch_cache: handle of the sweep's batch-size cache actor
            (:class:`~ludwig_hpo.execution.cache.BatchSizeCacheActor`), or None for no
            shared cache (each trial with ``batch_size: auto`` searches again).
    """

    raw: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    job: Job = field(default_factory=Job)
    trial_id: str = "local"
    storage_path: str = ""
    mode: Mode = "min"
    batch_cache: Any = None
