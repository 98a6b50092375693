"""A Tune callback that keeps the sweep's trial book and forwards trial events to sinks
(MLflow, the console). Runs in the driver, on Tune's event loop thread."""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ray.tune import Callback

from ludwig_hpo.errors import one_line_error
from ludwig_hpo.results import EpochRecord, TrialRecord
from ludwig_hpo.search.algorithms import CHECKPOINT_EPOCH, CHECKPOINT_OBJECTIVE, OBJECTIVE, TIME_ATTR


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


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _error_text(trial) -> str:
    """The traceback Tune wrote for a failed trial (its local error file, else storage),
    without terminal colour codes."""
    path = getattr(trial, "error_file", None)
    text = None
    try:
        if path and os.path.isfile(path):
            text = open(path).read()
    except OSError:
        pass
    return _ANSI.sub("", text or trial.get_error() or "unknown error")


class Sink(Protocol):
    """Receives trial events from :class:`SweepMonitor` (driver only)."""

    def trials_restored(self, trials: list[LiveTrial]) -> None: ...
    def trial_retried(self, t: LiveTrial) -> None: ...
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
        self._interrupted: set[str] = set()
        #: journal entries of trials that ended after Tune last saved its state (a resumed
        #: sweep of more trials than Tune saves at every step); adopted on restore
        self.ended_outside_state: dict[str, dict] = {}
        #: a resumed sweep's journal entries (:func:`ludwig_hpo.journal.read_journal`): trials
        #: that replay their recorded results end as recorded
        self.replayed: dict[str, dict] = {}
        self._write_error: Exception | None = None  # a sink's write error met while Tune saved

    def __getstate__(self) -> dict:
        # Tune pickles its run config (callbacks included) into the experiment folder; the
        # sinks hold live clients and consoles, which belong to this driver process only.
        return {**self.__dict__, "sinks": [], "describe": None, "_write_error": None}

    # Tune saves these with its experiment state and hands them back on restore, so a resumed
    # sweep knows the trials that ended before the interruption.
    def get_state(self) -> dict:
        # A resumed sweep trusts Tune's saved state: a trial it holds as ended is not run
        # again, so its run must be complete in the store first. The sinks write in the
        # background and an ended trial is not waited for when it ends; the wait is here, when
        # Tune saves its state (at every step of its loop for up to 200 trials, every ~10 s or
        # more above), for the trials that ended since the last save.
        for s in self.sinks:
            wait = getattr(s, "wait_for_ended", None)
            if wait is not None:
                try:
                    wait()
                except Exception as e:
                    # Tune's last save swallows errors: raised again by flush() at the phase's end
                    self._write_error = self._write_error or e
                    raise
        return {"trials": dict(self.trials)}

    def set_state(self, state: dict) -> None:
        self.trials = dict(state.get("trials", {}))
        self._adopt(self.ended_outside_state)
        # trials the interruption cut off: their next start begins again (and reopens the run)
        self._interrupted = {tid for tid, t in self.trials.items() if t.status == "RUNNING"}
        self._emit("trials_restored", list(self.trials.values()))

    def _adopt(self, entries: dict[str, dict]) -> None:
        """Add the trials that ended after Tune last saved its state (journal entries with
        their config), as they ended: Tune's restored state does not hold them, but they
        count toward the sweep's trials, and their MLflow runs exist."""
        from ludwig_hpo.journal import restore_trial

        for tid, entry in entries.items():
            if tid in self.trials:
                continue
            d = self.describe(tid, entry["config"])
            t = LiveTrial(tid, d.params, d.tags, d.name, current=dict(d.params), config=dict(entry["config"]))
            restore_trial(t, entry)
            if t.ended is None:  # a journal of an earlier version
                t.ended = t.started
            self.trials[tid] = t

    def handle(self, key: str) -> MonitorHandle:
        """The callback to give Tune: a picklable stand-in that forwards to this monitor
        while it is registered under ``key`` in this process (see :class:`MonitorHandle`)."""
        _LIVE[key] = self
        return MonitorHandle(key)

    def _emit(self, event: str, *args: Any) -> None:
        for s in self.sinks:
            getattr(s, event)(*args)

    def _start(self, trial) -> LiveTrial:
        d = self.describe(trial.trial_id, trial.config)
        before = self.trials.get(trial.trial_id)
        t = self.trials[trial.trial_id] = LiveTrial(trial.trial_id, d.params, d.tags, d.name, current=dict(d.params),
                                                    config=dict(trial.config))
        if before is not None:  # run again after a failure: it continues from its checkpoint
            t.retries, t.history = before.retries, list(before.history)
        self._emit("trial_started", t)
        return t

    def _follow_config(self, t: LiveTrial, trial) -> None:
        """Track a running trial's parameters: PBT changes ``trial.config`` when it exploits."""
        params = self.describe(trial.trial_id, trial.config).params
        if params != t.current:
            t.current = dict(params)

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        t = self.trials.get(trial.trial_id)
        if t is not None and t.status == "RUNNING" and trial.trial_id not in self._interrupted:
            # PBT paused it and starts it again, perhaps with mutated parameters (it exploited
            # another trial): it keeps its record (sampled params, history) and its run
            self._follow_config(t, trial)
            return
        self._interrupted.discard(trial.trial_id)
        self._start(trial)  # first start, a retry after a failure, or a restored sweep's trial

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        t = self.trials.get(trial.trial_id)
        if t is None or OBJECTIVE not in result:
            return
        self._follow_config(t, trial)
        metrics = {k: v for k, v in result.items() if "/" in k and isinstance(v, (int, float))}
        objective = float(result[OBJECTIVE])
        # Train's checkpoint (fresh multi-worker trials), or the one this result handed to Tune
        path = result.get("checkpoint_path")
        if not path and result.get("checkpoint_dir_name") and getattr(trial, "path", None):
            path = os.path.join(trial.path, result["checkpoint_dir_name"])
        if path:
            # its model.pt holds the trial's best weights so far: taken unless a PBT clone
            # brought a donor's best that is worse than the trial's own (Train and Tune keep
            # the best-scored checkpoint by checkpoint_objective, the latest of equal scores)
            held, ck = t.checkpoint_objective, float(result.get(CHECKPOINT_OBJECTIVE, objective))
            if held is None or held != held or (ck == ck and self.sign * ck <= self.sign * held):
                t.checkpoint, t.checkpoint_objective = path, ck
                t.checkpoint_epoch = int(result.get(CHECKPOINT_EPOCH, result[TIME_ATTR]))
        epoch = int(result[TIME_ATTR])
        while t.history and t.history[-1].epoch >= epoch:  # continued from an earlier checkpoint
            t.history.pop()
        t.history.append(EpochRecord(epoch=epoch, objective=objective, metrics=metrics))
        t.last = dict(result)
        self._emit("trial_result", t, result)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        t = self.trials.get(trial.trial_id)
        if t is None:
            return
        t.ended = time.time()
        done = not self.early_stopping or (t.history and t.history[-1].epoch >= self.epochs)
        t.status = "FINISHED" if done else "KILLED"
        if trial.trial_id in self.replayed:  # it had ended before the sweep was interrupted
            from ludwig_hpo.journal import restore_trial

            restore_trial(t, self.replayed[trial.trial_id])
        self._emit("trial_ended", t)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        t = self.trials.get(trial.trial_id) or self._start(trial)  # it may fail before it starts
        t.ended = time.time()
        t.status = "FAILED"
        t.error_text = _error_text(trial)
        t.error = one_line_error(t.error_text)
        self._emit("trial_ended", t)

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        """A failed trial that Tune runs again (``executor.max_failures``): it restarts, and its
        next start continues the same record and MLflow run."""
        t = self.trials.get(trial.trial_id)
        if t is not None:
            t.retries += 1
            t.error = one_line_error(_error_text(trial))
            self._emit("trial_retried", t)

    def on_experiment_end(self, trials, **info) -> None:
        if sys.exc_info()[0] is not None:
            return  # Tune's clean-up after an error in its loop: the sweep fails with that error
        for trial in trials:
            t = self.trials.get(trial.trial_id)
            if t is None or t.status != "RUNNING":
                continue
            if trial.status == "TERMINATED" and trial.trial_id in self.replayed:
                # it ended before an interruption; Tune's restored state holds its end but the
                # monitor's does not (Tune writes its part first): end it as the journal has it
                self.on_trial_complete(0, trials, trial)
            elif trial.status == "ERROR":
                self.on_trial_error(0, trials, trial)
        # the others were cut off by the time budget: Tune stops them without an event
        self.close_running("time budget")

    def close_running(self, reason: str) -> None:
        """End every still-running trial as KILLED, stopped by ``reason`` (driver only)."""
        for t in self.trials.values():
            if t.status == "RUNNING":
                t.ended, t.status, t.stopped_by = time.time(), "KILLED", reason
                self._emit("trial_ended", t)

    def flush(self) -> None:
        """Wait until every sink that writes in the background (``flush()``) has written
        every event so far (driver only; the sweep calls it when a phase ends, interrupted
        or not).

        Raises:
            Exception: a sink's write error.
        """
        for s in self.sinks:
            flush = getattr(s, "flush", None)
            if flush is not None:
                flush()
        error, self._write_error = self._write_error, None
        if error is not None:
            raise error

    def records(self) -> tuple[TrialRecord, ...]:
        """Snapshots of every trial, in start order."""
        return tuple(t.record(self.sign) for t in self.trials.values())


