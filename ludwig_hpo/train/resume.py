"""A search trial's resumable state: the best epoch's weights kept in memory, ``trainer_state.pt``
written with a checkpoint, and continuing from a checkpoint folder. Every rank calls these (they
are collectives under FSDP); what is written is rank 0's."""

from __future__ import annotations

from pathlib import Path

import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.model.saved_weights import adapter_only, check_saved_keys, saved_state_dict, select_saved
from ludwig_hpo.train.checkpoint import WeightsCopy, pack, unpack
from ludwig_hpo.train.optim import set_hyperparameters
from ludwig_hpo.train.report_keys import MODEL_FILE, TRAINER_STATE_FILE
from ludwig_hpo.train.strategy import full_state_dict, load_training_state, optimizer_state, unwrapped, world


def copy_best_weights(
    model: torch.nn.Module, inner: torch.nn.Module, best: WeightsCopy, *, fsdp: bool, rank: int
) -> dict | None:
    """The model's saved weights now (the whole model's, or an adapter model's trainable
    parameters: :mod:`~ludwig_hpo.model.saved_weights`), copied to the CPU into ``best`` (the
    best epoch's, kept until a better epoch, for every checkpoint written meanwhile), on rank 0;
    None on other ranks. A collective for FSDP (every rank calls it), which gathers a new copy; otherwise an
    in-place copy into the same CPU tensors (:class:`~ludwig_hpo.train.checkpoint.WeightsCopy`);
    a device-to-host copy on a GPU."""
    if fsdp:
        weights = select_saved(inner, full_state_dict(model))
        return best.set({k: v.detach().to("cpu", copy=True) for k, v in weights.items()}) if rank == 0 else None
    return best.refresh(inner) if rank == 0 else None


def trainer_state(
    model: torch.nn.Module,
    inner: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    *,
    fsdp: bool,
    rank: int,
    device: torch.device,
    state: dict,
    with_weights: bool,
) -> dict | None:
    """``trainer_state.pt``'s content on rank 0 (None on other ranks): ``state`` (the epoch and
    counters), the optimizer, gradient-scaler and random states and, with ``with_weights`` (the
    epoch is not the best one, whose weights ``model.pt`` holds), this epoch's saved weights
    (an adapter model's trainable parameters only); packed
    (:func:`~ludwig_hpo.train.checkpoint.pack`: a copy in one buffer per dtype, cheaper to
    save than its many small tensors one by one). A collective for FSDP: every rank calls it
    with the same ``with_weights``.
    """
    ranks_rng = _ranks_random_states(device)
    weights = None
    if with_weights:
        weights = select_saved(inner, full_state_dict(model)) if fsdp else saved_state_dict(inner)
    optim = optimizer_state(model, optimizer) if fsdp or rank == 0 else None
    if rank != 0:
        return None
    return {
        "packed": pack(
            {
                **state,
                "weights": weights,
                "optimizer": optim,
                "scaler": scaler.state_dict(),
                "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                "ranks_rng": ranks_rng,
            }
        )
    }


def _ranks_random_states(device: torch.device) -> list[dict] | None:
    """Every rank's random states (``{"rng", "cuda_rng"}``, in rank order), gathered on every rank
    (a collective); None in one process. The ranks' states part after the first batches whose
    shapes differ between ranks (an llm's batch is as long as its longest row, and its dropout
    draws that many numbers), so each rank resumes from its own."""
    _, size = world()
    if size == 1:
        return None
    import torch.distributed as dist

    mine = {
        "rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
    }
    gathered: list[dict | None] = [None] * size
    dist.all_gather_object(gathered, mine)
    return [g for g in gathered if g is not None]


def resume(
    folder: str,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    lr: float,
    cfg: SweepConfig,
    device: torch.device,
) -> tuple[dict, dict]:
    """Load a checkpoint folder (``model.pt``: the best epoch's weights; ``trainer_state.pt``:
    the epoch it was written at, its weights when they differ, optimizer, scaler and random
    states) into this rank's model, optimizer and scaler. An adapter model's files hold its
    trainable parameters only: they are loaded over the base weights the model was built with. The optimizer's hyperparameters are
    this trial's (PBT may have changed them), its moments the checkpoint's. Every rank calls it.

    Returns:
        (the saved counters: ``epoch``, ``best_objective``, ``best_epoch``, ``lr_schedule`` and
        ``early_stop`` (their states; absent in older checkpoints), ...; ``model.pt``'s
        content: ``{"state_dict", "epoch"}``, the best weights).

    Raises:
        CheckpointError: the folder is incomplete or does not fit this model.
    """
    from ludwig_hpo.errors import CheckpointError, one_line_error

    path = Path(folder)
    try:
        best = torch.load(path / MODEL_FILE, map_location="cpu", weights_only=True)
        state = torch.load(path / TRAINER_STATE_FILE, map_location="cpu", weights_only=False)
        if "packed" in state:
            state = unpack(state["packed"])
        current = state.get("weights") or best["state_dict"]
        partial = adapter_only(model)  # the files hold the adapter; the base is the one just loaded
        if partial:
            check_saved_keys(unwrapped(model), current)
        load_training_state(model, optimizer, current, state["optimizer"], strict=not partial)
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        raise CheckpointError(f"cannot resume from the checkpoint in {folder}: {one_line_error(str(e))}") from e
    set_hyperparameters(optimizer, cfg, lr)  # the loop's schedule then sets the step's rate
    if state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    rank, size = world()
    ranks_rng = state.get("ranks_rng")
    own = ranks_rng[rank] if ranks_rng and len(ranks_rng) == size else state  # another world size: rank 0's
    torch.set_rng_state(own["rng"])
    if device.type == "cuda" and own.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(own["cuda_rng"], device)
    state.setdefault("best_epoch", best.get("epoch", state["epoch"]))
    return state, best
