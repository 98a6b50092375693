"""The batch-size probe: real forward + backward + optimizer steps on real training rows,
timed, with model and optimizer state restored afterwards. Runs on every DDP rank in
lockstep; results are agreed across ranks so the pure search takes the same path on all."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.distributed as dist

from ludwig_hpo.train.batch_size import Probe, is_oom
from ludwig_hpo.train.data import DeviceData


def _agree(speed: float | None, device: torch.device) -> float | None:
    """Across ranks: None if any rank ran out of memory, else the slowest rank's samples/s."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return speed
    t = torch.tensor([1.0 if speed is None else 0.0, -(speed or 0.0)], dtype=torch.float64)
    if device.type == "cuda":
        t = t.to(device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return None if t[0].item() > 0 else -t[1].item()


def make_probe(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               loss_of: Callable[[dict, dict], torch.Tensor], dd: DeviceData, rows: np.ndarray, *,
               seed: int, warmup: int = 1, steps: int = 3) -> Probe:
    """A probe ``batch_size -> samples/s | None`` for :func:`search_batch_size`.

    Each call runs ``warmup`` untimed then ``steps`` timed training steps on batches drawn
    (seeded) from ``rows`` (the sampled batch repeats rows when ``rows`` is short), takes
    the median step time (CUDA synchronized before each clock read), restores the model and
    optimizer state, and returns per-worker samples/s. Out-of-memory errors free the CUDA
    cache and return None; other errors propagate.
    """
    rng = np.random.default_rng(seed)
    sync = torch.cuda.synchronize if dd.device.type == "cuda" else (lambda: None)

    def probe(batch_size: int) -> float | None:
        model_state = copy.deepcopy(model.state_dict())
        opt_state = copy.deepcopy(optimizer.state_dict())
        speed: float | None
        try:
            times = []
            for i in range(warmup + steps):
                idx = torch.as_tensor(rng.choice(rows, size=batch_size, replace=len(rows) < batch_size)).to(dd.device)
                x, y = dd.batch(idx)
                sync()
                t = time.perf_counter()
                loss = loss_of(x, y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                sync()
                if i >= warmup:
                    times.append(time.perf_counter() - t)
            speed = batch_size / max(statistics.median(times), 1e-9)
        except RuntimeError as e:
            if not is_oom(e):
                raise
            speed = None
            if dd.device.type == "cuda":
                torch.cuda.empty_cache()
        finally:
            model.load_state_dict(model_state)
            optimizer.load_state_dict(opt_state)
            optimizer.zero_grad(set_to_none=True)
        return _agree(speed, dd.device)

    return probe