_LIVE: dict[str, SweepMonitor] = {}


class MonitorHandle(Callback):
    """The Tune callback of a :class:`SweepMonitor`. Tune pickles its callbacks into the
    experiment folder and, on ``Tuner.restore``, uses the unpickled ones; this handle carries
    only a key, so the restored callback forwards to the monitor the resuming driver
    registered under that key (:meth:`SweepMonitor.handle`). Driver only."""

    def __init__(self, key: str) -> None:
        self.key = key

    @property
    def monitor(self) -> SweepMonitor:
        return _LIVE[self.key]

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self.monitor.on_trial_start(iteration, trials, trial, **info)

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        self.monitor.on_trial_result(iteration, trials, trial, result, **info)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self.monitor.on_trial_complete(iteration, trials, trial, **info)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self.monitor.on_trial_error(iteration, trials, trial, **info)

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        self.monitor.on_trial_recover(iteration, trials, trial, **info)

    def on_experiment_end(self, trials, **info) -> None:
        self.monitor.on_experiment_end(trials, **info)

    def get_state(self) -> dict:
        return self.monitor.get_state()

    def set_state(self, state: dict) -> None:
        self.monitor.set_state(state)


#: Result keys that are not per-epoch metrics: logged once as tags, or Tune's bookkeeping.
_ONCE_TAGS = ("batch_size", "global_batch_size", "eval_batch_size", "world_size", "seed")
_NOT_METRICS = frozenset(_ONCE_TAGS + (TIME_ATTR, "training_iteration", "batch_size_cache_hit", "setup_time_s",
                                       "eval_time_s", "timestamp", "pid", "time_this_iter_s", "time_total_s",
                                       "time_since_restore", "iterations_since_restore",
                                       CHECKPOINT_EPOCH, CHECKPOINT_OBJECTIVE, "resumed_from_epoch",
                                       "checkpoint_improved"))  # in journals of earlier versions


