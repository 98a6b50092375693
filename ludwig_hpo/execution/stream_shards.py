"""Ray Data's side of feeding a streamed dataset to a trial's ranks.

The driver hands every executor a :class:`~ludwig_hpo.data.streaming.record.StreamedData`
(lazy Ray datasets per split, the fitted metadata, rows per split and fold). For one job
(:class:`~ludwig_hpo.train.job.Job`: a search trial, a fold, a test run) this module picks its
training and scored datasets (:func:`job_datasets`), cuts them into one shard per rank
(:func:`rank_shards`: ``streaming_split(n, equal=True)`` of the training rows, padded by
repeating their first rows to a multiple of ``n`` as the in-memory path pads its permutation, so
no row is dropped and every rank trains as many rows; ``equal=False`` for the scored rows,
which count each row once) and, on each rank, makes the loop's
:class:`~ludwig_hpo.train.stream_feed.JobStream` of its shard (:func:`job_stream`). A fresh Ray
Train job gets the same shards from ``ray.train.get_dataset_shard`` (:func:`fresh_job_inputs`,
:func:`job_data_config`).

An executor's ``data`` list holds either the ``ObjectRef`` of an in-memory
:class:`~ludwig_hpo.data.PreparedData` or the :class:`StreamedData` itself (small: lazy
plans), which :func:`streamed_in` tells apart without fetching anything.

Which blocks reach which rank is Ray Data's choice at run time (the rank that asks first);
every epoch the ranks' shards together hold every training row, each rank the same count.
Ray Data's memory limits hold: the datasets run under the ``DataContext`` of the driver that
built them, and :func:`limit_memory` caps each pipeline's object-store use (blocks beyond it
wait upstream or spill; nothing is materialized whole).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.data.streaming.record import StreamedData, split_batch
from ludwig_hpo.execution.streaming.prepare import fold_datasets
from ludwig_hpo.train.job import Job

if TYPE_CHECKING:  # the pools actor builds feeds without torch; the ranks' stream imports it
    from ludwig_hpo.train.stream_feed import Chunk, JobStream

#: Rows per chunk a rank reads from Ray Data (the loop re-batches them; a chunk is one copy).
CHUNK_ROWS = 4096
#: Chunks Ray Data reads ahead of the one a rank trains on.
PREFETCH_CHUNKS = 2
#: Rows of each split a job keeps in memory for its batch-size probes (drawn with replacement:
#: any batch size can be probed).
PROBE_ROWS = 1024
#: A rank keeps its shard of the scored rows in memory after the first scoring when it is
#: estimated at most this size (each later scoring would start a pass over the files again).
KEEP_SCORED_BYTES = 256 * 2**20
#: Feeds whose kept scored shards a rank process holds at once, and whose pipelines the pools
#: actor keeps per group (a warm rank runs one job's trials after another: the search's, then
#: each fold's; see :mod:`~ludwig_hpo.execution.pool_stream`).
KEPT_FEEDS = 2
#: Per feed key, the scored shard this process kept (see :func:`_kept_shard`).
_KEPT: dict[str, _KeptShard] = {}
#: Names of a job's datasets in a Ray Train job (``ray.train.get_dataset_shard``).
TRAIN, SCORED = "train", "scored"


@dataclass(frozen=True)
class JobDatasets:
    """One job's streamed rows: lazy Ray datasets and their row counts (all ranks together).

    Attributes:
        train: the training rows, padded to a multiple of the world size.
        train_rows: the training rows before padding (what the plan and the report count).
        padded_rows: ``train_rows`` plus the pad.
        scored: the scored rows (each once); ``scored_split`` names them.
    """

    train: Any
    train_rows: int
    padded_rows: int
    scored: Any
    scored_rows: int
    scored_split: str


def job_datasets(streamed: StreamedData, job: Job, world_size: int) -> JobDatasets:
    """The datasets ``job`` trains and scores on, as :meth:`Job.rows` picks in-memory rows: a
    search trial train / validation, fold ``i`` train+validation without / with fold ``i``
    (:func:`~ludwig_hpo.execution.streaming.prepare.fold_datasets`), a test run
    train+validation / test. Lazy: nothing is read here.

    Raises:
        ValueError: a fold job without its fold index, or on data without k-fold folds.
    """
    ds, rows = streamed.datasets, streamed.rows
    if job.kind == "search":
        train, n_train, scored, n_scored, name = (
            ds["train"],
            rows["train"],
            ds["validation"],
            rows["validation"],
            "validation",
        )
    elif job.kind == "fold":
        if job.fold is None or not streamed.folds:
            raise ValueError("a fold job needs its fold index and data split into k-fold folds")
        train, scored = fold_datasets(streamed, job.fold)
        held = streamed.fold_rows[job.fold]
        n_train, n_scored, name = rows["train"] + rows["validation"] - held, held, "validation"
    else:
        train, n_train = ds["train"].union(ds["validation"]), rows["train"] + rows["validation"]
        scored, n_scored, name = ds["test"], rows["test"], "test"
    pad = (-n_train) % world_size
    padded = train.union(train.limit(pad)) if pad else train
    return JobDatasets(padded, n_train, n_train + pad, scored, n_scored, name)


def limit_memory(dataset: Any, object_store_bytes: int | None) -> Any:
    """``dataset`` with its execution capped at ``object_store_bytes`` of object store (None:
    Ray Data's own default share of the store). Returns a copy; runs in the caller."""
    from ray.data import ExecutionResources

    out = dataset.copy(dataset)
    if object_store_bytes is not None:
        out.context.execution_options.resource_limits = ExecutionResources(object_store_memory=object_store_bytes)
    return out


def rank_shards(datasets: JobDatasets, world_size: int, kept: bool = False) -> list[tuple[Any, Any]]:
    """Per rank, (what it iterates of the training rows, of the scored rows): the training
    rows cut ``streaming_split(world_size, equal=True)`` (padded: none is dropped), the scored
    rows ``equal=False`` (each counted once). The iterators are picklable and repeatable: each
    epoch's iteration starts a new pass over the files, all ranks together (an implicit barrier
    at the start of each pass).

    ``kept``: the job's rows are already in the object store
    (:mod:`~ludwig_hpo.execution.streaming.cache`): Ray Data's ``split`` of those blocks instead
    (``equal=True`` / ``equal=False`` alike), one materialized shard per rank that each epoch
    iterates on its own, without a coordinator's pass. Runs where the job is set up (the pools
    actor, a test)."""
    if kept:
        train = datasets.train.split(world_size, equal=True)
        scored = datasets.scored.split(world_size, equal=False)
    else:
        train = datasets.train.streaming_split(world_size, equal=True)
        scored = datasets.scored.streaming_split(world_size, equal=False)
    return list(zip(train, scored, strict=True))


def _chunks(iterator: Any) -> Iterator[Chunk]:
    from ray.data.dataset import MaterializedDataset

    if isinstance(iterator, MaterializedDataset):  # a shard of kept blocks: each block as it is, no copy
        batches = iterator.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=0)
    else:
        batches = iterator.iter_batches(batch_size=CHUNK_ROWS, batch_format="numpy", prefetch_batches=PREFETCH_CHUNKS)
    for batch in batches:
        yield split_batch(batch)


