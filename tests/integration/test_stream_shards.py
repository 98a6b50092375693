"""A streamed dataset's shards on real Ray Data: each rank of a job streams its own balanced
shard (``streaming_split``), every training row each epoch, every scored row once, and a
2-rank trial trains on them through the worker loop. One local cluster for the module."""

from __future__ import annotations

import numpy as np
import pytest

from ludwig_hpo.data.streaming.record import FOLD_KEY, StreamedData, input_key, target_key
from ludwig_hpo.train.job import Job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ROWS = {"train": 203, "validation": 41, "test": 30}  # 203: odd, so 2 ranks need one pad row


@pytest.fixture(scope="module")
def cluster():
    from ludwig_hpo.execution.cluster import local_cluster

    # logical CPUs beyond the ranks' own: Ray Data's read and map tasks need some free
    with local_cluster(num_cpus=4, num_gpus=0, trial_slots=1, train_jobs=False):
        yield


def _same(batch: dict) -> dict:
    return batch


def _streamed(folds: int = 0) -> StreamedData:
    """Ids as the feature: ``inputs/x`` and ``targets/y`` hold each row's id (train ids from 0,
    validation from 1000, test from 2000), in blocks of 16 rows."""
    import ray.data

    from ludwig_hpo.data.preprocess import FeatureMeta

    datasets, start = {}, {"train": 0, "validation": 1000, "test": 2000}
    for split, n in ROWS.items():
        ids = np.arange(start[split], start[split] + n)
        fold = ids % folds if folds and split != "test" else np.full(n, -1)
        items = {
            input_key("x"): ids[:, None].astype(np.float32),
            target_key("y"): ids.astype(np.float32),
            FOLD_KEY: fold.astype(np.int64),
        }
        datasets[split] = ray.data.from_items(
            [{k: v[i] for k, v in items.items()} for i in range(n)], override_num_blocks=max(1, n // 16)
        ).map_batches(_same, batch_format="numpy")  # lazy, as a split read from files is
    both = np.concatenate([np.arange(ROWS["train"]), np.arange(1000, 1000 + ROWS["validation"])])
    fold_rows = tuple(int((both % folds == i).sum()) for i in range(folds))
    meta = {"x": FeatureMeta("x", "number"), "y": FeatureMeta("y", "number")}
    return StreamedData(datasets=datasets, meta=meta, rows=dict(ROWS), folds=folds, fold_rows=fold_rows)


def _read_epochs(feeds, epochs: int, batch_size: int):
    """Each rank's job stream read in its own actor, all at once: per rank, per epoch the ids
    trained, the batch count, and the scored ids."""
    import ray

    from ludwig_hpo.execution.stream_shards import job_stream

    @ray.remote(num_cpus=0)
    def read(feed):
        import torch

        stream = job_stream(feed, feed.probe.meta)
        out = []
        for epoch in range(1, epochs + 1):
            batches = stream.train_epoch(epoch, batch_size, torch.device("cpu"), seed=3, rank=0, shuffle=True)
            ids = [y["y"].tolist() for _, y in batches]
            scored = [y["y"].tolist() for _, y in stream.scorer(torch.device("cpu")).eval_batches(batch_size)]
            out.append((sum(ids, []), len(batches), len(ids), sum(scored, [])))
        return out

    return ray.get([read.remote(f) for f in feeds], timeout=300)


def _kept(streamed: StreamedData) -> StreamedData:
    """``streamed`` with its splits kept in the object store (a store far above their size)."""
    from ludwig_hpo.execution.streaming.cache import cache_if_fits, kept_in_store

    kept, decision = cache_if_fits(streamed, 2**30)
    assert decision.cached and kept_in_store(kept) and not kept_in_store(streamed)
    return kept


@pytest.mark.parametrize("kept", [False, True], ids=["streamed", "kept-in-store"])
def test_every_rank_streams_as_many_batches_and_every_training_row_each_epoch(cluster, kept):
    from ludwig_hpo.execution.stream_shards import rank_feeds

    streamed = _kept(_streamed()) if kept else _streamed()
    feeds = rank_feeds(streamed, Job("search"), 2)
    if kept:  # Ray Data's split of the kept blocks, not a coordinator's pass per epoch
        from ray.data.dataset import MaterializedDataset

        assert all(isinstance(f.train, MaterializedDataset) for f in feeds)
    ranks = _read_epochs(feeds, epochs=2, batch_size=16)
    for epoch in range(2):
        trained = [ranks[r][epoch][0] for r in range(2)]
        counts = {(ranks[r][epoch][1], ranks[r][epoch][2]) for r in range(2)}
        assert counts == {(7, 7)}  # 102 rows a rank (203 + 1 pad): 6 batches of 16 and one of 6
        everything = sorted(trained[0] + trained[1])
        assert len(everything) == 204 and set(everything) == set(range(203))  # one row twice: the pad
        scored = sorted(ranks[0][epoch][3] + ranks[1][epoch][3])
        assert scored == list(range(1000, 1041))  # each validation row once over the ranks
    assert ranks[0][0][0] != ranks[0][1][0]  # another order in the next epoch


@pytest.mark.parametrize("kept", [False, True], ids=["streamed", "kept-in-store"])
def test_a_fold_job_trains_on_the_other_folds_and_scores_its_own(cluster, kept):
    from ludwig_hpo.execution.stream_shards import rank_feeds

    streamed = _kept(_streamed(folds=3)) if kept else _streamed(folds=3)
    feeds = rank_feeds(streamed, Job("fold", fold=1), 2)
    (r0,), (r1,) = _read_epochs(feeds, epochs=1, batch_size=32)
    both = np.concatenate([np.arange(203), np.arange(1000, 1041)])
    assert set(r0[0] + r1[0]) == set(both[both % 3 != 1].tolist())
    assert sorted(r0[3] + r1[3]) == sorted(both[both % 3 == 1].tolist())


def test_a_pipelines_object_store_cap_is_its_data_context_resource_limit(cluster):
    from ludwig_hpo.execution.stream_shards import limit_memory

    ds = _streamed().datasets["train"]
    capped = limit_memory(ds, 64 * 2**20)
    assert capped.context.execution_options.resource_limits.object_store_memory == 64 * 2**20
    assert capped.count() == ROWS["train"]


def test_splits_above_their_share_of_the_object_store_stay_lazy_pipelines(cluster):
    from ludwig_hpo.execution.streaming.cache import CACHE_SHARE, cache_if_fits, kept_in_store, prepared_row_bytes

    streamed = _streamed()
    estimate = prepared_row_bytes(streamed) * streamed.num_rows
    kept, decision = cache_if_fits(streamed, int(estimate / CACHE_SHARE) - 1)  # one byte too small
    assert not decision.cached and kept is streamed and not kept_in_store(kept)
    assert "every epoch streams from the files" in decision.text()


def test_a_warm_rank_keeps_its_scored_shard_for_later_trials_of_the_same_feed():
    from ludwig_hpo.execution.stream_shards import KEPT_FEEDS, RankFeed, _kept_shard

    def feed(key: str) -> RankFeed:
        return RankFeed(None, object(), 2, (1, 2, 1), "validation", None, key)  # type: ignore[arg-type]

    first = _kept_shard(feed("a/0"))
    assert _kept_shard(feed("a/0")) is first  # a later trial of the same group and job
    assert _kept_shard(feed("a/1")) is not first  # another rank's
    assert _kept_shard(feed("")) is not _kept_shard(feed(""))  # a fresh job's feed keeps nothing
    for i in range(KEPT_FEEDS):
        _kept_shard(feed(f"b{i}/0"))
    assert _kept_shard(feed("a/0")) is not first  # let go once newer feeds came
