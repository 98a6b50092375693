"""The pools actor's (:class:`~ludwig_hpo.execution.pool.WorkerPools`) bookkeeping of its
groups and their runs: which trial runs where, what rank 0 reported, and how many starts of a
group failed before the run it carries (a trial's ``worker_group_restarts``).

Lives in the pools actor's process only; :mod:`.pool_records` holds what it hands out.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ludwig_hpo.execution.pool_records import RunRecord, RunResult
from ludwig_hpo.train.report_keys import WORKER_GROUP_RESTARTS


@dataclass
class PoolRun:
    """One trial on one group, as the pools actor sees it (times are epoch seconds)."""

    token: str
    trial_id: str
    slot: int
    started: float
    messages: list[dict[str, Any]] = field(default_factory=list)
    result: RunResult | None = None
    stop: bool = False
    last_beat: float = 0.0
    ended: float | None = None
    epochs: int = 0
    #: the epochs rank 0 had reported when the stop was asked for (None: never asked)
    epochs_at_stop: int | None = None
    #: how many starts of its group failed (a worker died) before the one it runs on
    restarts: int = 0
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def add_report(self, metrics: dict[str, Any]) -> None:
        """Queue rank 0's metrics of one epoch for the trial; the first epoch's carry
        ``worker_group_restarts``, so the trial logs its group's failed starts once."""
        if not self.epochs:
            metrics = {**metrics, WORKER_GROUP_RESTARTS: self.restarts}
        self.messages.append(metrics)
        self.epochs += 1
        self.event.set()

    def record(self, build: int) -> RunRecord:
        """The ended run's :class:`RunRecord`, ``build`` being the start of its group that ran it.

        Raises:
            AssertionError: the run has not ended (no result or end time yet).
        """
        assert self.result is not None and self.ended is not None
        return RunRecord(
            trial_id=self.trial_id,
            slot=self.slot,
            start=self.started,
            end=self.ended,
            status=self.result.status,
            build=build,
            epochs=self.epochs,
            epochs_at_stop=self.epochs_at_stop,
        )


@dataclass
class PoolGroup:
    """One trial slot's group of workers, as the pools actor sees it."""

    slot: int
    #: the ranks' actor handles (rank order), or None while the group is down
    workers: list[Any] | None = None
    pids: list[int] = field(default_factory=list)
    run: PoolRun | None = None
    builds: int = 0
    #: starts that failed since the group last ran a trial (a warm-up's failure is retried silently
    #: by the next trial's start; that trial's first report says so)
    failed_starts: int = 0

    def hand_restarts_to(self, run: PoolRun) -> None:
        """The group is up for ``run``: its failed starts since the last trial become the run's
        restarts, and the count begins again."""
        run.restarts, self.failed_starts = self.failed_starts, 0
