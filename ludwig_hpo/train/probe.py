"""Batch-size probes: real steps on real rows of the prepared data, timed.

The training probe runs forward + backward + optimizer steps, the evaluation probe forward
passes without gradients; both restore the model and optimizer afterwards. They run on the
unwrapped module, so a step issues no collective: a rank that runs out of memory mid-step
cannot leave the others waiting in an all-reduce. The result of each size is then agreed
across ranks (one all-reduce per size), so the pure search takes the same path everywhere.
"""

from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.distributed as dist

from ludwig_hpo.train.batch_size import Probe, Throughput, is_oom, noise_of
from ludwig_hpo.train.data import DeviceData


def agree(speed: float | None, device: torch.device) -> float | None:
    """Across ranks: None if any rank ran out of memory, else the slowest rank's samples/s
    with the largest noise any rank measured (a :class:`Throughput`).

    Runs on every rank (a collective when the world size is above 1).
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return speed
    t = torch.tensor([1.0 if speed is None else 0.0, -(speed or 0.0), noise_of(speed or 0.0)], dtype=torch.float64)
    if device.type == "cuda":
        t = t.to(device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return None if t[0].item() > 0 else Throughput(-t[1].item(), t[2].item())


def measured(batch_size: int, step_seconds: list[float]) -> Throughput:
    """Samples/s of ``batch_size`` from its repeated step timings: the median step, with noise
    = 1.4826 x the median absolute deviation / the median (a robust relative standard
    deviation: one step slowed down by another process does not count). Pure."""
    mid = max(statistics.median(step_seconds), 1e-9)
    mad = statistics.median(abs(t - mid) for t in step_seconds)
    return Throughput(batch_size / mid, 1.4826 * mad / mid)


class CpuMemoryGuard:
    """CPU memory never raises out-of-memory (the process swaps or is killed), so on CPU the
    probe refuses a size whose projected resident memory exceeds a budget.

    The projection extrapolates the growth of resident memory (bytes per sample) seen
    between the probed sizes.

    Args:
        budget_bytes: most resident memory this process may use, e.g. half the available
            RAM divided by the workers on this machine.
    """

    def __init__(self, budget_bytes: float) -> None:
        import psutil

        self._proc = psutil.Process(os.getpid())
        self.budget = budget_bytes
        self.points: list[tuple[int, int]] = []  # (batch size, resident bytes after it)

    @classmethod
    def for_workers(cls, local_workers: int, fraction: float = 0.5) -> CpuMemoryGuard:
        """A guard whose budget is ``fraction`` of the available RAM shared by ``local_workers``."""
        import psutil

        return cls(
            psutil.Process(os.getpid()).memory_info().rss
            + fraction * psutil.virtual_memory().available / max(1, local_workers)
        )

    def allows(self, batch_size: int) -> bool:
        """Whether ``batch_size`` is projected to fit in the budget."""
        if len(self.points) < 2:
            return True
        (b0, m0), (b1, m1) = self.points[0], max(self.points)
        per_sample = max(0.0, (m1 - m0) / max(1, b1 - b0))
        return m1 + per_sample * (batch_size - b1) <= self.budget

    def record(self, batch_size: int) -> None:
        """Note the resident memory after running ``batch_size``."""
        self.points.append((batch_size, self._proc.memory_info().rss))


def probe_rows(rng: np.random.Generator, rows: np.ndarray, batch_size: int, longest: np.ndarray | None) -> np.ndarray:
    """The rows of one probe batch: ``batch_size`` drawn (seeded) from ``rows``, the first of
    them replaced by the ``longest`` rows (see :func:`~ludwig_hpo.train.lengths.longest_rows`),
    so that the batch is as long as any batch of training can be. Pure."""
    picked = rng.choice(rows, size=batch_size, replace=len(rows) < batch_size)
    if longest is not None and len(longest):
        k = min(batch_size, len(longest))
        picked[:k] = longest[:k]
    return picked


def _timed(
    step: Callable[[torch.Tensor], None],
    dd: DeviceData,
    rows: np.ndarray,
    rng: np.random.Generator,
    batch_size: int,
    warmup: int,
    steps: int,
    longest: np.ndarray | None = None,
) -> Throughput:
    sync = torch.cuda.synchronize if dd.device.type == "cuda" else (lambda: None)
    times = []
    for i in range(warmup + steps):
        idx = torch.as_tensor(probe_rows(rng, rows, batch_size, longest)).to(dd.device)
        sync()
        t = time.perf_counter()
        step(idx)
        sync()
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return measured(batch_size, times)


def _probe(
    step: Callable[[torch.Tensor], None],
    restore: Callable[[], None],
    dd: DeviceData,
    rows: np.ndarray,
    *,
    seed: int,
    warmup: int,
    steps: int,
    guard: CpuMemoryGuard | None,
    longest: np.ndarray | None,
) -> Probe:
    rng = np.random.default_rng(seed)

    def probe(batch_size: int) -> float | None:
        speed: float | None = None
        if guard is None or guard.allows(batch_size):
            try:
                speed = _timed(step, dd, rows, rng, batch_size, warmup, steps, longest)
                if guard is not None:
                    guard.record(batch_size)
            except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
                if not is_oom(e):
                    raise
                if dd.device.type == "cuda":
                    torch.cuda.empty_cache()
            finally:
                restore()
        return agree(speed, dd.device)

    return probe


def make_train_probe(
    module: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_of: Callable[[dict, dict], torch.Tensor],
    dd: DeviceData,
    rows: np.ndarray,
    *,
    seed: int,
    warmup: int = 1,
    steps: int = 3,
    guard: CpuMemoryGuard | None = None,
    longest: np.ndarray | None = None,
) -> Probe:
    """A probe ``batch_size -> samples/s per worker | None`` of training steps.

    Each call runs ``warmup`` untimed then ``steps`` timed steps of forward, backward and
    ``optimizer.step()`` on (batch,) rows drawn (seeded) from ``rows``, takes the median
    step time and the steps' spread as its noise (:func:`measured`; CUDA synchronized around
    each), restores ``module`` and ``optimizer``, and
    agrees on the result across ranks. Out of memory (or over the CPU ``guard``'s budget)
    gives None and frees the CUDA cache; other errors propagate.

    Args:
        module: the unwrapped model (not the DDP wrapper); ``optimizer`` steps its parameters.
        loss_of: ``(inputs, targets) -> scalar loss`` computed with ``module``.
        longest: rows every probe batch starts with (the longest of each sequence or text
            input), so a size is measured at the longest length a batch can have and a long
            batch in training cannot run out of memory where the probe did not.
    """
    model_state = copy.deepcopy(module.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())

    def step(idx: torch.Tensor) -> None:
        x, y = dd.batch(idx)
        loss = loss_of(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def restore() -> None:
        module.load_state_dict(model_state)
        optimizer.load_state_dict(opt_state)
        optimizer.zero_grad(set_to_none=True)

    return _probe(step, restore, dd, rows, seed=seed, warmup=warmup, steps=steps, guard=guard, longest=longest)


def make_eval_probe(
    module: torch.nn.Module,
    dd: DeviceData,
    rows: np.ndarray,
    *,
    seed: int,
    warmup: int = 1,
    steps: int = 3,
    guard: CpuMemoryGuard | None = None,
    longest: np.ndarray | None = None,
) -> Probe:
    """Like :func:`make_train_probe` for evaluation: forward passes under ``torch.no_grad``."""
    was_training = module.training

    @torch.no_grad()
    def step(idx: torch.Tensor) -> None:
        module.eval()
        module(dd.batch(idx)[0])

    def restore() -> None:
        module.train(was_training)

    return _probe(step, restore, dd, rows, seed=seed, warmup=warmup, steps=steps, guard=guard, longest=longest)
