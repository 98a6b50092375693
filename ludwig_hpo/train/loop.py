"""The worker training loop: one flat function run on every DDP rank of a trial.

It needs only torch and an initialized ``torch.distributed`` process group when the world
size is above 1 (Ray Train sets one up; so can ``torch.multiprocessing``), so it runs the
same under Ray Train, under plain torch processes, and in one process.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import torch
import torch.distributed as dist

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.model import build_model
from ludwig_hpo.model.losses import OutputLosses
from ludwig_hpo.train.augment import Augmentation
from ludwig_hpo.train.autobatch import tune_batch_sizes
from ludwig_hpo.train.batch_size import BatchSizeCache
from ludwig_hpo.train.best import BestEpoch
from ludwig_hpo.train.data import DeviceData, batches, epoch_rng, train_shard
from ludwig_hpo.train.early_stop import EarlyStopping
from ludwig_hpo.train.evaluate import all_reduce, evaluate
from ludwig_hpo.train.final_model import keeps_final_weights, write_final_weights
from ludwig_hpo.train.generate_eval import GeneratedRow, sample_text
from ludwig_hpo.train.job import Job, Reporter
from ludwig_hpo.train.lengths import longest_rows
from ludwig_hpo.train.lr_schedule import LearningRateSchedule
from ludwig_hpo.train.optim import clip_gradients, closure_step, make_optimizer
from ludwig_hpo.train.plan import batches_per_epoch, ordered_shard, plan_training
from ludwig_hpo.train.recompute import enable_gradient_checkpointing
from ludwig_hpo.train.regularize import regularization_loss
from ludwig_hpo.train.report_keys import (
    BATCH_SIZE_CACHE_HIT,
    BATCH_SIZE_SOURCE,
    BATCH_SIZE_TRIED,
    END_EARLY_STOP,
    END_LAST_EPOCH,
    END_REASON,
    GENERATED_SAMPLE,
    OBJECTIVE,
    RESUMED_FROM_EPOCH,
    RUNNING_LOSS,
    EpochReport,
)
from ludwig_hpo.train.resume import resume, trainer_state
from ludwig_hpo.train.step import combined_loss
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
from ludwig_hpo.train.stream_feed import EpochBatches, IndexedBatches, JobStream
from ludwig_hpo.train.watch import watched_keys

__all__ = ["Job", "Reporter", "train_loop"]


def _built(cfg: SweepConfig, data: PreparedData | JobStream, device: torch.device) -> torch.nn.Module:
    """The trial's model on ``device``, its transformer blocks recomputed in the backward pass
    under ``trainer.enable_gradient_checkpointing`` (before any wrapping, which keeps it)."""
    model = build_model(cfg, data.meta).to(device)
    if cfg.trainer.enable_gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model


def train_loop(
    cfg: SweepConfig,
    data: PreparedData | JobStream,
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
    (after ``trainer.learning_rate_scaling``), ``learning_rate`` (of the epoch's last optimizer
    step, after ``trainer.learning_rate_scheduler``), ``optimizer_steps`` (cumulative),
    ``train_time_s`` (cumulative seconds in the epoch loop, evaluation included), ``eval_time_s``
    (cumulative seconds of evaluation), ``setup_time_s`` (model build, wrap, data to the device),
    ``batch_size_tuning_s``,
    ``samples_per_s``, ``seed`` (``trainer.seed`` + ``Job.seed_offset``), and
    ``checkpoint_epoch`` and ``checkpoint_objective`` on rank 0 at epochs that write a checkpoint
    (see :data:`Reporter`), ``generated_sample`` on rank 0 at an llm search trial's best epoch so
    far (its first generated rows), ``resumed_from_epoch`` at the
    first epoch after a resume, ``end_reason`` on the run's final epoch (``early_stop`` when
    ``trainer.early_stop`` ended a search run, else ``last_epoch``: the planned epochs, or
    ``trainer.train_steps`` steps, ran), ``nonfinite_batches`` (cumulative, all ranks) under
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
    if cfg.trainer.use_mixed_precision and device.type == "cuda" and cfg.trainer.precision == "fp32":
        # Ludwig's AMP: fp16 autocast with a gradient scaler on a GPU (on a CPU it does nothing)
        cfg = cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"precision": "fp16"})})
    hp, tr = cfg.hyperopt, cfg.trainer
    seed = tr.seed + job.seed_offset
    torch.manual_seed(seed)
    # a streamed dataset (train/stream_feed) keeps a small sample in memory for the probes
    stream, held = (data, data.probe) if isinstance(data, JobStream) else (None, data)
    train_rows, split, eval_rows = job.rows(held) if stream is None else stream.probe_rows()
    n_train = len(train_rows) if stream is None else stream.train.total_rows
    dd = DeviceData(held, device)
    augment = Augmentation(cfg.input_features, data.meta, seed=seed, rank=rank)  # image features' augmentation
    model = wrap(_built(cfg, data, device), cfg.backend.strategy, device, world)
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
    probe_model = _built(cfg, data, device) if fsdp else inner
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
        longest=lambda rows: longest_rows(held.inputs, data.meta, rows),
        counts=None if stream is None else (stream.train.total_rows, stream.scored.total_rows),
    )
    del probe_opt
    batch_size, eval_batch_size = train_bs.batch_size, eval_bs.batch_size
    tuning_s = train_bs.seconds + eval_bs.seconds

    amp, scaled = AUTOCAST_DTYPES[tr.precision] is not None, scaler.is_enabled()
    params = [q for q in model.parameters() if q.requires_grad]
    lbfgs = tr.optimizer.type == "lbfgs"

    def batch_loss(x: dict, y: dict) -> torch.Tensor:
        """One batch's training loss: the combined loss plus the weight regularization."""
        if amp:
            with autocast(device, tr.precision):
                loss = combined_loss(cfg, model(x), y, losses)
        else:
            loss = combined_loss(cfg, model(x), y, losses)
        reg = regularization_loss(inner, tr.regularization_type, tr.regularization_lambda)
        return loss if reg is None else loss + reg

    def step_loss(x: dict, y: dict, group_len: int) -> torch.Tensor:
        """Forward and backward of one batch; returns its (unscaled) loss. Autocast, loss
        scaling and the division by the group's length only where they change something
        (a tiny model's step is short enough that each no-op costs)."""
        loss = batch_loss(x, y)
        # the mean over the group's batches, as one batch of all of them would give
        part = loss / group_len if group_len > 1 else loss
        (scaler.scale(part) if scaled else part).backward()
        return loss

    objective_key = f"{split if job.kind != 'search' else hp.split}/{hp.output_feature}/{hp.metric}"
    plan = plan_training(tr, n_train, batch_size, world, job.epochs)
    watched = watched_keys(cfg, job.kind, split)
    schedule = LearningRateSchedule(
        tr.learning_rate_scheduler,
        lr,
        plan.steps_per_epoch,
        plan.total_steps,
        larger_is_better=watched.plateau_larger,
    )
    early = EarlyStopping(tr.early_stop if watched.early_stop_key else -1, watched.early_stop_larger)
    train_time = eval_time = 0.0
    optimizer_steps = 0
    resumed_best: tuple[float | None, int, dict | None] | None = None  # (objective, epoch, weights on rank 0)
    first_epoch = 1
    skip_nonfinite = tr.nan_policy == "skip_batch"
    nonfinite_batches = 0
    if job.resume_from:
        resumed, best_pt = resume(job.resume_from, model, optimizer, scaler, lr, cfg, device)
        first_epoch = resumed["epoch"] + 1
        resumed_best = (resumed["best_objective"], resumed["best_epoch"], best_pt["state_dict"] if rank == 0 else None)
        optimizer_steps = resumed["optimizer_steps"]
        train_time, eval_time = resumed["train_time_s"], resumed["eval_time_s"]
        nonfinite_batches = resumed.get("nonfinite_batches", 0)
        schedule.load_state_dict(resumed.get("lr_schedule"))
        early.load_state_dict(resumed.get("early_stop"))
    last_epoch = plan.last_epoch
    next_lr = schedule.apply(optimizer, optimizer_steps)  # the rate of the next optimizer step
    step_lr = next_lr  # the rate of the last one

    kept: list[GeneratedRow] = []  # an llm's: the scored split's generated rows at the last score()

    def score() -> dict[str, float]:
        """The scored split's metrics, and the train split's when the search selects on it
        or the trainer asks for them."""
        scored, trained = (dd, dd) if stream is None else (stream.scorer(device), stream.train_scorer(device))
        out = evaluate(inner, cfg, scored, eval_rows, split, eval_batch_size, lockstep=fsdp, kept=kept)
        if (hp.split == "train" and job.kind == "search") or watched.score_train:
            out.update(evaluate(inner, cfg, trained, train_rows, "train", eval_batch_size, lockstep=fsdp))
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
            effective_learning_rate=lr,
            learning_rate=step_lr,
            setup_time_s=setup_s,
            eval_time_s=eval_time,
            seed=seed,
        )

    if first_epoch > last_epoch or (plan.step_limit is not None and optimizer_steps >= plan.step_limit):
        # It continues from a checkpoint of its final epoch (PBT cloned a trial that had just
        # ended): nothing is left to train; score it once, so the trial ends on a result of its own.
        t_eval = time.perf_counter()
        scores = score()
        eval_time += time.perf_counter() - t_eval
        last_epoch = min(first_epoch - 1, last_epoch)  # nothing left to run
        report(
            {**scores, **counters(last_epoch, scores), RESUMED_FROM_EPOCH: first_epoch - 1, END_REASON: END_LAST_EPOCH},
            None,
        )
    best = BestEpoch(
        job,
        model,
        inner,
        fsdp=fsdp,
        rank=rank,
        world=world,
        device=device,
        goal_sign=cfg.goal_sign,
        best=resumed_best,
        train_s=train_time,
    )
    shuffle, clip = tr.should_shuffle, tr.gradient_clipping
    clips = clip.clipglobalnorm is not None or clip.clipnorm is not None or clip.clipvalue is not None
    rngs = {e: epoch_rng(seed, e) for e in range(first_epoch, last_epoch + 1)} if shuffle else {}  # row orders
    limit = plan.step_limit or math.inf
    #: the model's own work after each optimizer step (an llm's AdaLoRA adapter), or None
    after_step = getattr(inner, "after_optimizer_step", None)
    for epoch in range(first_epoch, last_epoch + 1):
        t_epoch = time.perf_counter()
        epoch_batches: IndexedBatches | EpochBatches
        if stream is not None:  # this rank's shard, read while it trains
            epoch_batches = stream.train_epoch(epoch, batch_size, device, seed=seed, rank=rank, shuffle=shuffle)
            epoch_rows = epoch_batches.rank_rows
        else:
            if shuffle:
                rows = train_shard(train_rows, epoch=epoch, seed=seed, rank=rank, world_size=world, rng=rngs.pop(epoch))
            else:
                rows = ordered_shard(train_rows, rank=rank, world_size=world)
            epoch_rows = len(rows)
            epoch_batches = IndexedBatches(
                dd, list(batches(rows, batch_size, device, drop_last=False))[: batches_per_epoch(len(rows), batch_size)]
            )
        loss_sum = torch.zeros((), device=device)
        steps = skipped = 0
        group_bad = False
        optimizer.zero_grad(set_to_none=True)
        for i, (x, y) in enumerate(epoch_batches):
            if optimizer_steps >= limit:  # trainer.train_steps: a group starts only below the limit
                break
            x = augment(x, epoch, i)
            if lbfgs:  # its step re-evaluates the batch (one worker, no accumulation: see the schema)
                loss = closure_step(optimizer, functools.partial(batch_loss, x, y))
                optimizer_steps += 1
                step_lr, next_lr = next_lr, schedule.apply(optimizer, optimizer_steps)
                loss_sum += loss.detach().float()
                steps += 1
                continue
            group_start = i - i % accumulate
            group_len = min(accumulate, len(epoch_batches) - group_start)
            sync = i == group_start + group_len - 1  # the group's last batch steps the optimizer
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
                else:
                    if clips:  # Ludwig clips the true (unscaled) gradients
                        if scaled:
                            scaler.unscale_(optimizer)
                        clip_gradients(params, clip)
                    if scaled:
                        scaler.step(optimizer)
                        scaler.update()
                    else:  # what a disabled scaler's step does, without its bookkeeping
                        optimizer.step()
                    optimizer_steps += 1
                    if after_step is not None:  # AdaLoRA's rank allocation reads the step's gradients
                        after_step(optimizer_steps)
                    step_lr, next_lr = next_lr, schedule.apply(optimizer, optimizer_steps)
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
            "samples_per_s": epoch_rows * world / max(time.perf_counter() - t_epoch, 1e-9),
        }
        # Ludwig's evaluation-time updates, identical on every rank (the scores are all-reduced)
        if watched.plateau_key and schedule.evaluation(metrics[watched.plateau_key]):
            next_lr = schedule.apply(optimizer, optimizer_steps)  # from the next step on
        stop_key = watched.early_stop_key
        stopping = stop_key is not None and early.update(epoch, metrics[stop_key])
        final = epoch == last_epoch or optimizer_steps >= limit or stopping
        if final:
            metrics[END_REASON] = END_EARLY_STOP if stopping and epoch < last_epoch else END_LAST_EPOCH
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
            best.observe(epoch, metrics[OBJECTIVE])
            if kept and best.epoch == epoch and rank == 0:  # an llm's best epoch: what it generated
                metrics[GENERATED_SAMPLE] = sample_text(kept)
            if best.due(epoch, final=final, train_s=train_time):
                state_blob = trainer_state(
                    model,
                    inner,
                    optimizer,
                    scaler,
                    fsdp=fsdp,
                    rank=rank,
                    device=device,
                    with_weights=best.epoch != epoch,
                    state={
                        "epoch": epoch,
                        "best_objective": best.objective,
                        "best_epoch": best.epoch,
                        "optimizer_steps": optimizer_steps,
                        "train_time_s": train_time,
                        "eval_time_s": eval_time,
                        "seed": seed,
                        "nonfinite_batches": nonfinite_batches,
                        "lr_schedule": schedule.state_dict(),
                        "early_stop": early.state_dict(),
                    },
                )
                ckpt_dir, announced = best.write(state_blob)
                metrics.update(announced)
        elif final and keeps_final_weights(cfg, job):  # kfold.select: cv makes this retrained model the final one
            ckpt_dir, announced = write_final_weights(
                best.folder, model, epoch=epoch, objective=metrics[OBJECTIVE], train_rows=n_train, rank=rank
            )
            metrics.update(announced)
        t_report = time.perf_counter()
        report(metrics, ckpt_dir)  # the reporter persists the folder; the next write replaces it
        if job.kind == "search":
            # what checkpoints cost: the work above, and for a write its report, which persists
            # the folder (it also sends the epoch's metrics: a slight overcount)
            done = time.perf_counter()
            best.budget.charge((done if ckpt_dir else t_report) - t_ckpt, wrote=ckpt_dir is not None)
        if final:
            break
    best.folder.close()
    if fsdp:
        whole = build_model(cfg, data.meta)
        state = full_state_dict(model)
        trained, load_trained = (
            getattr(whole, "trainable_names", None),
            getattr(whole, "load_trainable_state_dict", None),
        )
        if callable(trained) and callable(load_trained):  # an llm: its base weights are the cached ones, left unwritten
            load_trained({k: state[k] for k in trained()})
        else:
            whole.load_state_dict(state)
        return whole.to(device)
    return inner
