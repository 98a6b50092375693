"""A small streamed search end to end below the driver: a folder of Parquet files read, split
by a fixed split column and fitted by ``prepare_streamed``, then two 2-rank search trials on a
warm group streaming their shards. The fitted statistics are the in-memory path's on the same
rows, and every rank takes as many batches."""

from __future__ import annotations

import numpy as np
import pytest

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.train.plan import batches_per_epoch

from ..integration.test_stream_pool import _loaded, _sweep, cluster  # noqa: F401 (the module's cluster)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def _files(tmp_path, raw: dict):
    """The tiny sweep's rows with a fixed ``split`` column (70/15/15 by row), as three Parquet
    files in a folder and as one file; (folder sweep mapping, one-file sweep mapping)."""
    df = load_dataframe(SweepConfig.model_validate(raw).dataset.source, None)
    df["split"] = np.random.default_rng(5).choice(3, size=len(df), p=[0.7, 0.15, 0.15])
    folder = tmp_path / "rows"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        df.iloc[part].to_parquet(folder / f"part-{i}.parquet")
    df.to_parquet(tmp_path / "rows.parquet")
    fixed = {"split": {"type": "fixed", "column": "split"}}
    base = {k: v for k, v in raw.items() if k != "dataset"}
    streamed = {**base, "dataset": {"source": str(folder), "streaming": True}, "preprocessing": fixed}
    memory = {**base, "dataset": {"source": str(tmp_path / "rows.parquet"), "streaming": False}, "preprocessing": fixed}
    return streamed, memory


def test_a_streamed_search_fits_as_in_memory_and_feeds_equal_batches_per_rank(cluster, tmp_path):  # noqa: F811
    from ludwig_hpo.execution.streaming.prepare import prepare_streamed

    raw, _ = _loaded()
    streamed_raw, memory_raw = _files(tmp_path, raw)
    streamed = prepare_streamed(SweepConfig.model_validate(streamed_raw), None)
    memory_cfg = SweepConfig.model_validate(memory_raw)
    in_memory = prepare(load_dataframe(memory_cfg.dataset.source, None), memory_cfg)
    assert streamed.rows == {s: len(r) for s, r in in_memory.splits.items()}
    assert streamed.meta.keys() == in_memory.meta.keys()
    for name, meta in in_memory.meta.items():
        got = streamed.meta[name]
        assert (got.type, got.vocab, got.fitted.keys()) == (meta.type, meta.vocab, meta.fitted.keys()), name
        assert got.stats == pytest.approx(meta.stats, rel=1e-9, abs=1e-12), name

    reports, pipelines, _ = _sweep(tmp_path, "pooled", [1e-2, 3e-2], streamed=streamed, raw=streamed_raw)
    per_rank = -(-streamed.rows["train"] // 2)
    for rs in reports.values():
        steps = batches_per_epoch(per_rank, 32)
        assert [r["optimizer_steps"] for r in rs] == [steps, 2 * steps]
        assert all(r["world_size"] == 2 for r in rs)
    assert len(reports) == 2 and pipelines == 1
