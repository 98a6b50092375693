"""A search trial's best epoch and its checkpoint writes, as the worker loop keeps them: the best
weights in memory (rank 0), and when a checkpoint is due and what it holds. Every rank keeps
one and decides the same (the objective is all-reduced; with several ranks rank 0's budget decides)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ludwig_hpo.model.saved_weights import saved_bytes
from ludwig_hpo.train.checkpoint import (
    CheckpointBudget,
    CheckpointFolder,
    WeightsCopy,
    first_write_estimate,
    serialized,
)
from ludwig_hpo.train.job import Job
from ludwig_hpo.train.report_keys import CHECKPOINT_EPOCH, CHECKPOINT_OBJECTIVE, MODEL_FILE, TRAINER_STATE_FILE
from ludwig_hpo.train.resume import copy_best_weights

#: ``model.pt``'s bytes are kept in memory between writes (while the best epoch stays) up to this size.
MODEL_BYTES_KEPT = 16 * 2**20


class BestEpoch:
    """The best epoch so far (an epoch at least as good as every earlier one), its weights kept
    in memory on rank 0, and the checkpoints: written (those weights as ``model.pt``, and in
    ``trainer_state.pt`` what continuing from the written epoch needs) while the checkpoint
    budget allows, at the run's final epoch, at PBT's epochs and at the scheduler's stop epochs
    after a better epoch (see :class:`~ludwig_hpo.train.job.Job`).

    Args:
        job: the run (its checkpoint settings).
        model, inner: the wrapped and the unwrapped model.
        goal_sign: +1 when a smaller objective is better, -1 when larger.
        best: ``(objective, epoch, weights)`` of a resumed trial's best epoch, or None.
        train_s: the training seconds already spent (a resumed trial's); the budget counts this run's.
    """

    def __init__(
        self,
        job: Job,
        model: torch.nn.Module,
        inner: torch.nn.Module,
        *,
        fsdp: bool,
        rank: int,
        world: int,
        device: torch.device,
        goal_sign: float,
        best: tuple[float | None, int, dict | None] | None,
        train_s: float,
    ) -> None:
        self.job, self.model, self.inner = job, model, inner
        self.fsdp, self.rank, self.world, self.device, self.sign = fsdp, rank, world, device, goal_sign
        self.objective, self.epoch, weights = best or (None, 0, None)
        self.folder = CheckpointFolder()  # rank 0: its files, rewritten at each write
        self.copy = WeightsCopy(weights)  # rank 0: the CPU tensors the best weights are copied into
        self.weights = weights
        self.budget = CheckpointBudget(
            job.checkpoint_budget, first_write_estimate(saved_bytes(model))
        )  # FSDP: DTensors' whole sizes; an adapter model writes its trainable parameters only
        self.bytes: bytes | None = None  # model.pt as written last, while the best weights stay the same
        self.written = self.epoch if best else None  # the best epoch of the last checkpoint
        self.resumed_train_s = train_s
        self.first_periodic = job.checkpoint_first or job.checkpoint_every

    def observe(self, epoch: int, objective: float) -> None:
        """Count an epoch's objective; a better (or equal) one becomes the best, its weights
        copied. A NaN objective is never better; a NaN best (a first epoch's) gives way to any number."""
        best = self.objective
        if best is None or (objective == objective and (best != best or self.sign * objective <= self.sign * best)):
            self.objective, self.epoch = objective, epoch
            self.weights = copy_best_weights(self.model, self.inner, self.copy, fsdp=self.fsdp, rank=self.rank)
            self.bytes = None

    def due(self, epoch: int, *, final: bool, train_s: float) -> bool:
        """Whether epoch ``epoch`` writes a checkpoint (the same answer on every rank)."""
        job = self.job
        periodic = (
            job.checkpoint_every > 0
            and epoch >= self.first_periodic
            and (epoch - self.first_periodic) % job.checkpoint_every == 0
        )
        write = (
            periodic
            or final
            or (epoch in job.stop_epochs and self.epoch != self.written)
            or (not job.checkpoint_every and self.budget.allows(train_s - self.resumed_train_s))
        )
        # the write is a collective (FSDP gathers the shards, every rank's random state is
        # gathered), and each rank's clock differs: rank 0's budget decides for all
        if self.world > 1:
            flag = torch.tensor([float(write)], device=self.device)
            dist.broadcast(flag, src=0)
            write = bool(flag.item())
        return write

    def write(self, state_blob: Any) -> tuple[str | None, dict[str, Any]]:
        """Write the checkpoint (``state_blob``: ``trainer_state.pt``'s content on rank 0);
        returns (its folder on rank 0, else None; the report keys that announce it)."""
        self.written = self.epoch
        if self.rank != 0:
            return None, {}
        model_pt = self.bytes or serialized({"state_dict": self.weights, "epoch": self.epoch})
        # kept for the next write while the best stays (a small model's only)
        self.bytes = model_pt if len(model_pt) <= MODEL_BYTES_KEPT else None
        self.folder.write(model_pt, MODEL_FILE)
        folder = self.folder.write(state_blob, TRAINER_STATE_FILE)
        return folder, {CHECKPOINT_EPOCH: self.epoch, CHECKPOINT_OBJECTIVE: self.objective}
