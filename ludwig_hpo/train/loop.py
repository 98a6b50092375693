"""The worker training loop: one flat function run on every DDP rank of a trial.

It needs only torch and an initialized ``torch.distributed`` process group when the world
size is above 1 (Ray Train sets one up; so can ``torch.multiprocessing``), so it runs the
same under Ray Train, under plain torch processes, and in one process.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as dist

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.model import build_model
from ludwig_hpo.model.losses import OutputLosses
from ludwig_hpo.train.autobatch import tune_batch_sizes
from ludwig_hpo.train.batch_size import BatchSizeCache
from ludwig_hpo.train.checkpoint import (
    CHECKPOINT_BUDGET,
    CheckpointBudget,
    CheckpointFolder,
    WeightsCopy,
    first_write_estimate,
    serialized,
)
from ludwig_hpo.train.data import DeviceData, batches, epoch_rng, train_shard
from ludwig_hpo.train.evaluate import all_reduce, evaluate
from ludwig_hpo.train.report_keys import (
    BATCH_SIZE_CACHE_HIT,
    BATCH_SIZE_SOURCE,
    BATCH_SIZE_TRIED,
    CHECKPOINT_EPOCH,
    CHECKPOINT_OBJECTIVE,
    MODEL_FILE,
    OBJECTIVE,
    RESUMED_FROM_EPOCH,
    RUNNING_LOSS,
    TRAINER_STATE_FILE,
    EpochReport,
)
from ludwig_hpo.train.resume import copy_best_weights, resume, trainer_state
from ludwig_hpo.train.step import combined_loss, make_optimizer
from ludwig_hpo.train.strategy import (
    AUTOCAST_DTYPES,
    autocast,
    effective_learning_rate,
    full_state_dict,
    grad_scaler,
    is_fsdp,
    no_grad_sync,
    unwrapped,
    wrap,
)
from ludwig_hpo.train.strategy import world as _world

#: ``report(metrics, checkpoint_dir)``: called by every rank once per epoch with the same
#: metrics (an :class:`~ludwig_hpo.train.report_keys.EpochReport` and the scores), except for
#: the ``checkpoint_*`` keys, on rank 0 only. ``checkpoint_dir`` is a
#: folder on rank 0 of a search trial when the epoch wrote a checkpoint (see ``Job``), None
#: elsewhere. It holds ``model.pt`` (``{"state_dict", "epoch"}``: the weights of the best epoch
#: so far) and ``trainer_state.pt`` (what continuing after this epoch needs). Such a report
#: carries ``checkpoint_epoch`` (the best epoch so far, whose weights ``model.pt`` holds) and
#: ``checkpoint_objective`` (its objective: what Tune and Train rank checkpoints by; it only
#: gets better from one checkpoint to the next, except after a PBT clone took a donor's best).
#: The reporter persists (copies or moves) the folder before returning: the next write
#: rewrites its files.
Reporter = Callable[[dict[str, Any], "str | None"], None]
#: ``model.pt``'s bytes are kept in memory between writes (while the best epoch stays) up to this size.
MODEL_BYTES_KEPT = 16 * 2**20


@dataclass(frozen=True)
class Job:
    """What one training run fits and scores.

    ``search``: train on the train split, score on validation. ``fold``: train on k-1 folds
    of train+validation, score on fold ``fold`` (reported as ``validation``). ``test``: train
    on train+validation, score on the test split. ``epochs`` overrides ``trainer.epochs``
    (k-fold and test runs train for the epochs at which the search trial was best).

    ``resume_from``: a folder written by an earlier report of a search trial (``model.pt``
    and ``trainer_state.pt``): training continues after the epoch it was written at, with
    that epoch's weights, optimizer state, counters and random state, and its best epoch's
    weights as the best so far (a restored, retried or PBT-exploited trial).
    ``seed_offset`` is added to ``trainer.seed`` (a retried trial runs with a fresh seed).
    ``checkpoint_every``: also write a checkpoint every that many epochs from epoch
    ``checkpoint_first`` on (default: ``checkpoint_every``; PBT's perturbation epochs, the only
    writes besides the last epoch's then); 0: none besides the budget's and the last epoch's.
    ``stop_epochs``: epochs after which the scheduler may stop the trial: a checkpoint is
    written there when the best epoch changed since the last one (a stopped trial writes no more).
    ``checkpoint_budget``: the share of training time checkpoint writes may take
    (:class:`~ludwig_hpo.train.checkpoint.CheckpointBudget`). A search trial writes one at
    every epoch the budget allows (without ``checkpoint_every``), at its last epoch, at the
    ``checkpoint_every`` epochs and at ``stop_epochs`` after a better epoch;
    ``math.inf``: at every epoch. Its ``model.pt`` always holds the best epoch's weights (kept
    in memory from that epoch on), its ``trainer_state.pt`` the written epoch's state.
    """

    kind: Literal["search", "fold", "test"] = "search"
    fold: int | None = None
    epochs: int | None = None
    resume_from: str | None = None
    seed_offset: int = 0
    checkpoint_every: int = 0
    checkpoint_first: int = 0
    checkpoint_budget: float = CHECKPOINT_BUDGET
    stop_epochs: tuple[int, ...] = ()

    def rows(self, data: PreparedData) -> tuple[np.ndarray, str, np.ndarray]:
        """(training rows, name of the scored split, scored rows)."""
        if self.kind == "search":
            return data.splits["train"], "validation", data.splits["validation"]
        if self.kind == "fold":
            if self.fold is None:
                raise ValueError("a fold job needs its fold index")
            train, held_out = data.folds[self.fold]
            return train, "validation", held_out
        both = np.sort(np.concatenate([data.splits["train"], data.splits["validation"]]))
        return both, "test", data.splits["test"]


def train_loop(
    cfg: SweepConfig,
    data: PreparedData,
    job: Job,
    report: Reporter,
    *,
    device: torch.device | None = None,
    cache: BatchSizeCache | None = None,
    local_world_size: int | None = None,
) -> torch.nn.Module:
    """Train one trial's model on this rank and report metrics after every epoch.

    Runs on every rank of the trial's worker group (or alone). Seeds, the model init and the
    data order depend only on ``cfg.trainer.seed``, so all ranks start identical. Every rank
    runs the same number of batches per epoch (see :func:`train_shard`), so no rank waits at
    a collective; ``trainer.gradient_accumulation_steps`` batches make one optimizer step
    (a short last group at the end of an epoch still steps, averaged over its batches).

    Reported per epoch (the same dict on every rank): ``epoch``, ``objective`` (the sweep's
    metric on the scored split), ``train/combined/running_loss`` (mean over the epoch's batches),
    ``<split>/<feature>/<metric>`` of the scored split, ``batch_size`` (per worker, per
    batch), ``global_batch_size`` (samples per optimizer step: per-worker batch x world size x
    accumulation steps), ``eval_batch_size``, ``world_size``, ``effective_learning_rate``
    (after ``trainer.learning_rate_scaling``), ``optimizer_steps`` (cumulative),
    ``train_time_s`` (cumulative seconds in the epoch loop, evaluation included), ``eval_time_s``
    (cumulative seconds of evaluation), ``setup_time_s`` (model build, wrap, data to the device),
    ``batch_size_tuning_s``,
    ``samples_per_s``, ``seed`` (``trainer.seed`` + ``Job.seed_offset``), and
    ``checkpoint_epoch`` and ``checkpoint_objective`` on rank 0 at epochs that write a checkpoint
    (see :data:`Reporter`), ``resumed_from_epoch`` at the
    first epoch after a resume, ``nonfinite_batches`` (cumulative, all ranks) under
    ``nan_policy: skip_batch``; on the first epoch also ``batch_size_cache_hit`` (1/0),
    ``batch_size_source`` (``probe``, ``sweep cache`` or ``persisted cache``) and
    ``batch_size_tried`` (e.g. ``"8:4300;16:8300"``, samples/s per size, ``oom`` for out of memory).

    Args:
        cache: the sweep's tuned batch sizes (``batch_size: auto``), shared across trials.
        local_world_size: workers on this machine (the CPU memory budget is split between
            them); defaults to the world size.

    Returns:
        The trained model, unwrapped (for FSDP: a whole, unsharded copy), on ``device``.

    Raises:
        FloatingPointError: the training loss became NaN or infinite (``nan_policy: fail``),
            or was so in every batch of an epoch (``skip_batch``).
        BatchSizeError: ``batch_size: auto`` found no size that fits in memory.
    """
    t_setup = time.perf_counter()
    rank, world = _world()
    device = device or torch.device("cpu")
    hp, tr = cfg.hyperopt, cfg.trainer
    seed = tr.seed + job.seed_offset
    torch.manual_seed(seed)
    train_rows, split, eval_rows = job.rows(data)
    dd = DeviceData(data, device)
    model = wrap(build_model(cfg, data.meta).to(device), cfg.backend.strategy, device, world)
    fsdp = is_fsdp(model)
    lr = effective_learning_rate(tr.learning_rate, tr.learning_rate_scaling, world)
    optimizer = make_optimizer(cfg, model.parameters(), lr)
    scaler = grad_scaler(device, tr.precision)
    accumulate = tr.gradient_accumulation_steps
    model.train()

    inner = unwrapped(model)
    losses = OutputLosses(cfg.output_features, data.meta)  # class weights resolved against the data
    setup_s = time.perf_counter() - t_setup
    # Batch-size probes run on one rank's own module without collectives; a sharded model
    # has none, so FSDP probes a whole replica (a conservative memory estimate).
    probe_model = build_model(cfg, data.meta).to(device) if fsdp else inner
    probe_opt = make_optimizer(cfg, probe_model.parameters(), lr) if fsdp else optimizer

    def probe_loss(x, y):
        with autocast(device, tr.precision):
            return combined_loss(cfg, probe_model(x), y, losses)

    train_bs, eval_bs = tune_batch_sizes(
        cfg,
        probe_model,
        probe_opt,
        probe_loss,
        dd,
        train_rows,
        eval_rows,
        world_size=world,
        local_world_size=local_world_size or world,
        cache=cache,
    )
    del probe_opt
    batch_size, eval_batch_size = train_bs.batch_size, eval_bs.batch_size
    tuning_s = train_bs.seconds + eval_bs.seconds

    amp, scaled = AUTOCAST_DTYPES[tr.precision] is not None, scaler.is_enabled()

    def step_loss(x: dict, y: dict, group_len: int) -> torch.Tensor:
        """Forward and backward of one batch; returns its (unscaled) loss. Autocast, loss
        scaling and the division by the group's length only where they change something
        (a tiny model's step is short enough that each no-op costs)."""
        if amp:
            with autocast(device, tr.precision):
                loss = combined_loss(cfg, model(x), y, losses)
        else:
            loss = combined_loss(cfg, model(x), y, losses)
        # the mean over the group's batches, as one batch of all of them would give
        part = loss / group_len if group_len > 1 else loss
        (scaler.scale(part) if scaled else part).backward()
        return loss

    objective_key = f"{split if job.kind != 'search' else hp.split}/{hp.output_feature}/{hp.metric}"
    train_time = eval_time = 0.0
    optimizer_steps = 0
    best_objective: float | None = None
    best_epoch = 0
    best_weights: dict | None = None  # rank 0 of a search trial: the best epoch's weights (CPU copy)
    first_epoch = 1
    skip_nonfinite = tr.nan_policy == "skip_batch"
    nonfinite_batches = 0
    if job.resume_from:
        resumed, best = resume(job.resume_from, model, optimizer, scaler, lr, cfg, device)
        first_epoch = resumed["epoch"] + 1
        best_objective, best_epoch = resumed["best_objective"], resumed["best_epoch"]
        best_weights = best["state_dict"] if rank == 0 else None
        optimizer_steps = resumed["optimizer_steps"]
        train_time, eval_time = resumed["train_time_s"], resumed["eval_time_s"]
        nonfinite_batches = resumed.get("nonfinite_batches", 0)
    last_epoch = job.epochs or tr.epochs

    def score() -> dict[str, float]:
        """The scored split's metrics, and the train split's when the search selects on it."""
        out = evaluate(inner, cfg, dd, eval_rows, split, eval_batch_size, lockstep=fsdp)
        if hp.split == "train" and job.kind == "search":
            out.update(evaluate(inner, cfg, dd, train_rows, "train", eval_batch_size, lockstep=fsdp))
        return out

    def counters(epoch: int, metrics: dict[str, float]) -> EpochReport:
        """What every report carries besides the scores (the counters as they are now)."""
        return EpochReport(
            epoch=epoch,
            objective=metrics[objective_key],
            batch_size=batch_size,
            global_batch_size=batch_size * world * accumulate,
            eval_batch_size=eval_batch_size,
            world_size=world,
            optimizer_steps=optimizer_steps,
            train_time_s=train_time,
            batch_size_tuning_s=tuning_s,
            effective_learning_rate=optimizer.param_groups[0]["lr"],
            setup_time_s=setup_s,
            eval_time_s=eval_time,
            seed=seed,
        )

    if first_epoch > last_epoch:
        # It continues from a checkpoint of its final epoch (PBT cloned a trial that had just
        # ended): nothing is left to train; score it once, so the trial ends on a result of its own.
        t_eval = time.perf_counter()
        scores = score()
        eval_time += time.perf_counter() - t_eval
        report({**scores, **counters(last_epoch, scores), RESUMED_FROM_EPOCH: first_epoch - 1}, None)
    # A search trial keeps its best epoch's weights (an epoch at least as good as every earlier
    # one) in memory, and writes a checkpoint (those weights as model.pt, and in
    # trainer_state.pt what continuing from this epoch needs) while the checkpoint budget
    # allows, at its last epoch, and at PBT's epochs (a clone continues from that epoch).
    folder = CheckpointFolder()  # rank 0 of a search trial: its files, rewritten at each write
    best_copy = WeightsCopy(best_weights)  # rank 0: the CPU tensors the best weights are copied into
    budget = CheckpointBudget(
        job.checkpoint_budget, first_write_estimate(sum(t.numel() * t.element_size() for t in model.parameters()))
    )  # FSDP: DTensors' whole sizes
    best_bytes: bytes | None = None  # model.pt as written last, while the best weights stay the same
    written_best = best_epoch if job.resume_from else None  # the best epoch of the last checkpoint
    resumed_train_s = train_time  # the budget counts this run's training and checkpoints only
    first_periodic = job.checkpoint_first or job.checkpoint_every
    rngs = {e: epoch_rng(seed, e) for e in range(first_epoch, last_epoch + 1)}  # each epoch's row order
    for epoch in range(first_epoch, last_epoch + 1):
        t_epoch = time.perf_counter()
        rows = train_shard(train_rows, epoch=epoch, seed=seed, rank=rank, world_size=world, rng=rngs.pop(epoch))
        loss_sum = torch.zeros((), device=device)
        steps = skipped = 0
        group_bad = False
        epoch_batches = list(batches(rows, batch_size, device, drop_last=True))
        optimizer.zero_grad(set_to_none=True)
        for i, idx in enumerate(epoch_batches):
            group_start = i - i % accumulate
            group_len = min(accumulate, len(epoch_batches) - group_start)
            sync = i == group_start + group_len - 1  # the group's last batch steps the optimizer
            x, y = dd.batch(idx)
            if sync:
                loss = step_loss(x, y, group_len)
            else:
                with no_grad_sync(model, False):
                    loss = step_loss(x, y, group_len)
            finite = True
            if skip_nonfinite:  # one host sync per batch, with this policy only
                finite = bool(torch.isfinite(loss))
                group_bad, skipped = group_bad or not finite, skipped + (not finite)
            if sync:
                if skip_nonfinite and world > 1:  # all-reduced gradients: the ranks decide together
                    flag = torch.tensor([float(group_bad)], device=device)
                    group_bad = bool(all_reduce(flag, op=dist.ReduceOp.MAX).item())
                if group_bad:  # a non-finite batch in the group: no step
                    group_bad = False
                elif scaled:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer_steps += 1
                else:  # what a disabled scaler's step does, without its bookkeeping
                    optimizer.step()
                    optimizer_steps += 1
                optimizer.zero_grad(set_to_none=True)
            if finite:
                loss_sum += loss.detach().float()
                steps += 1
        # on the device: NCCL reduces only CUDA tensors
        counts = torch.tensor([float(steps), float(skipped)], dtype=torch.float64, device=device)
        stats = all_reduce(torch.cat([loss_sum.double().reshape(1), counts]))
        total_steps = stats[1].item()
        nonfinite_batches += int(stats[2].item())
        train_loss = (stats[0] / stats[1]).item() if total_steps else math.nan
        if not math.isfinite(train_loss):
            every = " in every batch" if skip_nonfinite else ""
            raise FloatingPointError(
                f"training loss is {train_loss}{every} at epoch {epoch}; "
                f"lower trainer.learning_rate or check the data"
                + ("" if skip_nonfinite else " (trainer.nan_policy: skip_batch skips such batches)")
            )
        # DDP: evaluate the unwrapped module (ranks score shards of different sizes, and a
        # DDP forward would try to synchronize buffers across them). FSDP: the sharded module,
        # every rank running the same number of forward passes.
        t_eval = time.perf_counter()
        scores = score()
        eval_time += time.perf_counter() - t_eval
        train_time += time.perf_counter() - t_epoch
        metrics: dict[str, Any] = {
            **scores,
            **counters(epoch, scores),
            RUNNING_LOSS: train_loss,
            "samples_per_s": len(rows) * world / max(time.perf_counter() - t_epoch, 1e-9),
        }
        if skip_nonfinite:
            metrics["nonfinite_batches"] = nonfinite_batches
        if epoch == first_epoch > 1:
            metrics[RESUMED_FROM_EPOCH] = first_epoch - 1
        if epoch == 1 and tr.batch_size == "auto":
            metrics[BATCH_SIZE_CACHE_HIT] = int(train_bs.cache_hit)
            metrics[BATCH_SIZE_SOURCE] = train_bs.source
        if epoch == 1 and train_bs.tried:
            metrics[BATCH_SIZE_TRIED] = ";".join(f"{b}:{'oom' if s is None else round(s)}" for b, s in train_bs.tried)
        ckpt_dir, t_ckpt = None, time.perf_counter()
        if job.kind == "search":  # k-fold and test runs only score
            # the same decision on every rank (the metrics are all-reduced): a collective for
            # FSDP. A NaN objective is never better; a NaN best (a first epoch's) gives way to any number.
            objective = metrics[OBJECTIVE]
            if best_objective is None or (
                objective == objective
                and (best_objective != best_objective or cfg.goal_sign * objective <= cfg.goal_sign * best_objective)
            ):
                best_objective, best_epoch = objective, epoch
                best_weights, best_bytes = copy_best_weights(model, inner, best_copy, fsdp=fsdp, rank=rank), None
            periodic = (
                job.checkpoint_every > 0
                and epoch >= first_periodic
                and (epoch - first_periodic) % job.checkpoint_every == 0
            )
            write = (
                periodic
                or epoch == last_epoch
                or (epoch in job.stop_epochs and best_epoch != written_best)
                or (not job.checkpoint_every and budget.allows(train_time - resumed_train_s))
            )
            if fsdp and world > 1:  # the write gathers the shards: rank 0's budget decides for all
                flag = torch.tensor([float(write)], device=device)
                dist.broadcast(flag, src=0)
                write = bool(flag.item())
            if write:
                state_blob = trainer_state(
                    model,
                    inner,
                    optimizer,
                    scaler,
                    fsdp=fsdp,
                    rank=rank,
                    device=device,
                    with_weights=best_epoch != epoch,
                    state={
                        "epoch": epoch,
                        "best_objective": best_objective,
                        "best_epoch": best_epoch,
                        "optimizer_steps": optimizer_steps,
                        "train_time_s": train_time,
                        "eval_time_s": eval_time,
                        "seed": seed,
                        "nonfinite_batches": nonfinite_batches,
                    },
                )
                written_best = best_epoch
                if rank == 0:
                    model_pt = best_bytes or serialized({"state_dict": best_weights, "epoch": best_epoch})
                    # kept for the next write while the best stays (a small model's only)
                    best_bytes = model_pt if len(model_pt) <= MODEL_BYTES_KEPT else None
                    folder.write(model_pt, MODEL_FILE)
                    ckpt_dir = folder.write(state_blob, TRAINER_STATE_FILE)
                    metrics.update({CHECKPOINT_EPOCH: best_epoch, CHECKPOINT_OBJECTIVE: best_objective})
        t_report = time.perf_counter()
        report(metrics, ckpt_dir)  # the reporter persists the folder; the next write replaces it
        if job.kind == "search":
            # what checkpoints cost: the work above, and for a write its report, which persists
            # the folder (it also sends the epoch's metrics: a slight overcount)
            done = time.perf_counter()
            budget.charge((done if ckpt_dir else t_report) - t_ckpt, wrote=ckpt_dir is not None)
    folder.close()
    if fsdp:
        whole = build_model(cfg, data.meta)
        whole.load_state_dict(full_state_dict(model))
        return whole.to(device)
    return inner