def probe_sample(streamed: StreamedData, datasets: JobDatasets) -> PreparedData:
    """The first :data:`PROBE_ROWS` rows of the job's training and scored datasets, in memory,
    as a :class:`PreparedData` whose ``splits`` hold them (what the batch-size search probes).
    Reads only those rows; runs where the job is set up."""
    parts = [split_batch(d.take_batch(PROBE_ROWS, batch_format="numpy")) for d in (datasets.train, datasets.scored)]
    (tx, ty), (sx, sy) = parts
    n_train, n_scored = len(next(iter(ty.values()))), len(next(iter(sy.values())))
    return PreparedData(
        inputs={k: np.concatenate([tx[k], sx[k]]) for k in tx},
        targets={k: np.concatenate([ty[k], sy[k]]) for k in ty},
        splits={"train": np.arange(n_train), datasets.scored_split: np.arange(n_train, n_train + n_scored)},
        folds=(),
        meta=streamed.meta,
        filled=streamed.filled,
    )


@dataclass(frozen=True)
class RankFeed:
    """What one rank of a job is handed to stream its shard (picklable, sent to the rank).

    Attributes:
        train, scored: the rank's ``DataIterator`` of each (see :func:`rank_shards`).
        world_size: ranks of the job.
        counts: ``(train_rows, padded_rows, scored_rows)`` of :class:`JobDatasets`.
        scored_split: the scored split's name.
        probe: :func:`probe_sample`'s rows.
        key: names this rank's feed across the trials it is handed to (a warm group's later
            trials of the same job get the same key): the rank keeps its scored shard under it.
            Empty: a feed of one trial (a fresh Ray Train job's).
    """

    train: Any
    scored: Any
    world_size: int
    counts: tuple[int, int, int]
    scored_split: str
    probe: PreparedData
    key: str = ""


