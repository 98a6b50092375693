"""Batches for one DDP rank: the prepared arrays as tensors on the device, sharded evenly.

Every rank gets the same number of training batches per epoch (the permutation is padded
to a multiple of the world size, as ``DistributedSampler`` does), so no rank waits at an
all-reduce. Evaluation rows are sharded without padding, so reduced metrics count each row
exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from ludwig_hpo.data.preprocess import PreparedData


class DeviceData:
    """All rows of :class:`PreparedData` as tensors on ``device`` (the datasets this platform
    trains per trial fit in device memory; the object store holds one copy per node)."""

    def __init__(self, data: PreparedData, device: torch.device) -> None:
        self.inputs = {k: torch.tensor(v, device=device) for k, v in data.inputs.items()}
        self.targets = {k: torch.tensor(v, device=device) for k, v in data.targets.items()}
        self.device = device

    def batch(self, rows: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Inputs and targets of ``rows`` ((batch,) int64 on the device)."""
        return ({k: v.index_select(0, rows) for k, v in self.inputs.items()},
                {k: v.index_select(0, rows) for k, v in self.targets.items()})


def train_shard(rows: np.ndarray, *, epoch: int, seed: int, rank: int, world_size: int) -> np.ndarray:
    """This rank's rows for one epoch: a seeded permutation of ``rows`` padded to a multiple
    of ``world_size`` (by repeating its start), then every ``world_size``-th row from ``rank``.
    All ranks get ``ceil(len(rows) / world_size)`` rows."""
    perm = np.random.default_rng((seed, epoch)).permutation(rows)
    pad = (-len(perm)) % world_size
    if pad:
        perm = np.concatenate([perm, perm[:pad]])
    return perm[rank::world_size]


def eval_shard(rows: np.ndarray, *, rank: int, world_size: int) -> np.ndarray:
    """This rank's evaluation rows: ``rows[rank::world_size]`` (no padding, no duplicates)."""
    return rows[rank::world_size]


def batches(rows: np.ndarray, batch_size: int, device: torch.device, *, drop_last: bool) -> Iterator[torch.Tensor]:
    """Consecutive (batch,) int64 row tensors on ``device``; the last short batch is kept
    unless ``drop_last`` (then at least one batch is still produced)."""
    t = torch.as_tensor(rows, dtype=torch.int64).to(device)
    n = len(t)
    stop = n - n % batch_size if drop_last and n >= batch_size else n
    for i in range(0, stop, batch_size):
        yield t[i: i + batch_size]
