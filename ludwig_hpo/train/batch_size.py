"""Batch-size search, pure: given a probe ``batch_size -> samples/s or None (out of memory)``,
return the per-worker batch size to train with. Imports no torch; the probe that runs real
training steps lives in :mod:`ludwig_hpo.train.probe`, the cache and DDP agreement in
:mod:`ludwig_hpo.train.autobatch`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ludwig_hpo.errors import HpoError

#: A probe runs real training steps at a batch size and returns samples/s (a plain float, or a
#: :class:`Throughput` that also carries the measurement's noise), or None on OOM.
Probe = Callable[[int], "float | None"]


class Throughput(float):
    """Samples/s of one probed batch size (a float, so it compares and divides as one), with
    the relative noise of its measurement.

    Attributes:
        noise: relative half-width of the measurement (0.1: the true throughput is likely
            within +-10 %), estimated from the spread of the repeated timed steps of the probe;
            0 for a value given without one.
    """

    noise: float

    def __new__(cls, samples_per_s: float, noise: float = 0.0) -> Throughput:
        obj = super().__new__(cls, samples_per_s)
        obj.noise = max(0.0, float(noise))
        return obj

    def __reduce__(self):
        return (Throughput, (float(self), self.noise))

    def __repr__(self) -> str:
        return f"Throughput({float(self)!r}, noise={self.noise!r})"


def noise_of(speed: float) -> float:
    """The relative noise of a probe's result (0 for a plain float)."""
    return getattr(speed, "noise", 0.0)


def beats(faster: float, slower: float, tolerance: float) -> bool:
    """Whether ``faster`` samples/s is really more than ``slower``: its gain exceeds both the
    relative ``tolerance`` and the two measurements' noise together (their intervals do not
    overlap). Equal or overlapping measurements are a tie, never a win."""
    margin = max(tolerance, noise_of(faster) + noise_of(slower))
    return faster > slower * (1 + margin)


class BatchSizeError(HpoError, RuntimeError):
    """Even the smallest batch size ran out of memory."""


#: Why the batch-size search stopped growing.
StopReason = Literal["plateau", "cap", "memory"]


@dataclass(frozen=True)
class BatchSizeChoice:
    """Result of :func:`search_batch_size`.

    Attributes:
        batch_size: the chosen per-worker batch size.
        tried: ``(batch size, samples/s or None for out of memory)`` in the order probed.
        stopped_by: why growth ended: ``"plateau"`` (throughput stopped improving),
            ``"cap"`` (reached ``max_size``) or ``"memory"`` (a size ran out of memory).
    """

    batch_size: int
    tried: tuple[tuple[int, float | None], ...]
    stopped_by: StopReason = "plateau"


