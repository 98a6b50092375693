"""Streamed trials on the sweep's executors: 2-rank trials on a warm group (successive trials
reuse the group's split pipeline) and a fresh Ray Train job (``get_dataset_shard``), on the
tiny breast-cancer rows served by Ray Data. One local cluster for the module."""

from __future__ import annotations

import numpy as np
import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.data.streaming.record import FOLD_KEY, StreamedData, input_key, target_key
from ludwig_hpo.execution.pool import WorkerPools
from ludwig_hpo.execution.resources import plan_resources
from ludwig_hpo.train.plan import batches_per_epoch

from ..conftest import SWEEPS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster():
    from ludwig_hpo.execution.cluster import local_cluster

    # two CPUs for the ranks, two for Ray Data's read and map tasks
    with local_cluster(num_cpus=4, num_gpus=0, trial_slots=1):
        yield


def _loaded():
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    raw = {**loaded.raw, "trainer": {**loaded.raw["trainer"], "batch_size": 32, "epochs": 2}}
    raw = {**raw, "backend": {**raw["backend"], "num_workers": 2}}
    from ludwig_hpo.config.schema import SweepConfig

    cfg = SweepConfig.model_validate(raw)
    return raw, prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)


def _streamed(prepared, folds: int = 0) -> StreamedData:
    """The prepared rows of each split as a lazy Ray dataset of 4 blocks, in the streamed
    batch format (:mod:`ludwig_hpo.data.streaming.record`); with ``folds``, the train and
    validation rows in that many k-fold folds (a row's fold: its position modulo ``folds``)."""
    import ray.data

    arrays = {input_key(k): v for k, v in prepared.inputs.items()} | {
        target_key(k): v for k, v in prepared.targets.items()
    }

    def rows_of(split: str, split_rows: np.ndarray):
        def lookup(batch: dict) -> dict:
            idx = split_rows[batch["id"]]
            fold = batch["id"] % folds if folds and split != "test" else np.full(len(idx), -1)
            return {**{k: v[idx] for k, v in arrays.items()}, FOLD_KEY: fold}

        return ray.data.range(len(split_rows), override_num_blocks=4).map_batches(lookup, batch_format="numpy")

    both = [len(prepared.splits[s]) for s in ("train", "validation")]
    return StreamedData(
        datasets={s: rows_of(s, r) for s, r in prepared.splits.items()},
        meta=prepared.meta,
        rows={s: len(r) for s, r in prepared.splits.items()},
        folds=folds,
        fold_rows=tuple(sum(len(range(f, n, folds)) for n in both) for f in range(folds)),
    )


class CountingPools(WorkerPools):
    """The pools actor, telling how many split pipelines its groups hold."""

    async def pipelines(self) -> int:
        return len(self.feeds._feeds)


