"""The retrained model of ``kfold.select: cv``: the k-fold phase's test run (a configuration
trained on train+validation for its search trial's best epoch count) keeps its final weights,
so the sweep can make them its final model. Runs on every rank of that run."""

from __future__ import annotations

from typing import Any

import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.model.saved_weights import select_saved
from ludwig_hpo.train.checkpoint import CheckpointFolder
from ludwig_hpo.train.job import Job
from ludwig_hpo.train.report_keys import CHECKPOINT_EPOCH, CHECKPOINT_OBJECTIVE, MODEL_FILE, MODEL_TRAIN_ROWS
from ludwig_hpo.train.strategy import full_state_dict, unwrapped


def keeps_final_weights(cfg: SweepConfig, job: Job) -> bool:
    """Whether ``job`` writes its final weights: a k-fold test run when ``kfold.select`` is ``cv``
    (with ``search`` the final model is the search trial's, and the test run only scores)."""
    return job.kind == "test" and cfg.kfold is not None and cfg.kfold.select == "cv"


def write_final_weights(
    folder: CheckpointFolder,
    model: torch.nn.Module,
    *,
    epoch: int,
    objective: float,
    train_rows: int,
    rank: int,
) -> tuple[str | None, dict[str, Any]]:
    """Write the model's saved weights now (an adapter model's trainable parameters only) as
    ``model.pt`` (``{"state_dict", "epoch", "train_rows"}``, read like a search checkpoint's)
    into ``folder`` on rank 0.

    Call it on every rank after the run's final epoch: for FSDP, gathering the weights is a
    collective. Returns (the folder on rank 0, else None; the report keys announcing it:
    ``checkpoint_epoch`` and ``checkpoint_objective``, the test score the run reports, which
    Ray Train's checkpoint bookkeeping ranks by and nothing selects on).

    Raises:
        OSError: the file cannot be written.
    """
    # the whole model on the CPU (all-gathers FSDP shards); an adapter model's trainable part
    weights = select_saved(unwrapped(model), full_state_dict(model))
    if rank != 0:
        return None, {}
    path = folder.write({"state_dict": weights, "epoch": epoch, MODEL_TRAIN_ROWS: train_rows}, MODEL_FILE)
    return path, {CHECKPOINT_EPOCH: epoch, CHECKPOINT_OBJECTIVE: objective}