def search_batch_size(
    probe: Probe,
    *,
    max_size: int,
    start: int = 8,
    growth: int = 2,
    tolerance: float = 0.05,
    patience: int = 2,
    refine_steps: int = 2,
    headroom: float = 0.9,
) -> BatchSizeChoice:
    """Grow the batch size geometrically while throughput improves.

    Starts at ``min(start, max_size)`` and multiplies by ``growth``, ending with exactly
    ``max_size``. A size counts as better only if its samples/s beat the best so far by more
    than ``tolerance`` (relative); growth stops after ``patience`` sizes in a row that are
    not better, at ``max_size``, or at the first out-of-memory. Out of memory before any
    success halves the size until one fits; a size at or above one that ran out of memory
    is never probed again. After an out-of-memory stop, ``refine_steps`` bisections between
    the last size that fit and the one that did not find a larger fitting size.

    "Better" and "within" are decided by :func:`beats`: a gain must exceed ``tolerance`` and
    the noise the probes measured (a :class:`Throughput`'s), so a difference that timing noise
    alone can produce never makes a larger size win. The choice is the smallest probed size
    that the fastest one does not beat (smaller batches generalize at least as well; a tie
    goes to the smaller size, the same one every time for the same measurements). When a size ran out of memory, the choice
    is at most ``headroom`` x that size, so that evaluation buffers and fragmentation do not
    run out of memory in real training.

    Args:
        probe: called on every rank with the same sizes in the same order (under DDP its
            result must already be agreed across ranks).
        max_size: upper bound (e.g. a fraction of the per-worker training split), >= 1.

    Raises:
        BatchSizeError: batch size 1 runs out of memory.
        ValueError: ``max_size < 1``, ``growth < 2``, ``patience < 1`` or ``headroom``
            outside (0, 1].
    """
    if max_size < 1 or growth < 2 or patience < 1 or not 0 < headroom <= 1:
        raise ValueError(
            f"max_size >= 1, growth >= 2, patience >= 1 and 0 < headroom <= 1 must hold, but got "
            f"(max_size={max_size}, growth={growth}, patience={patience}, headroom={headroom})"
        )
    size = max(1, min(start, max_size))
    tried: list[tuple[int, float | None]] = []
    best: float = 0.0  # the fastest measurement so far (with its noise)
    oom_at: int | None = None  # smallest size known to run out of memory
    stall = 0
    stopped_by: StopReason = "plateau"
    while True:
        speed = probe(size)
        tried.append((size, speed))
        if speed is None:
            oom_at = size if oom_at is None else min(oom_at, size)
            if any(s is not None for _, s in tried):
                stopped_by = "memory"
                break
            if size == 1:
                raise BatchSizeError("batch size 1 runs out of memory")
            size //= 2
            continue
        if beats(speed, best, tolerance):
            stall = 0
        else:
            stall += 1
        if speed > best:
            best = speed
        nxt = min(max_size, size * growth)
        if oom_at is not None and nxt >= oom_at:
            stopped_by = "memory"
            break
        if stall >= patience or size >= max_size:
            stopped_by = "plateau" if stall >= patience else "cap"
            break
        size = nxt
    if stopped_by == "memory" and oom_at is not None:
        fits = max(b for b, s in tried if s is not None)
        for _ in range(refine_steps):
            mid = (fits + oom_at) // 2
            if mid <= fits:
                break
            speed = probe(mid)
            tried.append((mid, speed))
            if speed is None:
                oom_at = mid
            else:
                fits = mid
    ok = [(b, s) for b, s in tried if s is not None]
    fastest = max((s for _, s in ok), key=float)
    chosen = min(b for b, s in ok if not beats(fastest, s, tolerance))
    if oom_at is not None:
        chosen = max(1, min(chosen, int(oom_at * headroom)))
    return BatchSizeChoice(batch_size=chosen, tried=tuple(tried), stopped_by=stopped_by)


def is_oom(exc: BaseException) -> bool:
    """True if ``exc`` is an accelerator out-of-memory error (by type name or allocator message)."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return any(m in text for m in ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED"))


# ---------------------------------------------------------------------------- cache
def cache_key(
    *,
    architecture: str,
    input_shapes: dict[str, tuple[int, ...]],
    device: str,
    device_memory: int,
    world_size: int,
    precision: str,
    strategy: str,
    max_size: int,
    optimizer: str = "",
    kind: str = "train",
    torch_version: str = "",
) -> str:
    """Key under which a tuned batch size is cached: everything that changes what fits and
    what is fast, nothing that does not (learning rate, dropout, seeds...).

    Args:
        architecture: the model's structure and parameter shapes (see ``describe_model``).
        input_shapes: per input feature, the shape of one sample.
        device: ``"cpu"`` or the accelerator's name; device_memory: its bytes (0 on CPU).
        world_size: DDP workers; precision, strategy: as configured.
        max_size: the search's cap (it depends on the training split's size).
        optimizer: the optimizer type (its state takes memory: Adam keeps 2 buffers per parameter).
        kind: ``"train"`` or ``"eval"``.
        torch_version: the torch release (its kernels and allocator change what is fast and
            what fits); part of the key so a size persisted across sweeps is only reused by
            the same torch.
    """
    payload = json.dumps(
        {
            "arch": architecture,
            "inputs": sorted((k, list(v)) for k, v in input_shapes.items()),
            "device": device,
            "memory": device_memory,
            "world": world_size,
            "precision": precision,
            "strategy": strategy,
            "max": max_size,
            "optimizer": optimizer,
            "kind": kind,
            "torch": torch_version,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


class BatchSizeCache(Protocol):
    """Tuned batch sizes shared by the trials of a sweep."""

    def get(self, key: str) -> dict[str, Any] | None: ...
    def put(self, key: str, value: dict[str, Any]) -> None: ...


class MemoryCache:
    """A :class:`BatchSizeCache` in one process's memory (tests, single runs)."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.entries[key] = value
