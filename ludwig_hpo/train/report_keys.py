"""The epoch report: what every rank hands its reporter once per epoch, and what the monitor,
the MLflow sink, the journal, the searcher, the schedulers and the report source read back.

This module is the one home of the report's keys. It is plain Python (no torch, no Ray), so the
report source and the driver import it without the worker's dependencies.

A report is one flat mapping: the fixed keys of :class:`EpochReport` plus the scores, keyed
``<split>/<output feature>/<metric>`` (e.g. ``validation/label/loss``; the train split's
running loss is ``train/combined/running_loss``). Every rank reports the same values (the
scores are all-reduced); rank 0's report is what reaches Tune.
"""

from __future__ import annotations

from typing import Literal, TypedDict

#: The value the scheduler and the searcher optimize: the sweep's metric on its split.
OBJECTIVE = "objective"
#: Epochs, not Tune iterations, measure a trial's progress (a restored trial restarts its iterations).
TIME_ATTR = "epoch"
#: The fixed keys that readers outside the worker look up by name (the rest of
#: :class:`EpochReport` is read as a whole).
BATCH_SIZE = "batch_size"
TRAIN_TIME_S = "train_time_s"
EVAL_TIME_S = "eval_time_s"
SETUP_TIME_S = "setup_time_s"
BATCH_SIZE_TUNING_S = "batch_size_tuning_s"
#: In a report that passes a checkpoint: the epoch whose weights its ``model.pt`` holds (the
#: trial's best so far) and that epoch's objective, which Tune and Train rank checkpoints by.
CHECKPOINT_EPOCH = "checkpoint_epoch"
CHECKPOINT_OBJECTIVE = "checkpoint_objective"
#: A trial that continued from a checkpoint (restored, retried, cloned by PBT): the epoch it continued from.
RESUMED_FROM_EPOCH = "resumed_from_epoch"
#: First epoch of a ``batch_size: auto`` trial: 1 when the size came from the sweep's cache, else 0.
BATCH_SIZE_CACHE_HIT = "batch_size_cache_hit"
#: First epoch of a tuned trial: the sizes the search tried, ``"<size>:<samples/s or oom>;..."``.
BATCH_SIZE_TRIED = "batch_size_tried"
#: First epoch of a ``batch_size: auto`` trial: where its size came from (a :data:`BatchSizeSource`).
BATCH_SIZE_SOURCE = "batch_size_source"
#: ``probe``: searched in this trial; ``sweep cache``: tuned by an earlier trial of this sweep;
#: ``persisted cache``: tuned by an earlier sweep on the same device (the batch-size files).
BatchSizeSource = Literal["probe", "sweep cache", "persisted cache"]
SOURCE_PROBE: BatchSizeSource = "probe"
SOURCE_SWEEP_CACHE: BatchSizeSource = "sweep cache"
SOURCE_PERSISTED_CACHE: BatchSizeSource = "persisted cache"
#: First epoch of a fresh multi-worker trial: how many times Ray Train started its worker group
#: again because a worker died while the group started (0: it started at once).
WORKER_GROUP_RESTARTS = "worker_group_restarts"
#: Added by Ray's ``TuneReportCallback`` to a fresh multi-worker trial's reports that carried a
#: checkpoint: Train's persisted checkpoint folder.
CHECKPOINT_PATH = "checkpoint_path"
#: Added by Tune to a result that carried a checkpoint: its folder's name inside the trial's folder.
CHECKPOINT_DIR_NAME = "checkpoint_dir_name"
#: Rank 0 of a pooled trial to its trial actor: the folder of the checkpoint to hand to Tune.
PENDING_CHECKPOINT_DIR = "pending_checkpoint_dir"
#: Added by the trainable: the Tune trial id (so a result names its trial outside Tune's callbacks).
TRIAL_ID = "trial_id"
#: The files of the checkpoint folder a report passes (see :data:`CHECKPOINT_EPOCH`): the best
#: epoch's weights (``{"state_dict", "epoch"}``, what ``best_model/`` and the model loaders read) and
#: what continuing after the written epoch needs.
MODEL_FILE = "model.pt"
TRAINER_STATE_FILE = "trainer_state.pt"
#: In the ``model.pt`` of a k-fold phase's test run (the retrained model of ``kfold.select:
#: cv``), beside ``state_dict`` and ``epoch``: how many rows it trained on (train+validation).
MODEL_TRAIN_ROWS = "train_rows"
#: In a fresh trial's storage folder, beside its checkpoints: how many times its current Train
#: job started its worker group again after a failed start (written by the Train controller's
#: callback, read by every rank for :data:`WORKER_GROUP_RESTARTS`).
WORKER_GROUP_RESTARTS_FILE = "worker_group_restarts.txt"
#: An llm search trial's report on rank 0 at an epoch that is its best so far: the first rows of
#: the scored split's generated sample (``trainer.eval_generation_samples``) as JSON text, a list
#: of objects with the :data:`GENERATED_FIELDS` (decoded text); the MLflow sink logs it to the
#: trial's run as its generated-sample artifact, the report shows the best trials' samples.
GENERATED_SAMPLE = "generated_sample"
GENERATED_FIELDS = ("prompt", "reference", "generated")
#: The running training loss over the epoch's batches (a score key of the train split).
RUNNING_LOSS = "train/combined/running_loss"
#: The learning rate of the epoch's last optimizer step (``trainer.learning_rate_scheduler``
#: applied to the scaled base rate): logged per epoch, so the schedule can be followed.
LEARNING_RATE = "learning_rate"
#: On a run's final epoch: why it is the last (an :data:`EndReason`): ``last_epoch`` (it ran
#: every planned epoch, or ``trainer.train_steps`` steps) or ``early_stop`` (``trainer.early_stop``
#: ended it: the trial is finished, stopped by its own patience, and the driver tags it so).
END_REASON = "end_reason"
EndReason = Literal["last_epoch", "early_stop"]
END_LAST_EPOCH: EndReason = "last_epoch"
END_EARLY_STOP: EndReason = "early_stop"


