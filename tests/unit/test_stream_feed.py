"""A rank's streamed shard as the worker loop's batches (no Ray: shards are lists of chunks)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.train.data import Columns
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.plan import batches_per_epoch
from ludwig_hpo.train.stream_feed import EpochBatches, JobStream, RankStream, rebatch, shuffled

from .trainer_helpers import BATCH, TRAIN_ROWS, config, data, whole_data

CPU = torch.device("cpu")


def _chunks(n: int, sizes: list[int]) -> list[tuple[dict, dict]]:
    """Chunks of rows ``0..n-1`` of the given sizes (cycled): an id column in and out."""
    out, start, i = [], 0, 0
    while start < n:
        stop = min(n, start + sizes[i % len(sizes)])
        ids = np.arange(start, stop)
        out.append(({"x": ids[:, None].astype(np.float32)}, {"y": ids.astype(np.int64)}))
        start, i = stop, i + 1
    return out


def test_chunks_of_any_size_become_batches_of_the_batch_size_in_order():
    got = list(rebatch(_chunks(50, [7, 3, 20]), 16))
    assert [len(y["y"]) for _, y in got] == [16, 16, 16, 2]
    assert np.concatenate([y["y"] for _, y in got]).tolist() == list(range(50))


def test_the_shuffle_buffer_moves_every_row_once_and_depends_on_the_seed():
    def order(seed: int) -> list[int]:
        got = shuffled(_chunks(1000, [64, 9]), np.random.default_rng(seed), 100)
        return np.concatenate([y["y"] for _, y in got]).tolist()

    first = order(1)
    assert sorted(first) == list(range(1000))
    assert first != list(range(1000))
    assert order(1) == first
    assert order(2) != first


def _stream(n: int, sizes: list[int], rank_rows: int | None = None) -> RankStream:
    return RankStream(n, n if rank_rows is None else rank_rows, lambda epoch: _chunks(n, sizes))


def test_an_epoch_has_the_batches_the_plan_counts_and_drops_a_last_batch_of_one_row():
    # 49 rows in batches of 16: 16, 16, 16 and a last one of 1 row, dropped as in memory
    epoch = EpochBatches(_stream(49, [10]), 1, 16, CPU, None, 64, seen := [])
    batches = list(epoch)
    assert len(epoch) == batches_per_epoch(49, 16) == len(batches) == 3
    assert seen == [49]  # the whole shard was read
    x, y = batches[0]
    assert isinstance(x, Columns) and x.table.shape == (16, 1) and y["y"].dtype == torch.int64


def test_a_shard_of_another_length_than_promised_stops_the_epoch():
    epoch = EpochBatches(_stream(40, [10], rank_rows=48), 1, 16, CPU, None, 64, [])
    with pytest.raises(RuntimeError, match="held 40 rows at epoch 1, not the 48"):
        list(epoch)


def _chunked(prepared: PreparedData, rows: np.ndarray, size: int):
    """A split of ``prepared`` as a stream of chunks of ``size`` rows, in row order."""

    def open_shard(epoch: int):
        for start in range(0, len(rows), size):
            r = rows[start : start + size]
            yield (
                {k: v[r] for k, v in prepared.inputs.items()},
                {k: v[r] for k, v in prepared.targets.items()},
            )

    return RankStream(len(rows), len(rows), open_shard)


def _job_stream(prepared: PreparedData, chunk: int = 13) -> JobStream:
    train, validation = prepared.splits["train"], prepared.splits["validation"]
    probe = dataclasses.replace(prepared, splits={"train": train[:32], "validation": validation[:32]})
    return JobStream(
        meta=prepared.meta,
        train=_chunked(prepared, train, chunk),
        scored=_chunked(prepared, validation, chunk),
        scored_split="validation",
        probe=probe,
        shuffle_buffer_rows=32,
    )


def _reports(cfg, source) -> list[dict]:
    reports: list[dict] = []
    train_loop(cfg, source, Job(), lambda metrics, ckpt: reports.append(dict(metrics)))
    return reports


SCORES = ("objective", "train/combined/running_loss", "validation/combined/loss", "optimizer_steps", "batch_size")


def test_a_streamed_run_without_shuffling_trains_and_scores_as_the_in_memory_run():
    cfg = config({"epochs": 2, "should_shuffle": False})
    prepared = data()
    memory = _reports(cfg, prepared)
    streamed = _reports(cfg, _job_stream(prepared))
    assert [r["optimizer_steps"] for r in streamed] == [TRAIN_ROWS // BATCH, 2 * TRAIN_ROWS // BATCH]
    for m, s in zip(memory, streamed, strict=True):
        for key in SCORES:
            assert s[key] == pytest.approx(m[key], rel=1e-6, abs=1e-7), key


def test_a_shuffled_streamed_run_is_the_same_every_time_and_reads_every_row_each_epoch():
    cfg = config({"epochs": 2})
    first_stream = _job_stream(data())
    first = _reports(cfg, first_stream)
    again = _reports(cfg, _job_stream(data()))
    assert [r["objective"] for r in first] == [r["objective"] for r in again]
    assert first_stream.seen == [TRAIN_ROWS, TRAIN_ROWS]
    unshuffled = _reports(config({"epochs": 2, "should_shuffle": False}), _job_stream(data()))
    assert first[-1]["train/combined/running_loss"] != unshuffled[-1]["train/combined/running_loss"]


def test_the_batch_size_cap_counts_the_whole_streamed_split_not_the_probe():
    cfg = config({"epochs": 1, "batch_size": 64})
    (report,) = _reports(cfg, _job_stream(data()))
    assert report["batch_size"] == 64  # the probe holds 32 training rows; the split 96


def test_batch_size_auto_searches_on_the_probe_sample_sized_by_the_whole_split_and_is_cached():
    """``batch_size: auto`` on a stream: the search steps run on the in-memory probe sample (32
    training rows), but its sizes are capped by the whole streamed split (399 rows: at least 20
    steps an epoch, so 19 at most; the sample alone would allow 1); the run then streams every
    row each epoch at the size chosen, and a second trial of the same model shape takes that
    size from the sweep's cache without searching."""
    from ludwig_hpo.train.batch_size import MemoryCache

    cfg, whole, cache = config({"epochs": 2, "batch_size": "auto"}), whole_data(), MemoryCache()
    train_rows = len(whole.splits["train"])
    assert train_rows == 399
    runs = []
    for _ in range(2):
        stream, reports = _job_stream(whole), []
        train_loop(cfg, stream, Job(), lambda metrics, ckpt, out=reports: out.append(dict(metrics)), cache=cache)
        runs.append((stream, reports))
    (stream, (first, second)), (again_stream, (again, _)) = runs
    tried = [int(step.split(":")[0]) for step in first["batch_size_tried"].split(";")]
    assert tried[0] == 8 and set(tried) <= {8, 16, 19}
    assert first["batch_size_source"] == "probe" and first["batch_size"] in tried
    size = first["batch_size"]
    assert stream.seen == [train_rows, train_rows]
    assert second["optimizer_steps"] == 2 * batches_per_epoch(train_rows, size)
    assert (again["batch_size_cache_hit"], again["batch_size"]) == (1, size) and "batch_size_tried" not in again
    assert again_stream.seen == [train_rows, train_rows]


def test_a_streamed_run_continued_from_its_checkpoint_equals_the_uninterrupted_run(tmp_path):
    import math
    import shutil

    cfg = config({"epochs": 3})
    whole, saved = [], {}

    def keep(metrics, ckpt):
        whole.append(dict(metrics))
        if ckpt is not None:
            saved[metrics["epoch"]] = shutil.copytree(ckpt, tmp_path / f"epoch_{metrics['epoch']}")

    train_loop(cfg, _job_stream(data()), Job(checkpoint_budget=math.inf), keep)
    rest = _reports_of(cfg, _job_stream(data()), Job(resume_from=str(saved[1])))
    assert [r["epoch"] for r in rest] == [2, 3]
    for a, b in zip(whole[1:], rest, strict=True):
        for key in SCORES:
            assert b[key] == pytest.approx(a[key], rel=1e-6, abs=1e-7), key


def _reports_of(cfg, source, job: Job) -> list[dict]:
    reports: list[dict] = []
    train_loop(cfg, source, job, lambda metrics, ckpt: reports.append(dict(metrics)))
    return reports