def wall_time_split(t: LiveTrial) -> dict[str, float]:
    """Where a trial's wall time went, in seconds, from the driver's clock and the worker's
    last report. The four parts sum to ``time/total_s``:

    - ``time/setup_s``: everything outside the worker's epoch loop and batch-size search:
      Train/Tune process start-up, data and model set-up, reporting, teardown;
    - ``time/batch_size_tuning_s``: ``batch_size: auto`` probes (0 on a cache hit);
    - ``time/training_s``: forward/backward/optimizer steps;
    - ``time/evaluation_s``: scoring the evaluated split(s) after each epoch.
    """
    total = (t.ended or time.time()) - t.started
    last = t.last
    tuning = float(last.get("batch_size_tuning_s") or 0.0)
    evaluation = float(last.get("eval_time_s") or 0.0)
    training = max(float(last.get("train_time_s") or 0.0) - evaluation, 0.0)
    return {"time/total_s": total, "time/setup_s": max(total - tuning - training - evaluation, 0.0),
            "time/batch_size_tuning_s": tuning, "time/training_s": training, "time/evaluation_s": evaluation}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass
class _Pending:
    """A trial's entries not yet written: parameters, tags, ``(name, value, step, ms)`` metrics."""

    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    metrics: list[tuple[str, Any, int, int]] = field(default_factory=list)


