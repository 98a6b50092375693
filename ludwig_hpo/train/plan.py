"""How long a run trains, in optimizer steps and epochs, and its rows' order without shuffling.
Pure; every rank computes the same."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ludwig_hpo.config.trainer import TrainerConfig


@dataclass(frozen=True)
class TrainingPlan:
    """A run's length.

    Attributes:
        steps_per_epoch: optimizer steps in one epoch (batches per rank per epoch, divided by
            ``gradient_accumulation_steps`` and rounded up: a short last group still steps).
        total_steps: what the learning-rate schedule spans: ``train_steps``, else
            ``trainer.epochs`` x ``steps_per_epoch`` (a k-fold or test run keeps the search
            trial's schedule even when it trains fewer epochs).
        last_epoch: the run's last epoch: the job's epochs, else enough epochs for
            ``train_steps``, else ``trainer.epochs``.
        step_limit: stop after this many optimizer steps (``train_steps``), None: whole epochs.
    """

    steps_per_epoch: int
    total_steps: int
    last_epoch: int
    step_limit: int | None


def plan_training(
    tr: TrainerConfig, train_rows: int, batch_size: int, world_size: int, job_epochs: int | None
) -> TrainingPlan:
    """The :class:`TrainingPlan` of a run over ``train_rows`` rows (all ranks together) at a
    per-rank ``batch_size``."""
    per_rank = math.ceil(train_rows / world_size)
    per_epoch = math.ceil(batches_per_epoch(per_rank, batch_size) / tr.gradient_accumulation_steps)
    if tr.train_steps:
        last = job_epochs or math.ceil(tr.train_steps / per_epoch)
        return TrainingPlan(per_epoch, tr.train_steps, last, tr.train_steps)
    return TrainingPlan(per_epoch, tr.epochs * per_epoch, job_epochs or tr.epochs, None)


def batches_per_epoch(rows: int, batch_size: int) -> int:
    """How many batches of ``batch_size`` one rank trains on over its ``rows`` rows of an epoch,
    as Ludwig's batcher cuts them: a short last batch is trained, unless it holds one row (and
    is not the epoch's only batch). Every rank holds as many rows, so all take as many steps."""
    count = max(1, math.ceil(rows / batch_size))
    return count - 1 if count > 1 and rows % batch_size == 1 else count


def ordered_shard(rows: np.ndarray, *, rank: int, world_size: int) -> np.ndarray:
    """This rank's rows of an epoch without shuffling (``should_shuffle: false``): ``rows`` in
    order, padded to a multiple of ``world_size`` by repeating its start, every
    ``world_size``-th row from ``rank`` (the same sizes as a shuffled epoch's)."""
    pad = (-len(rows)) % world_size
    if pad:
        rows = np.concatenate([rows, rows[:pad]])
    return rows[rank::world_size]