class _EpochCounters(TypedDict):
    epoch: int
    objective: float
    batch_size: int  # per worker
    global_batch_size: int  # batch_size x world_size x gradient accumulation steps
    eval_batch_size: int  # per worker
    world_size: int
    optimizer_steps: int
    train_time_s: float  # the epochs' training and evaluation so far, this trial
    batch_size_tuning_s: float
    effective_learning_rate: float  # trainer.learning_rate after trainer.learning_rate_scaling
    learning_rate: float  # of the epoch's last optimizer step, after the schedule
    setup_time_s: float
    eval_time_s: float
    seed: int


class EpochReport(_EpochCounters, total=False):
    """The fixed keys of one epoch's report (see the module docstring for the score keys).

    ``epoch`` counts from 1; times are seconds on this trial's ranks; batch sizes are rows.
    The optional keys appear on the epochs they describe.
    """

    samples_per_s: float  # training rows per second over the whole group
    nonfinite_batches: int  # trainer.nan_policy: skip_batch
    resumed_from_epoch: int
    batch_size_cache_hit: int
    batch_size_tried: str
    batch_size_source: BatchSizeSource
    checkpoint_epoch: int
    checkpoint_objective: float
    worker_group_restarts: int
    end_reason: EndReason  # on the run's final epoch


#: Decided once inside a trial: logged once, as tags of its MLflow run.
ONCE_KEYS = (
    "batch_size",
    "global_batch_size",
    "eval_batch_size",
    "world_size",
    "seed",
    BATCH_SIZE_SOURCE,
    WORKER_GROUP_RESTARTS,
)
#: Keys Tune adds to every result (its bookkeeping, not the trial's metrics).
TUNE_KEYS = (
    "training_iteration",
    "timestamp",
    "pid",
    "time_this_iter_s",
    "time_total_s",
    "time_since_restore",
    "iterations_since_restore",
)
#: Report keys that are not per-epoch metrics of a trial's run.
NOT_METRICS = frozenset(
    ONCE_KEYS
    + TUNE_KEYS
    + (
        TIME_ATTR,
        BATCH_SIZE_CACHE_HIT,
        SETUP_TIME_S,
        EVAL_TIME_S,
        CHECKPOINT_EPOCH,
        CHECKPOINT_OBJECTIVE,
        RESUMED_FROM_EPOCH,
        END_REASON,
        GENERATED_SAMPLE,
    )
)


def is_score_key(key: str) -> bool:
    """Whether ``key`` is a score (``<split>/<feature>/<metric>``) rather than a fixed key."""
    return "/" in key
