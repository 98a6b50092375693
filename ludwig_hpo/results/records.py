"""Plain records of a finished sweep: what the report and the console read.

These are immutable snapshots built in the sweep driver from Tune's trial events and the
k-fold re-evaluation, and saved as ``results.json``; they import nothing heavy, so report
building and its tests never need Ray or torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ludwig_hpo.tracking import layout
from ludwig_hpo.train.report_keys import GENERATED_FIELDS

if TYPE_CHECKING:
    from ludwig_hpo.results.selection import ModelSelection

TrialStatus = Literal["FINISHED", "KILLED", "FAILED", "RUNNING"]
Goal = Literal["minimize", "maximize"]

#: The one vocabulary in which the console, ``results.json``'s readers and the report show a
#: trial's state. A trial stopped by the scheduler, its own early stopping or the time budget
#: did nothing wrong: it is "stopped early", never shown like a failure.
StatusLabel = Literal["completed", "stopped early", "failed", "interrupted", "running"]
STATUS_LABELS: tuple[StatusLabel, ...] = ("completed", "stopped early", "failed", "interrupted", "running")


def status_label(status: TrialStatus, stopped_by: str | None) -> StatusLabel:
    """How a trial's state is shown (any process; pure).

    Args:
        status: the trial's status as MLflow records it (FINISHED, KILLED, FAILED, RUNNING).
        stopped_by: who stopped it before its last epoch (``"scheduler"``, ``"early_stop"``:
            its own ``trainer.early_stop``, ``"time budget"``, ``"interrupted"``), None when it
            ran every epoch.
    """
    if status == "FAILED":
        return "failed"
    if status == "RUNNING":
        return "running"
    if stopped_by == layout.STOPPED_BY_INTERRUPTED or (status == "KILLED" and stopped_by is None):
        return "interrupted"
    return "stopped early" if stopped_by else "completed"


def ended_status(status: TrialStatus, stopped_by: str | None) -> tuple[TrialStatus, str | None]:
    """A recorded trial's ``(status, stopped_by)`` in the form the sweep writes: a trial
    stopped early (by the scheduler or the time budget) is FINISHED with who stopped it;
    KILLED means interrupted. Older journals and saved trial books hold early-stopped trials
    as KILLED (with ``stopped_by`` None for the scheduler): they read as the new form. Pure."""
    if status == "KILLED" and stopped_by != layout.STOPPED_BY_INTERRUPTED:
        return "FINISHED", stopped_by or layout.STOPPED_BY_SCHEDULER
    return status, stopped_by


@dataclass(frozen=True)
class ParamInfo:
    """One searched hyperparameter as declared in the sweep file.

    Attributes:
        path: dotted path into the config, e.g. ``"trainer.learning_rate"``.
        space: the space type (``uniform``, ``loguniform``, ``randint``, ``choice``...).
        log: True when values are sampled on a log scale (plot on log10 axes).
        categories: the choices of a ``choice`` space, in declaration order, else None.
        lower: lower bound of a numeric space, else None.
        upper: upper bound of a numeric space (exclusive for integer spaces), else None.
    """

    path: str
    space: str
    log: bool = False
    categories: tuple[Any, ...] | None = None
    lower: float | None = None
    upper: float | None = None


@dataclass(frozen=True)
class EpochRecord:
    """Metrics one trial reported at the end of one epoch.

    Attributes:
        epoch: 1-based epoch number.
        objective: the sweep's metric on its split at this epoch.
        metrics: every reported metric, keyed ``"<split>/<feature>/<metric>"``
            (e.g. ``"validation/label/loss"``), plus ``"train/combined/running_loss"``.
    """

    epoch: int
    objective: float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GeneratedOutput:
    """One validation row an llm trial answered at its best epoch: the prompt, the reference
    and the generated text (decoded; special tokens skipped)."""

    prompt: str
    reference: str
    generated: str


def parse_generated(text: str | None) -> tuple[GeneratedOutput, ...]:
    """The rows of a trial's generated sample (the epoch report's ``generated_sample`` or the
    run's ``generated_sample.json``: a JSON list of objects with ``prompt``, ``reference`` and
    ``generated``); empty when ``text`` is None or not such a list (an older or damaged file).
    Pure."""
    try:
        items = json.loads(text or "[]")
        rows = tuple(GeneratedOutput(*(str(item[k]) for k in GENERATED_FIELDS)) for item in items)
    except (ValueError, TypeError, KeyError):
        return ()
    return rows


@dataclass(frozen=True)
class TrialRecord:
    """One trial of the search.

    Attributes:
        trial_id: Tune's trial id (also the MLflow run name suffix).
        status: as MLflow records it: FINISHED (ran every epoch, or was stopped early by the
            scheduler, its own early stopping or the time budget: see ``stopped_by``), KILLED
            (interrupted), FAILED (raised), RUNNING (still going when the record was taken).
            :func:`status_label` gives the word users see.
        params: sampled value of each searched parameter, keyed by dotted path.
        objective_last: metric at the last reported epoch (None if nothing reported).
        objective_best: best metric over the reported epochs (by the sweep's goal).
        history: per-epoch records in epoch order.
        batch_size: per-worker batch size used (chosen by the tuner when ``auto``).
        wall_time_s: seconds from trial start to trial end (includes start-up).
        train_time_s: seconds spent inside the worker's training and evaluation loop.
        error: one-line error message of a FAILED trial.
        stopped_by: who stopped the trial before its last epoch, None when it was not stopped.
        stopped_at_epoch: the last epoch a stopped trial ran, else None.
        generated: an llm trial's generated validation outputs at its best epoch (the first
            rows of its sample), empty for other models.
    """

    trial_id: str
    status: TrialStatus
    params: dict[str, Any]
    objective_last: float | None
    objective_best: float | None
    history: tuple[EpochRecord, ...] = ()
    batch_size: int | None = None
    wall_time_s: float | None = None
    train_time_s: float | None = None
    error: str | None = None
    stopped_by: str | None = None
    stopped_at_epoch: int | None = None
    generated: tuple[GeneratedOutput, ...] = ()

    @property
    def label(self) -> StatusLabel:
        """The word users see for this trial's state (:func:`status_label`)."""
        return status_label(self.status, self.stopped_by)


