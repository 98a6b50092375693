"""What the pools actor (:class:`~ludwig_hpo.execution.pool.WorkerPools`) hands out: how a
trial's run on a warm group ended, and its inspection view of groups and ended runs.

Plain records, pickled between the pools actor, the trial actors and the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from ludwig_hpo.errors import WorkerLoss

#: How a run on a group ended.
RunStatus = Literal["finished", "stopped", "failed"]


@dataclass(frozen=True)
class RunResult:
    """How one trial's run on a group ended (sent from the pools actor to the trial actor).

    Attributes:
        status: every rank finished, the ranks left at an epoch boundary (stopped), or a
            rank raised or died (failed).
        error: for a failed run, one ``Type: message`` line of the cause.
        traceback: for a failed run, the remote traceback text.
        group_restarted: the group was discarded (a worker died, or a rank did not end in
            time after another raised); the next trial on the slot gets a new one.
        loss: for a run failed by a dead worker, which rank died, where and how (``error``
            is then its description).
    """

    status: RunStatus
    error: str = ""
    traceback: str = ""
    group_restarted: bool = False
    loss: WorkerLoss | None = None


class RunRecord(TypedDict):
    """One ended run in :meth:`~ludwig_hpo.execution.pool.WorkerPools.info`'s ``history``.

    ``start`` and ``end`` are epoch seconds; ``build`` says which start of the group ran it
    (1: the first); ``epochs`` counts the epochs rank 0 reported, ``epochs_at_stop`` those it had
    reported when the trial asked its group to stop (None: it never did).
    """

    trial_id: str
    slot: int
    start: float
    end: float
    status: RunStatus
    build: int
    epochs: int
    epochs_at_stop: int | None


class GroupInfo(TypedDict):
    """One group in :meth:`~ludwig_hpo.execution.pool.WorkerPools.info`: its slot, whether its
    workers are up, their pids (rank order), how many times it was started, and the trial it
    runs now (None when free)."""

    slot: int
    up: bool
    pids: list[int]
    builds: int
    trial_id: str | None


class PoolsInfo(TypedDict):
    """What :meth:`~ludwig_hpo.execution.pool.WorkerPools.info` returns (oldest run first)."""

    groups: list[GroupInfo]
    history: list[RunRecord]