def rank_feeds(
    streamed: StreamedData, job: Job, world_size: int, object_store_bytes: int | None = None
) -> list[RankFeed]:
    """One :class:`RankFeed` per rank of ``job`` (rank order): its datasets, capped by
    :func:`limit_memory`, cut by :func:`rank_shards`, with the probe rows. The rows of a search
    or test job on splits kept in the object store are cut from the blocks there; a fold job's
    rows are filtered anew at each pass (kept cut, they would be another copy per fold)."""
    from ludwig_hpo.execution.streaming.cache import kept_in_store

    datasets = job_datasets(streamed, job, world_size)
    datasets = JobDatasets(
        limit_memory(datasets.train, object_store_bytes),
        datasets.train_rows,
        datasets.padded_rows,
        limit_memory(datasets.scored, object_store_bytes),
        datasets.scored_rows,
        datasets.scored_split,
    )
    probe = probe_sample(streamed, datasets)
    counts = (datasets.train_rows, datasets.padded_rows, datasets.scored_rows)
    feeds = uuid.uuid4().hex
    return [
        RankFeed(t, s, world_size, counts, datasets.scored_split, probe, f"{feeds}/{rank}")
        for rank, (t, s) in enumerate(rank_shards(datasets, world_size, kept_in_store(streamed) and job.kind != "fold"))
    ]


class _KeptShard:
    """A scored shard read once and kept (its chunks in this rank's memory): scoring it again
    starts no new pass over the files. Every rank keeps its shard of the same first pass, so
    the shards still hold each scored row once."""

    def __init__(self, iterator: Any) -> None:
        self.iterator = iterator
        self.chunks: list[Chunk] | None = None

    def __call__(self, epoch: int) -> Iterable[Chunk]:
        if self.chunks is None:
            self.chunks = list(_chunks(self.iterator))
            self.iterator = None  # its split coordinator may go once the pools actor lets the feed go
        return self.chunks


def _row_bytes(probe: PreparedData) -> float:
    n = max(1, len(next(iter(probe.targets.values()))))
    return sum(v.nbytes for v in [*probe.inputs.values(), *probe.targets.values()]) / n


