"""A Tune callback that keeps the sweep's trial book and forwards trial events to sinks
(MLflow, the journal, the console). Runs in the driver, on Tune's event loop thread."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ray.tune import Callback

from ludwig_hpo.errors import one_line_error
from ludwig_hpo.results.live import LiveTrial, TrialDescription, TrialSink
from ludwig_hpo.results.records import EpochRecord, TrialRecord, TrialStatus
from ludwig_hpo.tracking import layout
from ludwig_hpo.train.report_keys import (
    CHECKPOINT_DIR_NAME,
    CHECKPOINT_EPOCH,
    CHECKPOINT_OBJECTIVE,
    CHECKPOINT_PATH,
    END_EARLY_STOP,
    END_LAST_EPOCH,
    END_REASON,
    GENERATED_SAMPLE,
    OBJECTIVE,
    TIME_ATTR,
)

if TYPE_CHECKING:
    from ludwig_hpo.driver.journal import JournalEntry

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


class SweepMonitor(Callback):
    """Keeps one :class:`LiveTrial` per Tune trial and forwards events to ``sinks``.

    Args:
        epochs: epochs of a complete trial; a trial that ends earlier without an error was
            stopped by the scheduler: FINISHED, with ``stopped_by`` ``scheduler`` (KILLED is
            for interrupted trials only).
        goal_sign: +1 when smaller is better, -1 otherwise.
        early_stopping: whether a scheduler may stop trials (else every completed trial is
            FINISHED, whatever its number of epochs).
        describe: maps a Tune trial's ``(trial id, config)`` to its :class:`TrialDescription`.
        sinks: receivers of the events, called in order.
        objective_key: the reported key the objective copies (search trials), kept in the
            epochs' metrics when another score repeats it (:func:`~ludwig_hpo.tracking.layout.redundant_scores`
            are left out, as the MLflow sink leaves them out of the runs).
    """

    def __init__(
        self,
        *,
        epochs: int,
        goal_sign: float,
        describe: Callable[[str, dict], TrialDescription],
        sinks: list[TrialSink],
        early_stopping: bool = True,
        objective_key: str | None = None,
    ) -> None:
        self.epochs = epochs
        self.objective_key = objective_key
        self.early_stopping = early_stopping
        self.sign = goal_sign
        self.describe = describe
        self.sinks = sinks
        self.trials: dict[str, LiveTrial] = {}
        self._interrupted: set[str] = set()
        #: journal entries of trials that ended after Tune last saved its state (a resumed
        #: sweep of more trials than Tune saves at every step); adopted on restore
        self.ended_outside_state: dict[str, JournalEntry] = {}
        #: a resumed sweep's journal entries (:func:`ludwig_hpo.driver.journal.read_journal`): trials
        #: that replay their recorded results end as recorded
        self.replayed: dict[str, JournalEntry] = {}
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
        # Tune saves its state (at every step of its loop up to SAVE_EVERY_STEP_MAX_TRIALS trials,
        # on Tune's adaptive period above), for the trials that ended since the last save.
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
        from ludwig_hpo.driver.journal import ended_status

        self.trials = dict(state.get("trials", {}))
        for t in self.trials.values():  # a saved book may hold early-stopped trials as KILLED
            t.status, t.stopped_by = ended_status(t.status, t.stopped_by)
        self._adopt(self.ended_outside_state)
        # trials the interruption cut off: their next start begins again (and reopens the run)
        self._interrupted = {tid for tid, t in self.trials.items() if t.status == "RUNNING"}
        self._emit("trials_restored", list(self.trials.values()))

    def _adopt(self, entries: dict[str, JournalEntry]) -> None:
        """Add the trials that ended after Tune last saved its state (journal entries with
        their config), as they ended: Tune's restored state does not hold them, but they
        count toward the sweep's trials, and their MLflow runs exist."""
        from ludwig_hpo.driver.journal import restore_trial

        for tid, entry in entries.items():
            if tid in self.trials:
                continue
            config = entry.get("config", {})
            d = self.describe(tid, config)
            t = LiveTrial(tid, d.params, d.tags, d.name, current=dict(d.params), config=dict(config))
            restore_trial(t, entry)
            if t.ended is None:  # a journal entry without times
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
        t = self.trials[trial.trial_id] = LiveTrial(
            trial.trial_id, d.params, d.tags, d.name, current=dict(d.params), config=dict(trial.config)
        )
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
        for k in layout.redundant_scores(set(metrics), keep=getattr(self, "objective_key", None)):
            del metrics[k]
        objective = float(result[OBJECTIVE])
        # Train's checkpoint (fresh multi-worker trials), or the one this result handed to Tune
        path = result.get(CHECKPOINT_PATH)
        if not path and result.get(CHECKPOINT_DIR_NAME) and getattr(trial, "path", None):
            path = os.path.join(trial.path, result[CHECKPOINT_DIR_NAME])
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
        if isinstance(result.get(GENERATED_SAMPLE), str):  # an llm trial's best epoch so far
            t.generated = result[GENERATED_SAMPLE]
        self._emit("trial_result", t, result)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        t = self.trials.get(trial.trial_id)
        if t is None:
            return
        t.ended = time.time()
        end = t.last.get(END_REASON)  # the loop says why its final epoch was its last
        done = end == END_LAST_EPOCH or not self.early_stopping or (t.history and t.history[-1].epoch >= self.epochs)
        # a trial the scheduler (or its own early stopping) stopped did nothing wrong: FINISHED, with who stopped it
        by = layout.STOPPED_BY_EARLY_STOP if end == END_EARLY_STOP else None if done else layout.STOPPED_BY_SCHEDULER
        t.status, t.stopped_by = "FINISHED", by
        if trial.trial_id in self.replayed:  # it had ended before the sweep was interrupted
            from ludwig_hpo.driver.journal import restore_trial

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
        self.close_running(layout.STOPPED_BY_TIME_BUDGET)

    def close_running(self, reason: str) -> None:
        """End every still-running trial, stopped by ``reason`` (driver only): KILLED when the
        sweep was interrupted (it runs again on resume), else FINISHED (the time budget)."""
        status: TrialStatus = "KILLED" if reason == layout.STOPPED_BY_INTERRUPTED else "FINISHED"
        for t in self.trials.values():
            if t.status == "RUNNING":
                t.ended, t.status, t.stopped_by = time.time(), status, reason
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


#: The monitors of this driver process by key (the Tune experiment's name): a process-local
#: registry, not state shared between components. Tune pickles its callbacks and, on restore,
#: calls the unpickled copies; a :class:`MonitorHandle` finds the live monitor here by its key.
#: :meth:`SweepMonitor.handle` registers a monitor, replacing the previous one of its key.
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
