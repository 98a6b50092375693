"""A rank's streamed shard as the worker loop's batches: the streamed twin of :mod:`.data`.

A streamed dataset never sits whole in a rank: each epoch, a rank reads its own balanced
shard of the training split as a stream of column chunks (any sizes: Ray Data's blocks,
handed in by the executor, see :mod:`ludwig_hpo.execution.stream_shards`), and this module
turns that stream into the loop's batches:

- a local shuffle buffer per epoch, seeded by the trial's seed, the epoch and the rank (a
  block shuffle: the buffer is permuted as a whole, half of it emitted, the rest kept), so a
  trial trains the same rows in the same order every time it runs;
- exactly :func:`~ludwig_hpo.train.plan.batches_per_epoch` batches per rank and epoch, as the
  in-memory path cuts them (a last batch of one row is dropped), so no rank waits at an
  all-reduce; a shard of a different length than the one every rank was promised stops
  the epoch with a ``RuntimeError`` instead of a hang in a collective;
- scoring batches of this rank's shard of a scored split, every row once (no shuffling).

Ray-free (the loop runs under plain ``torch.multiprocessing`` too): the stream is a callable
``open(epoch) -> iterable of (inputs, targets)`` numpy chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from ludwig_hpo.data.preprocess import FeatureMeta, PreparedData
from ludwig_hpo.train.data import Columns, DeviceData
from ludwig_hpo.train.plan import batches_per_epoch

#: One chunk of a shard: (inputs by feature, targets by feature), numpy arrays with the
#: prepared shapes of :class:`~ludwig_hpo.data.PreparedData` and one common first dimension.
Chunk = tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]

#: ``open(epoch)``: this rank's shard of a split for one epoch (1-based), as chunks.
OpenShard = Callable[[int], Iterable[Chunk]]

#: Rows a rank's shuffle buffer holds by default (before it is halved into a batch run).
SHUFFLE_BUFFER_ROWS = 16_384


@dataclass(frozen=True)
class RankStream:
    """One split as a rank streams it.

    Attributes:
        total_rows: rows of the split over all ranks (what the plan and the report count).
        rank_rows: rows this rank's shard holds each epoch, the same on every rank (a
            training split); None: not known ahead (a scored split, whose shards may differ).
        open: this rank's shard for an epoch (see :data:`OpenShard`).
    """

    total_rows: int
    rank_rows: int | None
    open: OpenShard


@dataclass(frozen=True)
class JobStream:
    """What the worker loop trains one job on when its dataset is streamed (instead of a
    :class:`~ludwig_hpo.data.PreparedData`). Built per job on each rank by the executor from
    the driver's :class:`~ludwig_hpo.data.streaming.record.StreamedData`.

    Attributes:
        meta: the fitted features, as the in-memory path's ``PreparedData.meta``.
        train: the job's training rows (a search trial's train split, a fold's k-1 folds, a
            test run's train+validation).
        scored: the rows the job scores (validation, the held-out fold, test).
        scored_split: ``"validation"`` or ``"test"``: the scored split's name in the report.
        probe: a small in-memory sample, ``splits["train"]`` and ``splits[scored_split]``
            rows of the streamed splits' first rows: what the batch-size search probes and
            measures the longest token rows of (it never trains on it).
        shuffle_buffer_rows: rows of the per-epoch local shuffle buffer.
    """

    meta: dict[str, FeatureMeta]
    train: RankStream
    scored: RankStream
    scored_split: str
    probe: PreparedData
    shuffle_buffer_rows: int = SHUFFLE_BUFFER_ROWS
    seen: list[int] = field(default_factory=list)

    def probe_rows(self) -> tuple[np.ndarray, str, np.ndarray]:
        """(probe training rows, scored split's name, probe scored rows) of :attr:`probe`."""
        return self.probe.splits["train"], self.scored_split, self.probe.splits[self.scored_split]

    def train_epoch(
        self, epoch: int, batch_size: int, device: torch.device, *, seed: int, rank: int, shuffle: bool
    ) -> EpochBatches:
        """This rank's training batches of ``epoch`` (see :class:`EpochBatches`)."""
        rng = np.random.default_rng((seed, epoch, rank)) if shuffle else None
        return EpochBatches(self.train, epoch, batch_size, device, rng, self.shuffle_buffer_rows, self.seen)

    def scorer(self, device: torch.device) -> StreamScorer:
        """What :func:`~ludwig_hpo.train.evaluate.evaluate` reads the scored split from."""
        return StreamScorer(self.scored, device)

    def train_scorer(self, device: torch.device) -> StreamScorer:
        """The training rows as :func:`~ludwig_hpo.train.evaluate.evaluate` scores them (the
        ranks' shards, unshuffled; a row that pads the shards to equal sizes counts twice)."""
        return StreamScorer(self.train, device)


class IndexedBatches:
    """The in-memory path's batches of one epoch in the form :class:`EpochBatches` has: the
    ``(inputs, targets)`` of each row tensor of ``rows`` (see :meth:`DeviceData.batch`)."""

    def __init__(self, dd: DeviceData, rows: list[torch.Tensor]) -> None:
        self.dd, self.rows = dd, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        for idx in self.rows:
            yield self.dd.batch(idx)


class EpochBatches:
    """One rank's training batches of one epoch, read from its shard as they are trained.

    ``len()`` is known before the first batch: ``batches_per_epoch(rank_rows, batch_size)``,
    the same on every rank. Iterating yields ``(inputs, targets)`` on ``device`` (inputs as
    :class:`~ludwig_hpo.train.data.Columns` when they are one table of single columns, as
    :class:`~ludwig_hpo.train.data.DeviceData` gives them), each batch of ``batch_size`` rows
    but the last. ``seen`` gets the epoch's row count appended when the shard was read whole.

    Raises (while iterating):
        RuntimeError: the shard held another number of rows than ``rank_rows`` (the ranks
            would take different numbers of steps).
    """

    def __init__(
        self,
        stream: RankStream,
        epoch: int,
        batch_size: int,
        device: torch.device,
        rng: np.random.Generator | None,
        buffer_rows: int,
        seen: list[int],
    ) -> None:
        self.stream, self.epoch, self.batch_size, self.device = stream, epoch, batch_size, device
        self.rng, self.buffer_rows, self.seen = rng, max(buffer_rows, batch_size), seen
        if stream.rank_rows is None:
            raise ValueError("a training stream needs its rows per rank")
        self.rank_rows = stream.rank_rows
        self.count = batches_per_epoch(stream.rank_rows, batch_size)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        rows = 0
        chunks = self.stream.open(self.epoch)
        if self.rng is not None:
            chunks = shuffled(chunks, self.rng, self.buffer_rows)
        emitted = 0
        for x, y in rebatch(chunks, self.batch_size):
            rows += _length(y, x)
            if emitted < self.count:
                emitted += 1
                yield to_device(x, y, self.device)
        if rows != self.rank_rows:
            raise RuntimeError(
                f"a streamed shard held {rows} rows at epoch {self.epoch}, not the {self.rank_rows} "
                f"every rank was given: the ranks would take different numbers of steps"
            )
        self.seen.append(rows)


class StreamScorer:
    """A scored split's batches on one rank, for :func:`~ludwig_hpo.train.evaluate.evaluate`:
    its shard once, unshuffled, each row once (the shards of all ranks cover the split)."""

    def __init__(self, stream: RankStream, device: torch.device) -> None:
        self.stream, self.device = stream, device

    def eval_batches(self, batch_size: int) -> Iterator[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        """This rank's batches of the split, on the device, read as they are scored."""
        for x, y in rebatch(self.stream.open(0), batch_size):
            yield to_device(x, y, self.device)


def _length(y: Mapping[str, np.ndarray], x: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(y.values()))) if y else len(next(iter(x.values())))


def _cat(parts: list[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if len(parts) == 1:
        return dict(parts[0])
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _take(d: Mapping[str, np.ndarray], idx: np.ndarray | slice) -> dict[str, np.ndarray]:
    return {k: v[idx] for k, v in d.items()}


def shuffled(chunks: Iterable[Chunk], rng: np.random.Generator, buffer_rows: int) -> Iterator[Chunk]:
    """``chunks`` with their rows in a local shuffle order: rows gather in a buffer until it
    holds ``2 * buffer_rows``; then it is permuted and its first half leaves, the second
    half stays for the next chunks; at the end, what is left is permuted and leaves. Every row
    leaves exactly once; a row travels at most about two buffers from where it was read."""
    xs: list[Mapping[str, np.ndarray]] = []
    ys: list[Mapping[str, np.ndarray]] = []
    held = 0
    for x, y in chunks:
        n = _length(y, x)
        if n == 0:
            continue
        xs.append(x)
        ys.append(y)
        held += n
        if held >= 2 * buffer_rows:
            bx, by = _cat(xs), _cat(ys)
            perm = rng.permutation(held)
            out, keep = perm[: held - buffer_rows], perm[held - buffer_rows :]
            yield _take(bx, out), _take(by, out)
            xs, ys, held = [_take(bx, keep)], [_take(by, keep)], buffer_rows
    if held:
        bx, by = _cat(xs), _cat(ys)
        perm = rng.permutation(held)
        yield _take(bx, perm), _take(by, perm)


def rebatch(chunks: Iterable[Chunk], batch_size: int) -> Iterator[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """``chunks`` cut into consecutive batches of ``batch_size`` rows (the last may be short),
    in order; a chunk's rows are copied only when a batch spans chunks."""
    xs: list[Mapping[str, np.ndarray]] = []
    ys: list[Mapping[str, np.ndarray]] = []
    held = 0
    for x, y in chunks:
        n = _length(y, x)
        start = 0
        while start < n:
            take = min(batch_size - held, n - start)
            xs.append(_take(x, slice(start, start + take)))
            ys.append(_take(y, slice(start, start + take)))
            held, start = held + take, start + take
            if held == batch_size:
                yield _cat(xs), _cat(ys)
                xs, ys, held = [], [], 0
    if held:
        yield _cat(xs), _cat(ys)


def to_device(
    x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray], device: torch.device
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One batch's arrays as tensors on ``device``, shaped as :meth:`DeviceData.batch` gives
    them: inputs that are all single columns of one dtype come as one table's views
    (:class:`~ludwig_hpo.train.data.Columns`, one host-to-device copy)."""
    names = tuple(x)
    dtypes = {v.dtype for v in x.values()}
    if names and len(dtypes) == 1 and all(v.ndim == 2 and v.shape[1] == 1 for v in x.values()):
        table = torch.from_numpy(np.ascontiguousarray(np.concatenate([x[k] for k in names], axis=1))).to(device)
        columns = Columns(zip(names, table.split(1, dim=1), strict=True))
        columns.table, columns.names = table, names
        inputs: dict[str, torch.Tensor] = columns
    else:
        inputs = {k: torch.from_numpy(np.array(v)).to(device) for k, v in x.items()}
    # Ray Data's arrays are read-only views of its blocks; a copy (tiny: one batch) keeps torch
    # from writing into them
    return inputs, {k: torch.from_numpy(np.array(v)).to(device) for k, v in y.items()}