class MlflowSink:
    """Logs each trial as a child run of the sweep's parent run (driver only).

    A child run holds: tags ``trial_id``, ``run_kind`` and the description's tags; params =
    the trial's declared parameters by dotted path, nothing else (logged once: a param
    cannot change); artifact ``config.yaml`` (the resolved trial config); per-epoch metrics
    with ``step = epoch``; tags ``batch_size``, ``global_batch_size``, ``eval_batch_size``,
    ``world_size`` from the first report; at the end ``time/*`` metrics
    (:func:`wall_time_split`), ``status`` and, by status, ``stopped_by``,
    ``stopped_at_epoch``, ``stopped_at_rung`` (KILLED) or ``error`` + ``error.txt`` (FAILED).

    Parameters that change while a trial runs (PBT) are logged as metrics
    ``hparam/<path>`` (numbers, per step) and tags ``hparam.<path>`` (current value).
    A trial that starts again (resumed sweep, retry) continues its run from the epoch after
    the last one it logged, so no step is logged twice.

    The writes run on a background thread, in the order of the events
    (:class:`~ludwig_hpo.tracking.writer.OrderedWriter`), so Tune's event loop does not wait
    for the store while trials run; a trial's entries that queue up while an earlier write
    runs are merged into one write. A trial's end is queued too: :meth:`wait_for_ended` waits
    for the ends queued so far (the monitor calls it before Tune saves its experiment state),
    :meth:`flush` for everything (the sweep calls it when a phase ends, interrupted or not). A
    write that fails is raised on the next event or state save. On resume,
    :meth:`trials_restored` completes the runs of ended trials whose writes were still queued
    when the driver stopped (their epochs from the journal, their end).

    Args:
        store: the :class:`~ludwig_hpo.tracking.MlflowStore`.
        parent_id: run id of the sweep's parent run.
        run_kind: ``run_kind`` tag of runs whose description does not set one.
        config_text: maps a trial's parameters to its resolved config (YAML text), logged
            as ``config.yaml``; None to skip.
        rungs: the scheduler's rung milestones in epochs (ASHA), to tag a stopped trial's rung.
        resume: reuse the parent's existing child runs, matched by their ``trial_id`` tag, so a
            resumed sweep continues its trials' runs instead of duplicating them.
    """

    def __init__(self, store, parent_id: str, *, run_kind: str = "trial",
                 config_text: Callable[[dict[str, Any]], str] | None = None, rungs: tuple[int, ...] = (),
                 resume: bool = False) -> None:
        from ludwig_hpo.tracking.writer import OrderedWriter

        self.store = store
        self.parent_id = parent_id
        self.run_kind = run_kind
        self.config_text = config_text
        self.rungs = tuple(rungs)
        #: trial id -> its run id, or the future of the run being created
        self.run_ids: dict[str, str | Future] = store.children_by_tag(parent_id, "trial_id") if resume else {}
        self._skip_to: dict[str, int] = {}  # epochs a continued run already holds
        self._logged_to: dict[str, int] = {}  # the last epoch logged by this driver
        self._mutated: dict[str, dict[str, Any]] = {}  # last logged value of each mutated parameter
        self._writer = OrderedWriter("mlflow-sink")
        self._last_end: Future | None = None  # the last trial end queued
        #: per trial: what its events logged since its last write began (merged into one write)
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()

    def run_id(self, trial_id: str) -> str | None:
        """The trial's run id (waits for its creation); None if it has no run."""
        ref = self.run_ids.get(trial_id)
        return ref.result() if isinstance(ref, Future) else ref

    def flush(self) -> None:
        """Wait until every event so far is written to the store (driver only).

        Raises:
            Exception: the store's error if a write failed.
        """
        self._writer.flush()

    def wait_for_ended(self) -> None:
        """Wait until the run of every trial that ended so far is complete in the store (its
        end and every write queued before it); driver only.

        Raises:
            Exception: the store's error if a write failed.
        """
        if self._last_end is not None:
            self._writer.flush(until=self._last_end)

    def _write(self, trial_id: str, fn: Callable[[str], None]) -> Future:
        """Queue ``fn(run id)`` for the trial's run (after its creation and earlier writes);
        returns the write's future."""
        ref = self.run_ids[trial_id]
        return self._writer.submit(lambda: fn(ref.result() if isinstance(ref, Future) else ref))

    def _log(self, trial_id: str, *, params: dict[str, Any] | None = None, tags: dict[str, Any] | None = None,
             metrics: dict[str, Any] | None = None, step: int = 0) -> None:
        """Log to the trial's run: added to its pending entries, written by one queued write
        (events that arrive before it runs join it; later tag values win)."""
        now = int(time.time() * 1000)
        with self._lock:
            pending = self._pending.get(trial_id)
            queued = pending is not None
            if pending is None:
                pending = self._pending[trial_id] = _Pending()
            pending.params.update(params or {})
            pending.tags.update(tags or {})
            pending.metrics.extend((k, v, step, now) for k, v in (metrics or {}).items())
        if not queued:
            self._write(trial_id, lambda run_id: self._write_pending(trial_id, run_id))

    def _write_pending(self, trial_id: str, run_id: str) -> None:  # on the writer thread
        with self._lock:
            pending = self._pending.pop(trial_id, None)
        if pending is not None:
            self.store.log_steps(run_id, params=pending.params, tags=pending.tags, metrics=pending.metrics)

    def trials_restored(self, trials: list[LiveTrial]) -> None:
        # Runs are complete in the store for the trials Tune's saved state holds as ended; a
        # trial that ended after that state was saved (adopted from the journal) may have had
        # its end still queued when the driver stopped: it is written now, as recorded.
        ended = {t.trial_id: t for t in trials if t.status != "RUNNING" and t.trial_id in self.run_ids}
        if not ended:
            return
        running = self.store.children_by_tag(self.parent_id, "trial_id", status="RUNNING")
        for tid in sorted(ended.keys() & running.keys()):
            t = ended[tid]
            self._skip_to[tid] = self.store.last_step(running[tid])  # its later epochs were queued too
            # journals of earlier versions hold no times
            self._end(t, with_times=t.ended is not None and t.ended > t.started, backfill=True)

    def trial_retried(self, t: LiveTrial) -> None:
        if t.trial_id in self.run_ids:
            self._log(t.trial_id, tags={"retries": t.retries, f"retry_{t.retries}_error": t.error})
            # it continues from its last checkpoint: epochs it logs again are not logged twice
            # (waited for: after the writes queued before it)
            self._skip_to[t.trial_id] = self._writer.call(lambda: self.store.last_step(self.run_id(t.trial_id)))

    def trial_started(self, t: LiveTrial) -> None:
        if t.trial_id in self.run_ids:  # a resumed or retried trial continues its run
            def reopen(run_id: str) -> int:
                self.store.reopen_run(run_id)
                return self.store.last_step(run_id)

            # waited for: the next results are logged from the step after the last one held
            self._skip_to[t.trial_id] = self._writer.call(lambda: reopen(self.run_id(t.trial_id)))
            return
        tags = {"trial_id": t.trial_id, "run_kind": self.run_kind, **t.tags}
        params, name = dict(t.params), t.name

        def create() -> str:
            run_id = self.store.start_run(name, parent_id=self.parent_id, tags=tags)
            if self.config_text is not None:
                self.store.log_text(run_id, self.config_text(params), "config.yaml")
            return run_id

        self.run_ids[t.trial_id] = self._writer.submit(create)
        self._log(t.trial_id, params=params)

    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None:
        step = int(result[TIME_ATTR])
        if "resumed_from_epoch" in result:  # it continued from a checkpoint (restored, retried, PBT)
            self._log(t.trial_id, tags={"resumed_from_epoch": result["resumed_from_epoch"]})
        if step <= self._skip_to.get(t.trial_id, 0):
            return
        self._logged_to[t.trial_id] = max(self._logged_to.get(t.trial_id, 0), step)
        metrics = {k: v for k, v in result.items() if k not in _NOT_METRICS and _is_number(v)}
        metrics.update(self._mutations(t, step))
        if len(t.history) == 1 or t.trial_id in self._skip_to:  # decided inside the trial, logged once
            self._skip_to.pop(t.trial_id, None)
            tags = {k: result[k] for k in _ONCE_TAGS if k in result}
            if "batch_size_tried" in result:
                tags["batch_size_tried"] = result["batch_size_tried"]
            if "batch_size_cache_hit" in result:
                tags["batch_size_cache"] = "hit" if result["batch_size_cache_hit"] else "miss"
            self._log(t.trial_id, tags=tags, metrics=metrics, step=step)
            return
        self._log(t.trial_id, metrics=metrics, step=step)

    def _mutations(self, t: LiveTrial, step: int) -> dict[str, float]:
        """PBT: parameters that differ from the logged params, as ``hparam/<path>`` metrics
        (numbers) and ``hparam.<path>`` tags. Once a trial has mutated, its numeric
        parameters are logged at every step."""
        logged = self._mutated.get(t.trial_id)
        if logged is None:
            if t.current == t.params:
                return {}
            logged = self._mutated[t.trial_id] = {}
            # the values before the first change, so each curve starts where the trial did
            first = {f"hparam/{k}": v for k, v in t.params.items() if _is_number(v)}
            self._log(t.trial_id, metrics=first, step=max(step - 1, 0))
        changed = {k: v for k, v in t.current.items() if logged.get(k, t.params.get(k)) != v}
        if changed:
            logged.update(changed)
            self._log(t.trial_id, tags={f"hparam.{k}": v for k, v in changed.items()})
        return {f"hparam/{k}": v for k, v in t.current.items() if _is_number(v)}

    def trial_ended(self, t: LiveTrial) -> None:
        # a replayed trial keeps the times of the run that trained it; the resumed scheduler
        # may have cut its replay short: the epochs it did not replay are logged from its record
        self._end(t, with_times=not t.replayed, backfill=t.replayed)

    def _end(self, t: LiveTrial, *, with_times: bool, backfill: bool) -> None:
        """Queue the run's end: with ``backfill``, the recorded epochs the run does not hold
        (``objective`` and the ``<split>/<feature>/<metric>`` metrics); its status tags,
        ``time/*`` metrics (``with_times``), error text, end status."""
        if t.trial_id not in self.run_ids:
            return
        if backfill:
            held = max(self._logged_to.get(t.trial_id, 0), self._skip_to.get(t.trial_id, 0))
            for h in t.history:
                if h.epoch > held:
                    self._log(t.trial_id, metrics={**h.metrics, OBJECTIVE: h.objective}, step=h.epoch)
        tags: dict[str, Any] = {"status": t.status}
        if t.status == "KILLED":
            tags["stopped_by"] = t.stopped_by or "scheduler"
            if t.history:
                epoch = t.history[-1].epoch
                tags["stopped_at_epoch"] = epoch
                if t.stopped_by is None and epoch in self.rungs:  # rung 0 is the first milestone
                    tags["stopped_at_rung"] = self.rungs.index(epoch)
        if t.error:
            tags["error"] = t.error
        times = wall_time_split(t) if with_times else {}
        step = t.history[-1].epoch if t.history else 0
        error_text, status = t.error_text, t.status
        self._log(t.trial_id, tags=tags, metrics=times, step=step)  # written before the run ends

        def end(run_id: str) -> None:
            if error_text:
                self.store.log_text(run_id, error_text, "error.txt")
            self.store.end_run(run_id, status)

        # queued, not waited for: the monitor waits for it before Tune saves its state
        # (SweepMonitor.get_state), and a resumed sweep writes the end of a trial the journal
        # holds as ended whose run is still RUNNING (trials_restored)
        self._last_end = self._write(t.trial_id, end)
