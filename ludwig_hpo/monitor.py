"""A Tune callback that keeps the sweep's trial book and forwards trial events to sinks
(MLflow, the console). Runs in the driver, on Tune's event loop thread."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ray.tune import Callback

from ludwig_hpo.errors import one_line_error
from ludwig_hpo.results import EpochRecord, TrialRecord
from ludwig_hpo.search.algorithms import OBJECTIVE, TIME_ATTR


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
    status: str = "RUNNING"
    history: list[EpochRecord] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_text: str | None = None
    stopped_by: str | None = None
    checkpoint: str | None = None  # checkpoint folder of the best epoch (multi-worker trials)

    def best(self, sign: float) -> float | None:
        vals = [h.objective for h in self.history if math.isfinite(h.objective)]
        return min(vals, key=lambda v: sign * v) if vals else None

    def record(self, sign: float) -> TrialRecord:
        """Immutable snapshot."""
        return TrialRecord(
            trial_id=self.trial_id, status=self.status, params=dict(self.params),
            objective_last=self.history[-1].objective if self.history else None,
            objective_best=self.best(sign), history=tuple(self.history),
            batch_size=self.last.get("batch_size"),
            wall_time_s=(self.ended or time.time()) - self.started,
            train_time_s=self.last.get("train_time_s"), error=self.error)


def _error_text(trial) -> str:
    """The traceback Tune wrote for a failed trial (its local error file, else storage)."""
    path = getattr(trial, "error_file", None)
    try:
        if path and os.path.isfile(path):
            return open(path).read()
    except OSError:
        pass
    return trial.get_error() or "unknown error"


class Sink(Protocol):
    """Receives trial events from :class:`SweepMonitor` (driver only)."""

    def trial_started(self, t: LiveTrial) -> None: ...
    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None: ...
    def trial_ended(self, t: LiveTrial) -> None: ...


class SweepMonitor(Callback):
    """Keeps one :class:`LiveTrial` per Tune trial and forwards events to ``sinks``.

    Args:
        epochs: epochs of a complete trial; a trial that ends earlier without an error was
            stopped by the scheduler and is KILLED.
        goal_sign: +1 when smaller is better, -1 otherwise.
        early_stopping: whether a scheduler may stop trials (else every completed trial is
            FINISHED, whatever its number of epochs).
        describe: maps a Tune trial's ``(trial id, config)`` to its :class:`TrialDescription`.
        sinks: receivers of the events, called in order.
    """

    def __init__(self, *, epochs: int, goal_sign: float,
                 describe: Callable[[str, dict], TrialDescription], sinks: list[Sink],
                 early_stopping: bool = True) -> None:
        self.epochs = epochs
        self.early_stopping = early_stopping
        self.sign = goal_sign
        self.describe = describe
        self.sinks = sinks
        self.trials: dict[str, LiveTrial] = {}

    def __getstate__(self) -> dict:
        # Tune pickles its run config (callbacks included) into the experiment folder; the
        # sinks hold live clients and consoles, which belong to this driver process only.
        return {**self.__dict__, "sinks": [], "describe": None}

    def _emit(self, event: str, *args: Any) -> None:
        for s in self.sinks:
            getattr(s, event)(*args)

    def _start(self, trial) -> LiveTrial:
        d = self.describe(trial.trial_id, trial.config)
        t = self.trials[trial.trial_id] = LiveTrial(trial.trial_id, d.params, d.tags, d.name)
        self._emit("trial_started", t)
        return t

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self._start(trial)

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        t = self.trials.get(trial.trial_id)
        if t is None or OBJECTIVE not in result:
            return
        metrics = {k: v for k, v in result.items() if "/" in k and isinstance(v, (int, float))}
        best = t.best(self.sign)
        objective = float(result[OBJECTIVE])
        if result.get("checkpoint_path") and (best is None or self.sign * objective <= self.sign * best):
            # Train keeps the best-scored checkpoint, the latest of equal scores
            t.checkpoint = result["checkpoint_path"]
        t.history.append(EpochRecord(epoch=int(result[TIME_ATTR]), objective=objective, metrics=metrics))
        t.last = dict(result)
        self._emit("trial_result", t, result)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        t = self.trials.get(trial.trial_id)
        if t is None:
            return
        t.ended = time.time()
        done = not self.early_stopping or (t.history and t.history[-1].epoch >= self.epochs)
        t.status = "FINISHED" if done else "KILLED"
        self._emit("trial_ended", t)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        t = self.trials.get(trial.trial_id) or self._start(trial)  # it may fail before it starts
        t.ended = time.time()
        t.status = "FAILED"
        t.error_text = _error_text(trial)
        t.error = one_line_error(t.error_text)
        self._emit("trial_ended", t)

    def on_experiment_end(self, trials, **info) -> None:
        # Trials cut off by the time budget end without a complete/error event.
        self.close_running("time budget")

    def close_running(self, reason: str) -> None:
        """End every still-running trial as KILLED, stopped by ``reason`` (driver only)."""
        for t in self.trials.values():
            if t.status == "RUNNING":
                t.ended, t.status, t.stopped_by = time.time(), "KILLED", reason
                self._emit("trial_ended", t)

    def records(self) -> tuple[TrialRecord, ...]:
        """Snapshots of every trial, in start order."""
        return tuple(t.record(self.sign) for t in self.trials.values())


class MlflowSink:
    """Logs each trial as a child run of the sweep's parent run (driver only)."""

    def __init__(self, store, parent_id: str) -> None:
        self.store = store
        self.parent_id = parent_id
        self.run_ids: dict[str, str] = {}

    def trial_started(self, t: LiveTrial) -> None:
        self.run_ids[t.trial_id] = self.store.start_run(
            t.name, parent_id=self.parent_id, tags={"trial_id": t.trial_id, **t.tags}, params=t.params)

    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None:
        run_id = self.run_ids[t.trial_id]
        metrics = {k: v for k, v in result.items()
                   if k not in ("batch_size", "global_batch_size", "eval_batch_size", "world_size", TIME_ATTR,
                                "training_iteration", "batch_size_cache_hit",
                                "timestamp", "pid", "time_this_iter_s", "time_total_s", "time_since_restore",
                                "iterations_since_restore")
                   and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if len(t.history) > 1:
            self.store.log_metrics(run_id, metrics, step=int(result[TIME_ATTR]))
            return
        # decided inside the trial (batch size tuning), logged once, with the first metrics:
        # one SQLite transaction instead of three on Tune's event loop
        first = {k: result[k] for k in ("batch_size", "global_batch_size", "eval_batch_size", "world_size")
                 if k in result}
        tags = {}
        if "batch_size_tried" in result:
            tags["batch_size_tried"] = result["batch_size_tried"]
        if "batch_size_cache_hit" in result:
            tags["batch_size_cache"] = "hit" if result["batch_size_cache_hit"] else "miss"
        self.store.log_batch(run_id, params=first, tags=tags, metrics=metrics, step=int(result[TIME_ATTR]))

    def trial_ended(self, t: LiveTrial) -> None:
        run_id = self.run_ids.get(t.trial_id)
        if run_id is None:
            return
        tags: dict[str, Any] = {"status": t.status}
        if t.status == "KILLED":
            tags["stopped_by"] = t.stopped_by or "scheduler"
            if t.history:
                tags["stopped_at_epoch"] = t.history[-1].epoch
        if t.error:
            tags["error"] = t.error
        self.store.set_tags(run_id, tags)
        if t.error_text:
            self.store.log_text(run_id, t.error_text, "error.txt")
        self.store.end_run(run_id, t.status)