def _sweep(tmp_path, executor: str, learning_rates: list[float], streamed=None, raw=None):
    """One streamed 2-rank trial per learning rate, one at a time, on ``streamed`` and ``raw``
    (default: the tiny rows served by Ray Data); (per trial id its reports, the pools actor's
    pipeline count or None, the in-memory prepared rows)."""
    import ray
    from ray import tune

    from ludwig_hpo.execution.trainable import TrialContext, search_trial, trial_resources

    loaded_raw, prepared = _loaded()
    raw = raw or loaded_raw
    plan = plan_resources(
        num_workers=2, use_gpu=False, cpus_per_worker=1.0, cluster_cpus=2, cluster_gpus=0, max_concurrent=1
    )
    data = [streamed or _streamed(prepared)]
    pools = None
    if executor == "pooled":
        pools = ray.remote(CountingPools).options(num_cpus=0, max_concurrency=1000).remote(1, 2, 1.0, False, data)
    ctx = TrialContext(
        raw=raw,
        data=data,
        storage_path=str(tmp_path / "train"),
        num_workers=2,
        use_gpu=False,
        cpus_per_worker=1.0,
        mode="max",
        pools=pools,
    )
    reports: dict[str, list[dict]] = {}

    class Keep(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            reports.setdefault(trial.trial_id, []).append(dict(result))

    try:
        tune.Tuner(
            tune.with_resources(tune.with_parameters(search_trial, ctx=ctx), trial_resources(plan, executor)),
            param_space={"trainer.learning_rate": tune.grid_search(learning_rates)},
            tune_config=tune.TuneConfig(max_concurrent_trials=1, reuse_actors=pools is not None),
            run_config=tune.RunConfig(
                name="s",
                storage_path=str(tmp_path / "ray"),
                verbose=0,
                callbacks=[Keep()],
                failure_config=tune.FailureConfig(max_failures=0),
            ),
        ).fit()
        pipelines = None
        if pools is not None:
            assert ray.get(pools.idle.remote(60.0))
            pipelines = ray.get(pools.pipelines.remote())
    finally:
        if pools is not None:
            ray.get(pools.shutdown.remote())
            ray.kill(pools)
    return reports, pipelines, prepared


def _check_trial(rs: list[dict], prepared) -> None:
    per_rank = -(-len(prepared.splits["train"]) // 2)  # padded to a multiple of the 2 ranks
    steps = batches_per_epoch(per_rank, 32)
    assert [r["epoch"] for r in rs] == [1, 2]
    assert [r["optimizer_steps"] for r in rs] == [steps, 2 * steps]  # every rank took as many
    assert all(r["world_size"] == 2 and r["batch_size"] == 32 for r in rs)
    assert all(np.isfinite(r["validation/malignant/loss"]) for r in rs)


def test_successive_pooled_trials_stream_equal_shards_through_one_pipeline(cluster, tmp_path):
    reports, pipelines, prepared = _sweep(tmp_path, "pooled", [1e-2, 3e-2])
    assert len(reports) == 2
    for rs in reports.values():
        _check_trial(rs, prepared)
    assert pipelines == 1  # the second trial reused the first one's split pipeline


def test_a_fresh_trial_streams_its_shards_through_ray_train(cluster, tmp_path):
    reports, _, prepared = _sweep(tmp_path, "fresh", [1e-2])
    (rs,) = reports.values()
    _check_trial(rs, prepared)


def test_warm_groups_that_reserve_every_cpu_refuse_to_stream_instead_of_waiting_forever(cluster):
    import asyncio

    from ludwig_hpo.errors import ResourceError
    from ludwig_hpo.execution.pool_stream import GroupFeeds
    from ludwig_hpo.train.job import Job

    _, prepared = _loaded()
    feeds = GroupFeeds([_streamed(prepared)], 2, reserved_cpus=4.0)  # the cluster's 4 CPUs
    with pytest.raises(ResourceError, match="needs a CPU beside its ranks'.*reserve 4 of the cluster's 4"):
        asyncio.run(feeds.for_run(0, 1, Job("search")))


def test_a_group_keeps_the_pipelines_of_its_most_recently_run_jobs_only(cluster, monkeypatch):
    import asyncio

    from ludwig_hpo.execution import stream_shards
    from ludwig_hpo.execution.pool_stream import GroupFeeds
    from ludwig_hpo.train.job import Job

    monkeypatch.setattr(stream_shards, "KEPT_FEEDS", 2)
    _, prepared = _loaded()
    feeds = GroupFeeds([_streamed(prepared, folds=2)], 2, reserved_cpus=2.0)

    def keys(run: list) -> list[str]:
        return [f.key for f in run]

    async def runs() -> dict[str, list[str]]:
        out = {"other": keys(await feeds.for_run(1, 1, Job("search")))}  # another group's
        for name, job in [
            ("search", Job("search")),
            ("test", Job("test")),
            ("search again", Job("search")),  # now the most recently run of group 0
            ("fold", Job("fold", fold=0)),  # lets the test job's go, the least recently run
            ("search last", Job("search")),
            ("test last", Job("test")),
        ]:
            out[name] = keys(await feeds.for_run(0, 1, job))
        out["other last"] = keys(await feeds.for_run(1, 1, Job("search")))
        return out

    got = asyncio.run(runs())
    assert got["search again"] == got["search"] and got["search last"] == got["search"]
    assert set(got["test last"]).isdisjoint(got["test"])  # built anew
    assert set(got["fold"]).isdisjoint(got["search"] + got["test"])
    assert got["other last"] == got["other"]  # group 1's pipeline untouched by group 0's
    assert len([k for k in feeds._feeds if k[0] == 0]) == 2
