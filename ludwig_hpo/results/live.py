"""The trial book the driver keeps while a sweep runs: one :class:`LiveTrial` per Tune trial,
how a trial is described, and the :class:`TrialSink` protocol of the receivers of trial events
(MLflow, the journal, the console). Plain records: no heavy imports."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ludwig_hpo.results.records import EpochRecord, TrialRecord, TrialStatus, parse_generated
from ludwig_hpo.train.report_keys import BATCH_SIZE, TRAIN_TIME_S


class TrialDescription(NamedTuple):
    """How a Tune trial is shown: its parameters by dotted path, MLflow tags, display name."""

    params: dict[str, Any]
    tags: dict[str, Any]
    name: str


@dataclass
class LiveTrial:
    """Mutable state of one trial while the sweep runs (see :class:`TrialRecord`)."""

    trial_id: str
    params: dict[str, Any]
    tags: dict[str, Any]
    name: str
    started: float = field(default_factory=time.time)
    ended: float | None = None
    status: TrialStatus = "RUNNING"
    history: list[EpochRecord] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_text: str | None = None
    stopped_by: str | None = None
    #: the trial's checkpoint folder holding the best weights it reported (its model.pt)
    checkpoint: str | None = None
    checkpoint_epoch: int | None = None  # the epoch of those weights
    checkpoint_objective: float | None = None  # and their objective
    replayed: bool = False  # a resumed sweep replayed its recorded results (it did not train)
    retries: int = 0  # times the trial was run again after failing (executor.max_failures)
    #: the trial's parameters now: differs from ``params`` (the sampled ones) after a PBT mutation
    current: dict[str, Any] = field(default_factory=dict)
    #: the config Tune gave the trial (the searcher's encoded values), as sampled
    config: dict[str, Any] = field(default_factory=dict)
    #: an llm trial's generated sample at its best epoch so far (the report's ``generated_sample``)
    generated: str | None = None

    def best(self, sign: float) -> float | None:
        """The best finite objective reported so far (``sign``: +1 minimizes, -1 maximizes), or None."""
        vals = [h.objective for h in self.history if math.isfinite(h.objective)]
        return min(vals, key=lambda v: sign * v) if vals else None

    def record(self, sign: float) -> TrialRecord:
        """Immutable snapshot."""
        return TrialRecord(
            trial_id=self.trial_id,
            status=self.status,
            params=dict(self.params),
            objective_last=self.history[-1].objective if self.history else None,
            objective_best=self.best(sign),
            history=tuple(self.history),
            batch_size=self.last.get(BATCH_SIZE),
            wall_time_s=(self.ended or time.time()) - self.started,
            train_time_s=self.last.get(TRAIN_TIME_S),
            error=self.error,
            stopped_by=self.stopped_by,
            stopped_at_epoch=self.history[-1].epoch if self.stopped_by and self.history else None,
            generated=parse_generated(self.generated),
        )


class TrialSink(Protocol):
    """Receives trial events from :class:`~ludwig_hpo.driver.monitor.SweepMonitor` (driver only)."""

    def trials_restored(self, trials: list[LiveTrial]) -> None: ...
    def trial_retried(self, t: LiveTrial) -> None: ...
    def trial_started(self, t: LiveTrial) -> None: ...
    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None: ...
    def trial_ended(self, t: LiveTrial) -> None: ...
