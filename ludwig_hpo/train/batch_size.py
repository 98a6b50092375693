"""Batch-size search, pure: given a probe ``batch_size -> samples/s or None (out of memory)``,
return the per-worker batch size to train with. Imports no torch; the probe that runs real
training steps lives in :mod:`ludwig_hpo.train.probe`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ludwig_hpo.errors import HpoError

#: A probe runs real training steps at a batch size and returns samples/s, or None on OOM.
Probe = Callable[[int], "float | None"]


class BatchSizeError(HpoError, RuntimeError):
    """Even the smallest batch size ran out of memory."""


@dataclass(frozen=True)
class BatchSizeChoice:
    """Result of :func:`search_batch_size`.

    Attributes:
        batch_size: the chosen per-worker batch size.
        tried: ``(batch size, samples/s or None for out of memory)`` in the order probed.
    """

    batch_size: int
    tried: tuple[tuple[int, float | None], ...]


def search_batch_size(probe: Probe, *, max_size: int, start: int = 8, growth: int = 2,
                      tolerance: float = 0.05, patience: int = 2) -> BatchSizeChoice:
    """Grow the batch size geometrically while throughput improves.

    Starts at ``min(start, max_size)`` and multiplies by ``growth``, ending with exactly
    ``max_size``. A size counts as better only if its samples/s beat the best so far by more
    than ``tolerance`` (relative); the search stops after ``patience`` sizes in a row that
    are not better, at ``max_size``, or at the first out-of-memory. Out of memory before
    any success halves the size until one fits. The smallest size within tolerance of the
    best throughput wins (smaller batches generalize at least as well).

    Args:
        probe: called on every rank with the same sizes in the same order (under DDP its
            result must already be agreed across ranks).
        max_size: upper bound (e.g. a fraction of the per-worker training split), >= 1.

    Raises:
        BatchSizeError: batch size 1 runs out of memory.
        ValueError: ``max_size < 1``, ``growth < 2`` or ``patience < 1``.
    """
    if max_size < 1 or growth < 2 or patience < 1:
        raise ValueError(f"max_size >= 1, growth >= 2 and patience >= 1 must hold, but got "
                         f"(max_size={max_size}, growth={growth}, patience={patience})")
    size = max(1, min(start, max_size))
    tried: list[tuple[int, float | None]] = []
    best = 0.0
    oom_at: int | None = None  # smallest size known to run out of memory
    stall = 0
    while True:
        speed = probe(size)
        tried.append((size, speed))
        if speed is None:
            oom_at = size if oom_at is None else min(oom_at, size)
            if any(s is not None for _, s in tried):
                break
            if size == 1:
                raise BatchSizeError("batch size 1 runs out of memory")
            size //= 2
            continue
        if speed > best * (1 + tolerance):
            stall = 0
        else:
            stall += 1
        best = max(best, speed)
        nxt = min(max_size, size * growth)
        if stall >= patience or size >= max_size or (oom_at is not None and nxt >= oom_at):
            break
        size = nxt
    fastest = max(s for _, s in tried if s is not None)
    chosen = min(b for b, s in tried if s is not None and s * (1 + tolerance) >= fastest)
    return BatchSizeChoice(batch_size=chosen, tried=tuple(tried))


def is_oom(exc: BaseException) -> bool:
    """True if ``exc`` is an accelerator out-of-memory error (by type name or allocator message)."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return any(m in text for m in ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED"))