def _kept_shard(feed: RankFeed) -> _KeptShard:
    """The rank's kept scored shard of ``feed``: the one an earlier trial of the same feed kept
    in this process, else a new one (the least recently run beyond :data:`KEPT_FEEDS` is let go). Every
    rank of a group gets the feed of the same build, so either all ranks reuse their shards of
    one pass or all read a new pass."""
    if not feed.key:
        return _KeptShard(feed.scored)
    if feed.key in _KEPT:
        _KEPT[feed.key] = _KEPT.pop(feed.key)  # the most recently run last, as the pools actor keeps them
    else:
        while len(_KEPT) >= KEPT_FEEDS:
            del _KEPT[next(iter(_KEPT))]
        _KEPT[feed.key] = _KeptShard(feed.scored)
    return _KEPT[feed.key]


def job_stream(feed: RankFeed, meta: dict[str, Any]) -> JobStream:
    """The loop's :class:`~ludwig_hpo.train.stream_feed.JobStream` of this rank's shard; runs
    on the rank. Each epoch iterates the rank's training ``DataIterator`` again; the scored
    shard is read once and kept when it is estimated (from the probe rows) at most
    :data:`KEEP_SCORED_BYTES` (and kept for the later trials a warm rank runs of the same feed,
    see :func:`_kept_shard`), else read again at every scoring."""
    from ludwig_hpo.train.stream_feed import JobStream, RankStream

    train_rows, padded, scored_rows = feed.counts
    estimate = scored_rows / feed.world_size * _row_bytes(feed.probe)
    scored: Any = _kept_shard(feed) if estimate <= KEEP_SCORED_BYTES else (lambda epoch: _chunks(feed.scored))
    return JobStream(
        meta=meta,
        train=RankStream(train_rows, padded // feed.world_size, lambda epoch: _chunks(feed.train)),
        scored=RankStream(scored_rows, None, scored),
        scored_split=feed.scored_split,
        probe=feed.probe,
    )


def job_data_config() -> Any:
    """A Ray Train ``DataConfig`` that cuts a job's :data:`TRAIN` dataset with
    ``streaming_split(equal=True)`` and its :data:`SCORED` dataset with ``equal=False`` (Train's
    own cuts every split dataset equal, which drops scored rows). Built in the Tune trial actor."""
    from ray.train import DataConfig

    class JobDataConfig(DataConfig):
        def configure(
            self, datasets: dict[str, Any], world_size: int, worker_handles: Any, worker_node_ids: Any, **kwargs: Any
        ) -> list[dict[str, Any]]:
            output: list[dict[str, Any]] = [{} for _ in range(world_size)]
            for name, ds in datasets.items():
                for i, split in enumerate(
                    ds.streaming_split(world_size, equal=name == TRAIN, locality_hints=worker_node_ids)
                ):
                    output[i][name] = split
            return output

    return JobDataConfig()


def streamed_in(data: list[Any]) -> StreamedData | None:
    """The :class:`StreamedData` an executor's ``data`` list holds, None for an in-memory
    dataset's ``ObjectRef`` (not fetched)."""
    return data[0] if isinstance(data[0], StreamedData) else None


def fresh_job_inputs(streamed: StreamedData, job: Job, world_size: int) -> tuple[dict[str, Any], RankFeed]:
    """A fresh Ray Train job's ``datasets`` (:data:`TRAIN`, :data:`SCORED`) and the
    :class:`RankFeed` every rank completes with its ``get_dataset_shard`` iterators
    (:func:`rank_feed_of_train_worker`). Runs in the Tune trial actor."""
    datasets = job_datasets(streamed, job, world_size)
    counts = (datasets.train_rows, datasets.padded_rows, datasets.scored_rows)
    template = RankFeed(None, None, world_size, counts, datasets.scored_split, probe_sample(streamed, datasets))
    return {TRAIN: datasets.train, SCORED: datasets.scored}, template


def rank_feed_of_train_worker(template: RankFeed) -> RankFeed:
    """``template`` with this Ray Train worker's shards (``ray.train.get_dataset_shard``)."""
    import dataclasses

    import ray.train

    return dataclasses.replace(
        template, train=ray.train.get_dataset_shard(TRAIN), scored=ray.train.get_dataset_shard(SCORED)
    )