@dataclass(frozen=True)
class KFoldRecord:
    """Re-evaluation of one of the top-k configurations.

    Attributes:
        config_rank: 1 for the best configuration of the search, 2 for the next...
        trial_id: the search trial whose parameters are re-evaluated.
        params: the parameters, keyed by dotted path.
        fold_scores: the metric on each held-out fold (length ``k``), fold order.
        test_score: the metric on the held-out test split after training on
            train+validation, or None if that run failed.
        metric: the metric's name as ``"<feature>/<metric>"``.
        failed_folds: folds whose run did not finish (not in ``fold_scores``).
    """

    config_rank: int
    trial_id: str
    params: dict[str, Any]
    fold_scores: tuple[float, ...]
    test_score: float | None
    metric: str
    failed_folds: int = 0


@dataclass(frozen=True)
class SweepResult:
    """Everything the report shows about one sweep.

    Attributes:
        name: the sweep's name (from the sweep file).
        metric: the optimized metric as ``"<split>/<feature>/<metric>"``.
        goal: ``"minimize"`` or ``"maximize"``.
        parameters: the search space, in declaration order.
        trials: every trial, in start order.
        kfold: re-evaluations of the top-k configurations, rank order (may be empty).
        best_trial_id: id of the best trial by ``objective_best``, None if none finished.
        wall_time_s: seconds the whole sweep took.
        output_dir: where results were written (as a string, for display).
        tracking_uri: the MLflow tracking URI of the sweep.
        objectives: a multi-objective search's metrics (``"<split>/<feature>/<metric>"``),
            in the order written; empty for a single metric.
        pareto_trial_ids: trials not dominated on ``objectives`` (by their last epoch).
        stop_reason: why the search ended before running every planned trial (e.g.
            ``"time budget reached after 3 of 8 trials"``), None when it ran them all.
        test_scores: the final model (``best_model/``, the logged model) scored on the test
            split, as Ludwig scores each trial's model on its test set:
            ``{"test/<feature>/<metric>": value}`` (``test/combined/loss`` too); empty without a
            test split or saved weights. Without ``kfold`` or with ``kfold.select: search`` the
            final model is the best trial's best weights.
        selection: with ``kfold``, which configuration the final model is and why
            (:class:`~ludwig_hpo.results.selection.ModelSelection`); None without the k-fold phase.
    """

    name: str
    metric: str
    goal: Goal
    parameters: tuple[ParamInfo, ...]
    trials: tuple[TrialRecord, ...]
    kfold: tuple[KFoldRecord, ...] = ()
    best_trial_id: str | None = None
    wall_time_s: float | None = None
    output_dir: str = ""
    tracking_uri: str = ""
    objectives: tuple[str, ...] = ()
    pareto_trial_ids: tuple[str, ...] = ()
    stop_reason: str | None = None
    test_scores: dict[str, float] = field(default_factory=dict)
    selection: ModelSelection | None = None
