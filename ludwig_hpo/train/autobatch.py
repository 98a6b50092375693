"""``batch_size: auto`` inside a trial: look the key up in the sweep's cache, else run the
search with real probes, agreed across DDP ranks; the same for ``eval_batch_size: auto``.

Runs on every rank of the trial's worker group, in lockstep.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.train.batch_size import BatchSizeCache, cache_key, noise_of, search_batch_size
from ludwig_hpo.train.data import DeviceData
from ludwig_hpo.train.probe import CpuMemoryGuard, make_eval_probe, make_train_probe
from ludwig_hpo.train.report_keys import SOURCE_PROBE, SOURCE_SWEEP_CACHE, BatchSizeSource

#: Training batches are capped so that an epoch has at least this many steps per worker.
MIN_STEPS_PER_EPOCH = 20
#: Evaluation batches are capped at this size.
MAX_EVAL_BATCH_SIZE = 8192


@dataclass(frozen=True)
class TunedSize:
    """One tuned batch size (per worker).

    Attributes:
        batch_size: the size to use.
        tried: ``(size, samples/s or None)`` probed in this trial (empty on a cache hit).
        source: where an ``auto`` size came from: ``"probe"`` (searched here), ``"sweep cache"``
            (an earlier trial of this sweep) or ``"persisted cache"`` (an earlier sweep on the
            same device); None for a size fixed in the config.
        seconds: wall time spent deciding.
    """

    batch_size: int
    tried: tuple[tuple[int, float | None], ...] = ()
    source: BatchSizeSource | None = None
    seconds: float = 0.0

    @property
    def cache_hit(self) -> bool:
        """The size came from a cache (this sweep's or a persisted one): no probe ran."""
        return self.source not in (None, SOURCE_PROBE)


def describe_model(module: torch.nn.Module) -> str:
    """The model's structure (layer types and their settings) and parameter shapes and dtypes.

    Equal strings mean equal memory and speed per sample; dropout rates are left out (they
    change neither), so trials that only sweep them share a cache entry.
    """
    layers = ";".join(
        f"{name}:{type(m).__name__}" + ("" if isinstance(m, torch.nn.Dropout) else f"({m.extra_repr()})")
        for name, m in module.named_modules()
    )
    shapes = ";".join(f"{n}:{tuple(p.shape)}:{p.dtype}" for n, p in module.named_parameters())
    return f"{layers}|{shapes}"


def _device_identity(device: torch.device) -> tuple[str, int]:
    """(device name, its memory in bytes): the accelerator's model, or on CPU the machine's
    architecture, core count and torch's thread count (what makes a CPU size fast)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return props.name, int(props.total_memory)
    return f"cpu:{platform.machine()}:{os.cpu_count()}cores:{torch.get_num_threads()}threads", 0


def _rank0_lookup(cache: BatchSizeCache | None, key: str) -> dict | None:
    """Rank 0 asks the cache; every rank gets its answer."""
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    found = [cache.get(key) if cache is not None and (not distributed or dist.get_rank() == 0) else None]
    if distributed:
        dist.broadcast_object_list(found, src=0)
    return found[0]


def _tune_one(
    kind: str,
    probe_factory: Callable[[], Callable],
    max_size: int,
    key_parts: dict,
    cache: BatchSizeCache | None,
    rng_devices: list[torch.device],
) -> TunedSize:
    t0 = time.perf_counter()
    key = cache_key(**key_parts, max_size=max_size, kind=kind)
    hit = _rank0_lookup(cache, key)
    if hit is not None:
        source = hit.get("source", SOURCE_SWEEP_CACHE)
        return TunedSize(int(hit["batch_size"]), source=source, seconds=time.perf_counter() - t0)
    # the probes leave torch's random state as they found it: a trial trains the same whether
    # its size was probed or came from a cache
    with torch.random.fork_rng(devices=rng_devices):
        choice = search_batch_size(probe_factory(), max_size=max_size)
    rank0 = not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
    if cache is not None and rank0:
        cache.put(
            key,
            {
                "batch_size": choice.batch_size,
                "tried": [[b, None if s is None else float(s)] for b, s in choice.tried],
                "noise": [None if s is None else noise_of(s) for _, s in choice.tried],
                "stopped_by": choice.stopped_by,
                # for a person reading the persisted file; the key already holds them
                "kind": kind,
                "device": key_parts["device"],
                "world_size": key_parts["world_size"],
                "torch": key_parts["torch_version"],
            },
        )
    return TunedSize(choice.batch_size, choice.tried, SOURCE_PROBE, time.perf_counter() - t0)


def tune_batch_sizes(
    cfg: SweepConfig,
    module: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_of: Callable[[dict, dict], torch.Tensor],
    dd: DeviceData,
    train_rows: np.ndarray,
    eval_rows: np.ndarray,
    *,
    world_size: int,
    local_world_size: int,
    cache: BatchSizeCache | None,
    longest: Callable[[np.ndarray], np.ndarray] | None = None,
    counts: tuple[int, int] | None = None,
) -> tuple[TunedSize, TunedSize]:
    """The per-worker training and evaluation batch sizes of a trial.

    A fixed size in the config is used as is (capped by the rows per worker). ``auto`` is
    looked up in ``cache`` by (model structure, input shapes, device and its memory, world
    size, precision, strategy, optimizer type, cap, torch version); on a miss it is searched
    with real probes on the unwrapped ``module`` and stored. Caps: training batches give at least
    :data:`MIN_STEPS_PER_EPOCH` steps per epoch and at most ``trainer.max_batch_size``; on
    CPU a memory guard keeps each worker within its share of half the available RAM.

    The probes leave torch's random state as they found it, so a trial trains the same
    whether its size was probed or came from a cache. ``longest(rows)``: the rows every probe
    batch of ``rows`` includes (:func:`~ludwig_hpo.train.lengths.longest_rows`), so each size
    is measured at the longest sequence length a batch can have. The input shapes in the key
    hold each input's prepared width (a token input's padded length L, an image's (H, W)), so
    a longer ``max_sequence_length`` or a larger image is probed again, never reused.

    ``counts``: (training rows, scored rows) when ``train_rows`` and ``eval_rows`` are only a
    sample of them (a streamed dataset's probe rows); the caps count the whole splits.

    Runs on every rank; the result is identical on all ranks.
    """
    tr = cfg.trainer
    rng_devices = [dd.device] if dd.device.type == "cuda" else []
    dev, mem = _device_identity(dd.device)
    key_parts = {
        "architecture": describe_model(module),
        "input_shapes": {k: tuple(v.shape[1:]) for k, v in dd.inputs.items()},
        "device": dev,
        "device_memory": mem,
        "world_size": world_size,
        "precision": tr.precision,
        "strategy": cfg.backend.strategy,
        "optimizer": tr.optimizer.type,
        # a plain str: torch.__version__ (a TorchVersion) would make the cache actor that
        # unpickles an entry import torch
        "torch_version": str(torch.__version__),
    }
    n_train, n_eval = counts or (len(train_rows), len(eval_rows))
    per_worker = math.ceil(n_train / world_size)

    def _of(rows: np.ndarray) -> np.ndarray | None:
        return None if longest is None else longest(rows)

    def guard() -> CpuMemoryGuard | None:
        return CpuMemoryGuard.for_workers(local_world_size) if dd.device.type == "cpu" else None

    if tr.batch_size == "auto":
        cap = max(1, min(tr.max_batch_size, per_worker // MIN_STEPS_PER_EPOCH))
        train = _tune_one(
            "train",
            lambda: make_train_probe(
                module, optimizer, loss_of, dd, train_rows, seed=tr.seed, guard=guard(), longest=_of(train_rows)
            ),
            cap,
            key_parts,
            cache,
            rng_devices,
        )
    else:
        train = TunedSize(min(tr.batch_size, per_worker))
    eval_per_worker = max(1, math.ceil(n_eval / world_size))
    if tr.eval_batch_size == "auto":
        cap = max(1, min(MAX_EVAL_BATCH_SIZE, eval_per_worker))
        evaluation = _tune_one(
            "eval",
            lambda: make_eval_probe(module, dd, eval_rows, seed=tr.seed, guard=guard(), longest=_of(eval_rows)),
            cap,
            key_parts,
            cache,
            rng_devices,
        )
    else:
        evaluation = TunedSize(tr.eval_batch_size or train.batch_size)  # null / 0: the training size (Ludwig)
    return train, evaluation
