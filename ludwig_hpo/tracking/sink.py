"""The MLflow sink: each trial of the sweep as a child run of its parent run. Driver only."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ludwig_hpo.results.live import LiveTrial
from ludwig_hpo.results.records import EpochRecord
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.protocol import Tracker
from ludwig_hpo.train.report_keys import (
    BATCH_SIZE_CACHE_HIT,
    BATCH_SIZE_TRIED,
    BATCH_SIZE_TUNING_S,
    EVAL_TIME_S,
    GENERATED_SAMPLE,
    NOT_METRICS,
    RESUMED_FROM_EPOCH,
    TIME_ATTR,
    TRAIN_TIME_S,
)


def wall_time_split(t: LiveTrial) -> dict[str, float]:
    """Where a trial's wall time went, in seconds, from the driver's clock and the worker's
    last report (tags of its run: a figure known once, at the end, is no per-step metric).
    The four parts sum to ``time.total_s``:

    - ``time.setup_s``: everything outside the worker's epoch loop and batch-size search:
      Train/Tune process start-up, data and model set-up, reporting, teardown;
    - ``time.batch_size_tuning_s``: ``batch_size: auto`` probes (0 on a cache hit);
    - ``time.training_s``: forward/backward/optimizer steps;
    - ``time.evaluation_s``: scoring the evaluated split(s) after each epoch.
    """
    total = (t.ended or time.time()) - t.started
    last = t.last
    tuning = float(last.get(BATCH_SIZE_TUNING_S) or 0.0)
    evaluation = float(last.get(EVAL_TIME_S) or 0.0)
    training = max(float(last.get(TRAIN_TIME_S) or 0.0) - evaluation, 0.0)
    return {
        layout.TIME_TOTAL_S: total,
        layout.TIME_SETUP_S: max(total - tuning - training - evaluation, 0.0),
        layout.TIME_BATCH_SIZE_TUNING_S: tuning,
        layout.TIME_TRAINING_S: training,
        layout.TIME_EVALUATION_S: evaluation,
    }


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: Report keys that are numbers but no per-step metric of a run: the batch-size search's time
#: is known once (it is in the run's ``time.*`` tags).
_ONCE_NUMBERS = frozenset({BATCH_SIZE_TUNING_S})


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
    cannot change); artifact ``config.yaml`` (the resolved trial config) and, for an llm trial,
    ``generated_sample.json`` (its best epoch's generated outputs, rewritten at a better epoch); per-epoch metrics
    with ``step = epoch`` (only what changes per epoch: the objective once, under its reported
    key when ``objective_key`` is given, and no ``<split>/combined/loss`` that repeats the one
    output feature's loss); tags ``batch_size``, ``global_batch_size``, ``eval_batch_size``,
    ``world_size`` from the first report; at the end ``time.*`` tags
    (:func:`wall_time_split`), ``status`` and ``stopped_by`` + ``stopped_at_epoch`` (+
    ``stopped_at_rung``) for a trial stopped before its last epoch (FINISHED when the
    scheduler or the time budget stopped it, KILLED when interrupted) or ``error`` +
    ``error.txt`` (FAILED). A reopened run (resumed, retried) loses its earlier end's tags.

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
        store: the tracking store (:class:`~ludwig_hpo.tracking.protocol.Tracker`).
        parent_id: run id of the sweep's parent run.
        run_kind: ``run_kind`` tag of runs whose description does not set one.
        config_text: maps a trial's parameters to its resolved config (YAML text), logged
            as ``config.yaml``; None to skip.
        rungs: the scheduler's rung milestones in epochs (ASHA), to tag a stopped trial's rung.
        objective_key: the reported key the objective copies (a search trial's: the sweep's
            ``metric``): the run holds it under that name only; None logs ``objective`` too
            (k-fold and test runs, which the report reads by it).
        resume: reuse the parent's existing child runs, matched by their ``trial_id`` tag, so a
            resumed sweep continues its trials' runs instead of duplicating them.
    """

    def __init__(
        self,
        store: Tracker,
        parent_id: str,
        *,
        run_kind: str = layout.RUN_KIND_TRIAL,
        config_text: Callable[[dict[str, Any]], str] | None = None,
        rungs: tuple[int, ...] = (),
        objective_key: str | None = None,
        resume: bool = False,
    ) -> None:
        from ludwig_hpo.tracking.writer import OrderedWriter

        self.store = store
        self.parent_id = parent_id
        self.run_kind = run_kind
        self.config_text = config_text
        self.rungs = tuple(rungs)
        self.objective_key = objective_key
        #: the metric whose last step tells where a continued run resumes
        self._step_metric = objective_key or layout.OBJECTIVE_METRIC
        #: trial id -> its run id, or the future of the run being created
        self.run_ids: dict[str, str | Future] = {}
        if resume:
            self.run_ids.update(store.children_by_tag(parent_id, layout.TRIAL_ID_TAG))
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
        return self._run_of(trial_id) if trial_id in self.run_ids else None

    def _run_of(self, trial_id: str) -> str:
        """The run id of a trial that has a run (waits for its creation)."""
        ref = self.run_ids[trial_id]
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
        return self._writer.submit(lambda: fn(self._run_of(trial_id)))

    def _log(
        self,
        trial_id: str,
        *,
        params: dict[str, Any] | None = None,
        tags: dict[str, Any] | None = None,
        metrics: dict[str, Any] | None = None,
        step: int = 0,
    ) -> None:
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
        running = self.store.children_by_tag(self.parent_id, layout.TRIAL_ID_TAG, status="RUNNING")
        for tid in sorted(ended.keys() & running.keys()):
            t = ended[tid]
            self._skip_to[tid] = self.store.last_step(running[tid], self._step_metric)  # later epochs were queued too
            # an entry without times
            self._end(t, with_times=t.ended is not None and t.ended > t.started, backfill=True)

    def trial_retried(self, t: LiveTrial) -> None:
        if t.trial_id in self.run_ids:
            self._log(t.trial_id, tags={layout.RETRIES_TAG: t.retries, layout.retry_error_tag(t.retries): t.error})
            # it continues from its last checkpoint: epochs it logs again are not logged twice
            # (waited for: after the writes queued before it)
            self._skip_to[t.trial_id] = self._writer.call(
                lambda: self.store.last_step(self._run_of(t.trial_id), self._step_metric)
            )

    def trial_started(self, t: LiveTrial) -> None:
        if t.trial_id in self.run_ids:  # a resumed or retried trial continues its run

            def reopen(run_id: str) -> tuple[int, dict[str, dict[int, float]]]:
                self.store.reopen_run(run_id)
                # the tags of how it ended before (an interruption) do not describe its new end
                self.store.clear_tags(run_id, layout.END_STATE_TAGS)
                return self.store.last_step(run_id, self._step_metric), self.store.step_history(run_id)

            # waited for: the next results are logged from the step after the last one held
            last, held = self._writer.call(lambda: reopen(self._run_of(t.trial_id)))
            self._skip_to[t.trial_id] = last
            self._take_back_epochs(t, held, last)
            # logged again (MLflow keeps an equal value): a sweep that stopped before they were written
            self._log(t.trial_id, params=dict(t.params))
            return
        tags = {layout.TRIAL_ID_TAG: t.trial_id, layout.RUN_KIND_TAG: self.run_kind, **t.tags}
        params, name = dict(t.params), t.name

        def create() -> str:
            run_id = self.store.start_run(name, parent_id=self.parent_id, tags=tags)
            if self.config_text is not None:
                self.store.log_text(run_id, self.config_text(params), layout.CONFIG_ARTIFACT)
            return run_id

        self.run_ids[t.trial_id] = self._writer.submit(create)
        self._log(t.trial_id, params=params)

    def _take_back_epochs(self, t: LiveTrial, held: dict[str, dict[int, float]], last: int) -> None:
        """Append to a continued trial's record the epochs its run holds beyond it (driver only).

        The record a resumed sweep starts from is the one Tune last saved, which can be behind the
        trial's checkpoint by the results then in flight (logged to the run before the
        interruption); the trial continues after its checkpoint, so without them the record would
        miss those epochs. Its next results replace any epoch they report again.
        """
        objective = held.get(self._step_metric, {})
        after = t.history[-1].epoch if t.history else 0
        for epoch in range(after + 1, last + 1):
            if epoch not in objective:
                break
            metrics = {k: v[epoch] for k, v in held.items() if layout.is_score_metric(k) and epoch in v}
            t.history.append(EpochRecord(epoch=epoch, objective=objective[epoch], metrics=metrics))

    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None:
        step = int(result[TIME_ATTR])
        if RESUMED_FROM_EPOCH in result:  # it continued from a checkpoint (restored, retried, PBT)
            self._log(t.trial_id, tags={layout.RESUMED_FROM_EPOCH_TAG: result[RESUMED_FROM_EPOCH]})
        if step <= self._skip_to.get(t.trial_id, 0):
            return
        sample = result.get(GENERATED_SAMPLE)
        if isinstance(sample, str):  # an llm trial's best epoch so far: its generated outputs
            self._write(
                t.trial_id, lambda run_id: self.store.log_text(run_id, sample, layout.GENERATED_SAMPLE_ARTIFACT)
            )
        self._logged_to[t.trial_id] = max(self._logged_to.get(t.trial_id, 0), step)
        metrics = self._step_metrics({k: v for k, v in result.items() if k not in NOT_METRICS and _is_number(v)})
        metrics.update(self._mutations(t, step))
        if len(t.history) == 1 or t.trial_id in self._skip_to:  # decided inside the trial, logged once
            self._skip_to.pop(t.trial_id, None)
            tags = {k: result[k] for k in layout.ONCE_TAGS if k in result}
            if BATCH_SIZE_TRIED in result:
                tags[layout.BATCH_SIZE_TRIED_TAG] = result[BATCH_SIZE_TRIED]
            if BATCH_SIZE_CACHE_HIT in result:
                hit = result[BATCH_SIZE_CACHE_HIT]
                tags[layout.BATCH_SIZE_CACHE_TAG] = layout.BATCH_SIZE_CACHE_HIT if hit else layout.BATCH_SIZE_CACHE_MISS
            self._log(t.trial_id, tags=tags, metrics=metrics, step=step)
            return
        self._log(t.trial_id, metrics=metrics, step=step)

    def _step_metrics(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """What of an epoch's numbers the run logs at its step: no one-off figure, no
        ``objective`` beside the same value under its reported key, no combined loss that
        repeats the one output feature's loss."""
        drop = _ONCE_NUMBERS | layout.redundant_scores(set(metrics), keep=self.objective_key)
        if self.objective_key is not None and self.objective_key in metrics:
            drop = drop | {layout.OBJECTIVE_METRIC}
        return {k: v for k, v in metrics.items() if k not in drop}

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
            first = {layout.hparam_metric(k): v for k, v in t.params.items() if _is_number(v)}
            self._log(t.trial_id, metrics=first, step=max(step - 1, 0))
        changed = {k: v for k, v in t.current.items() if logged.get(k, t.params.get(k)) != v}
        if changed:
            logged.update(changed)
            self._log(t.trial_id, tags={layout.hparam_tag(k): v for k, v in changed.items()})
        return {layout.hparam_metric(k): v for k, v in t.current.items() if _is_number(v)}

    def trial_ended(self, t: LiveTrial) -> None:
        # a replayed trial keeps the times of the run that trained it; the resumed scheduler
        # may have cut its replay short: the epochs it did not replay are logged from its record
        self._end(t, with_times=not t.replayed, backfill=t.replayed)

    def _end(self, t: LiveTrial, *, with_times: bool, backfill: bool) -> None:
        """Queue the run's end: with ``backfill``, the recorded epochs the run does not hold
        (``objective`` and the ``<split>/<feature>/<metric>`` metrics); its status tags,
        ``time.*`` tags (``with_times``), error text, end status."""
        if t.trial_id not in self.run_ids:
            return
        if backfill:
            held = max(self._logged_to.get(t.trial_id, 0), self._skip_to.get(t.trial_id, 0))
            for h in t.history:
                if h.epoch > held:
                    metrics = self._step_metrics({**h.metrics, layout.OBJECTIVE_METRIC: h.objective})
                    self._log(t.trial_id, metrics=metrics, step=h.epoch)
        tags: dict[str, Any] = {layout.STATUS_TAG: t.status}
        # KILLED without who stopped it: interrupted (nothing else ends a trial as KILLED)
        stopped_by = t.stopped_by or (layout.STOPPED_BY_INTERRUPTED if t.status == "KILLED" else None)
        if stopped_by and t.status != "FAILED":
            tags[layout.STOPPED_BY_TAG] = stopped_by
            if t.history:
                epoch = t.history[-1].epoch
                tags[layout.STOPPED_AT_EPOCH_TAG] = epoch
                if stopped_by == layout.STOPPED_BY_SCHEDULER and epoch in self.rungs:  # rung 0: the first milestone
                    tags[layout.STOPPED_AT_RUNG_TAG] = self.rungs.index(epoch)
        if t.error:
            tags[layout.ERROR_TAG] = t.error
        if with_times:
            tags.update(wall_time_split(t))
        error_text, status = t.error_text, t.status
        self._log(t.trial_id, tags=tags)  # written before the run ends

        def end(run_id: str) -> None:
            if error_text:
                self.store.log_text(run_id, error_text, layout.ERROR_ARTIFACT)
            self.store.end_run(run_id, status)

        # queued, not waited for: the monitor waits for it before Tune saves its state
        # (SweepMonitor.get_state), and a resumed sweep writes the end of a trial the journal
        # holds as ended whose run is still RUNNING (trials_restored)
        self._last_end = self._write(t.trial_id, end)
