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


class Columns(dict):
    """A batch's inputs, ``{feature: tensor}``, that also carry the side-by-side tensor they
    are views of: ``table`` (batch, columns), whose columns are the features ``names`` in order
    (one column each). A model whose inputs are exactly these columns can use ``table`` as is
    instead of concatenating the views again."""

    table: torch.Tensor
    names: tuple[str, ...]


class DeviceData:
    """All rows of :class:`PreparedData` as tensors on ``device`` (the datasets this platform
    trains per trial fit in device memory; the object store holds one copy per node).

    Inputs of shape ``(rows, columns)`` and equal dtype (number, binary and category features)
    are stored side by side in one tensor, so a batch costs one gather per dtype rather than
    one per feature (a table of 30 number columns: 1 instead of 30); ``inputs`` holds views.
    """

    def __init__(self, data: PreparedData, device: torch.device) -> None:
        tensors = {k: torch.tensor(v, device=device) for k, v in data.inputs.items()}
        by_dtype: dict[torch.dtype, list[str]] = {}
        for k, t in tensors.items():
            if t.dim() == 2:
                by_dtype.setdefault(t.dtype, []).append(k)
        #: (side-by-side tensor, [(feature, first column, end column)])
        self._tables: list[tuple[torch.Tensor, list[tuple[str, int, int]]]] = []
        self._alone = {k: t for k, t in tensors.items() if t.dim() != 2}
        for names in by_dtype.values():
            table = torch.cat([tensors[k] for k in names], dim=1)
            bounds = torch.tensor([0] + [tensors[k].shape[1] for k in names]).cumsum(0).tolist()
            self._tables.append((table, [(k, bounds[i], bounds[i + 1]) for i, k in enumerate(names)]))
        #: per table: (feature names, column widths), for one ``torch.split`` per batch
        self._splits = [([k for k, _, _ in spans], [b - a for _, a, b in spans]) for _, spans in self._tables]
        self.inputs = {**self._alone, **{k: table[:, a:b] for table, spans in self._tables for k, a, b in spans}}
        #: the one table's feature names when every input is one column of it (see :class:`Columns`)
        self._columns = (
            tuple(self._splits[0][0])
            if not self._alone and len(self._tables) == 1 and all(w == 1 for w in self._splits[0][1])
            else None
        )
        self.targets = {k: torch.tensor(v, device=device) for k, v in data.targets.items()}
        self.device = device

    def batch(self, rows: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Inputs and targets of ``rows`` ((batch,) int64 on the device)."""
        if self._columns is not None:  # a table of numbers / binaries: its rows, and views of them
            picked = self._tables[0][0].index_select(0, rows)
            columns = Columns(zip(self._columns, picked.split(1, dim=1), strict=True))
            columns.table, columns.names = picked, self._columns
            return columns, {k: v.index_select(0, rows) for k, v in self.targets.items()}
        inputs: dict[str, torch.Tensor] = {k: v.index_select(0, rows) for k, v in self._alone.items()}
        for (table, _), (names, widths) in zip(self._tables, self._splits, strict=True):
            # the columns as views, in one call (a Python slice per feature costs more)
            inputs.update(zip(names, table.index_select(0, rows).split(widths, dim=1), strict=True))
        return inputs, {k: v.index_select(0, rows) for k, v in self.targets.items()}


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator of an epoch's row order (see :func:`train_shard`)."""
    return np.random.default_rng((seed, epoch))


def train_shard(
    rows: np.ndarray, *, epoch: int, seed: int, rank: int, world_size: int, rng: np.random.Generator | None = None
) -> np.ndarray:
    """This rank's rows for one epoch: a seeded permutation of ``rows`` padded to a multiple
    of ``world_size`` (by repeating its start), then every ``world_size``-th row from ``rank``.
    All ranks get ``ceil(len(rows) / world_size)`` rows.

    Args:
        rng: ``epoch_rng(seed, epoch)`` made ahead, unused until now (a generator made between
            training steps costs far more than one made before them).
    """
    perm = (rng or epoch_rng(seed, epoch)).permutation(rows)
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
        yield t[i : i + batch_size]
