"""Data larger than the object store: the same search streamed at 1x, 4x and 16x a base size.

Writes synthetic Parquet folders (``--columns`` standard-normal number columns, a binary target
of a noisy linear rule, a fixed ``split`` column 80/10/10 and a row id ``rid``) of 1x, 4x and
16x ``--base-rows`` rows, and a single file of the 1x rows. Each measured run is a child process
of its own: a private Ray cluster capped at ``--object-store-mb`` of object store (16x must
exceed it: the streamed rows never sit in the store whole) with two CPUs for Ray Data beside
the ranks' two, the data prepared (streamed: ``prepare_streamed``'s one fit pass and lazy
pipelines; in memory: pandas and ``prepare``, as a sweep of one file does), then ``--trials``
search trials of the tabular MLP in a row (2-rank DDP on one warm worker group, the sweep's
``pooled`` executor through Ray Tune; no MLflow store or report). The parent samples the child's
whole process tree (PSS, as ``bench/footprint.py`` does) and keeps its peak.

Per streamed size a second pass counts the rows each rank's shard fed to the loop in one
epoch (2 ranks, the same split pipeline and feed, with ``rid`` as an unnormalized input): every
training row must come exactly once, plus the pad rows that even the ranks' shards.

Last line: ``pss_1x_gb=<x> pss_4x_gb=<y> pss_16x_gb=<z> pss_growth_16x=<r> stream_ratio=<s>
rows_seen_once=<1|0>``; goals ``pss_growth_16x`` <= 1.5 (peak PSS at 16x over 1x),
``stream_ratio`` >= 0.8 (streamed over in-memory samples/s at 1x, the median over every epoch
of every trial: a trial's first epoch carries its pipeline's and the loop's warm-up, so a few
epochs per trial measure the rate a sweep trains at).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from footprint import Sampler

from _results import BenchRun, Figure, parser

#: Rows per Parquet file (a folder of 1x holds ``base_rows / FILE_ROWS`` files, at least one).
FILE_ROWS = 100_000
#: Upper bound of one measured run; a hung run is killed and the bench fails.
RUN_TIMEOUT_S = 3600
#: Logical CPUs of each run's cluster: 2 for the ranks, 2 for Ray Data's read and map tasks.
CLUSTER_CPUS = 4


def write_data(folder: Path, rows: int, columns: int, seed: int) -> None:
    """``rows`` synthetic rows in files of :data:`FILE_ROWS` under ``folder``; rows ``[a, b)``
    are the same whatever the total (each file is seeded by its first row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    weights = np.random.default_rng(seed).normal(size=columns)
    for start in range(0, rows, FILE_ROWS):
        n = min(FILE_ROWS, rows - start)
        rng = np.random.default_rng((seed, start))
        x = rng.normal(size=(n, columns)).astype(np.float32)
        y = (x @ weights + rng.normal(scale=0.5, size=n)) > 0
        table = {f"x{i}": x[:, i] for i in range(columns)}
        table |= {"y": y, "split": rng.choice(3, size=n, p=[0.8, 0.1, 0.1]), "rid": np.arange(start, start + n)}
        pq.write_table(pa.table(table), folder / f"part-{start // FILE_ROWS:05d}.parquet")


def sweep_mapping(source: str, columns: int, streaming: bool, epochs: int, batch_size: int) -> dict[str, Any]:
    """The search's sweep file as a mapping: the tabular MLP on ``source``."""
    return {
        "name": "data-scale",
        "dataset": {"source": source, "streaming": streaming},
        "preprocessing": {"split": {"type": "fixed", "column": "split"}},
        "input_features": [{"name": f"x{i}", "type": "number"} for i in range(columns)],
        "output_features": [{"name": "y", "type": "binary"}],
        "combiner": {"type": "concat", "num_fc_layers": 2, "output_size": 32},
        "trainer": {
            "epochs": epochs,
            "batch_size": batch_size,
            "learning_rate": 1e-3,
            "early_stop": -1,
            "learning_rate_scaling": "constant",
        },
        "backend": {"num_workers": 2},
        "hyperopt": {
            "goal": "maximize",
            "metric": "roc_auc",
            "output_feature": "y",
            "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}},
        },
    }


def child(args: Any) -> None:
    """One measured run (in its own process): prepare, search, and for a streamed run count
    the rows fed; prints one JSON line."""
    import ray
    from ray import tune

    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.execution.cluster import RAY_ENV
    from ludwig_hpo.execution.pool import WorkerPools
    from ludwig_hpo.execution.resources import plan_resources
    from ludwig_hpo.execution.trainable import TrialContext, search_trial, trial_resources

    os.environ.update({k: v for k, v in RAY_ENV.items() if k not in os.environ})
    temp = tempfile.mkdtemp(prefix="hpo-ds-")
    ray.init(
        num_cpus=CLUSTER_CPUS,
        resources={"trial_slot": 1},
        object_store_memory=args.object_store_mb * 2**20,
        include_dashboard=False,
        _temp_dir=temp,
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        raw = sweep_mapping(args.source, args.columns, args.mode == "stream", args.epochs, args.batch_size)
        cfg = SweepConfig.model_validate(raw)
        t0 = time.perf_counter()
        if args.mode == "stream":
            from ludwig_hpo.execution.streaming.cache import cache_if_fits
            from ludwig_hpo.execution.streaming.prepare import prepare_streamed

            streamed, cache = cache_if_fits(prepare_streamed(cfg, None), args.object_store_mb * 2**20)
            data: list[Any] = [streamed]
            train_rows = streamed.rows["train"]
        else:
            from ludwig_hpo.data import load_dataframe, prepare

            prepared = prepare(load_dataframe(cfg.dataset.source, None), cfg)
            train_rows = len(prepared.splits["train"])
            data = [ray.put(prepared)]
            del prepared
        prepare_s = time.perf_counter() - t0
        plan = plan_resources(num_workers=2, use_gpu=False, cpus_per_worker=1.0, cluster_cpus=2, max_concurrent=1)
        pools = ray.remote(WorkerPools).options(num_cpus=0, max_concurrency=1000).remote(1, 2, 1.0, False, data)
        ctx = TrialContext(
            raw=raw,
            data=data,
            storage_path=str(Path(temp) / "train"),
            num_workers=2,
            use_gpu=False,
            cpus_per_worker=1.0,
            mode="max",
            pools=pools,
        )
        rates: list[float] = np.geomspace(1e-4, 1e-2, args.trials).tolist()
        speeds: list[float] = []

        class Keep(tune.Callback):
            def on_trial_result(self, iteration, trials, trial, result, **info):
                speeds.append(float(result["samples_per_s"]))

        t1 = time.perf_counter()
        tune.Tuner(
            tune.with_resources(tune.with_parameters(search_trial, ctx=ctx), trial_resources(plan, "pooled")),
            param_space={"trainer.learning_rate": tune.grid_search(rates)},
            tune_config=tune.TuneConfig(max_concurrent_trials=1, reuse_actors=True),
            run_config=tune.RunConfig(name="ds", storage_path=str(Path(temp) / "ray"), verbose=0, callbacks=[Keep()]),
        ).fit()
        search_s = time.perf_counter() - t1
        ray.get(pools.shutdown.remote())
        ray.kill(pools)
        out: dict[str, Any] = {
            "train_rows": train_rows,
            "prepare_s": prepare_s,
            "search_s": search_s,
            "samples_per_s": statistics.median(speeds) if speeds else float("nan"),
            "epochs_reported": len(speeds),
            "samples_per_s_by_epoch": [round(s) for s in speeds],
        }
        if args.mode == "stream":
            out["kept_in_object_store"] = cache.cached
        if args.mode == "stream":
            out.update(count_rows(args, raw))
        print("RESULT " + json.dumps(out), flush=True)
    finally:
        ray.shutdown()


def count_rows(args: Any, raw: dict[str, Any]) -> dict[str, Any]:
    """One epoch of both ranks' shards, as the loop reads them, with ``rid`` as an input:
    how often each training row came, and the pad rows (every row once, the pad rows twice)."""
    import ray

    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.execution.stream_shards import job_stream, rank_feeds
    from ludwig_hpo.execution.streaming.prepare import prepare_streamed
    from ludwig_hpo.train.job import Job

    counting = {
        **raw,
        "input_features": [
            *raw["input_features"],
            {"name": "rid", "type": "number", "preprocessing": {"normalization": None}},
        ],
    }
    cfg = SweepConfig.model_validate(counting)
    streamed = prepare_streamed(cfg, None)
    feeds = rank_feeds(streamed, Job("search"), 2)

    # a batch size whose last batch of a shard is not one row (which the loop drops, as in memory)
    batch = args.batch_size + (feeds[0].counts[1] // 2 % args.batch_size == 1)

    @ray.remote(num_cpus=0)
    def read(feed: Any, batch_size: int) -> np.ndarray:
        import torch

        stream = job_stream(feed, feed.probe.meta)
        epoch = stream.train_epoch(1, batch_size, torch.device("cpu"), seed=0, rank=0, shuffle=True)
        return np.concatenate([x["rid"].numpy().ravel() for x, _ in epoch]).astype(np.int64)

    ids = np.concatenate(ray.get([read.remote(f, batch) for f in feeds]))
    counts = np.unique(ids, return_counts=True)[1]
    n, padded = streamed.rows["train"], feeds[0].counts[1]
    return {
        "seen_rows": int(len(ids)),
        "distinct_rows": int(len(counts)),
        "train_rows_counted": n,
        "pad_rows": padded - n,
        "max_times_seen": int(counts.max()) if len(counts) else 0,
        "seen_once": bool(len(ids) == padded and len(counts) == n and int((counts > 1).sum()) == padded - n),
    }


def measure(args: Any, source: Path, mode: str) -> dict[str, Any]:
    """One child run of ``mode`` on ``source``, its process tree sampled; its figures."""
    argv = [sys.executable, __file__, "--child", "--mode", mode, "--source", str(source)]
    argv += ["--columns", str(args.columns), "--trials", str(args.trials), "--epochs", str(args.epochs)]
    argv += ["--batch-size", str(args.batch_size), "--object-store-mb", str(args.object_store_mb)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = Sampler(proc.pid)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        sampler.stop()
        if proc.poll() is None:
            proc.kill()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the {mode} run on {source.name} failed:\n{err[-4000:]}")
    top = [
        {"role": name, "pss_mb": round(mem.pss / 2**20, 1), "torch": pid in sampler.torch_at_peak}
        for name, pid, mem in sampler.at_peak[:10]
    ]
    return {
        **json.loads(lines[-1].removeprefix("RESULT ")),
        "peak_pss_gb": sampler.peak_pss / 2**30,
        "processes_at_peak": sampler.peak_processes,
        "top_by_pss_at_peak": top,
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--base-rows", type=int, default=1_000_000)
    ap.add_argument("--columns", type=int, default=16)
    ap.add_argument("--scales", default="1,4,16")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--object-store-mb", type=int, default=1024)
    ap.add_argument("--work", type=Path, default=None, help="folder for the data (default: a temp folder)")
    ap.add_argument("--child", action="store_true", help=argparse_hidden())
    ap.add_argument("--mode", default="stream", help=argparse_hidden())
    ap.add_argument("--source", default="", help=argparse_hidden())
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    run = BenchRun("data_scale", args)
    scales = [int(s) for s in args.scales.split(",")]
    with tempfile.TemporaryDirectory(prefix="hpo-data-scale-") as tmp:
        work = args.work or Path(tmp)
        details: dict[str, Any] = {}
        for scale in scales:
            folder = work / f"{scale}x"
            if not folder.exists():
                write_data(folder, args.base_rows * scale, args.columns, seed=7)
            mb = sum(p.stat().st_size for p in folder.glob("*.parquet")) / 2**20
            details[f"stream_{scale}x"] = {**measure(args, folder, "stream"), "parquet_mb": round(mb, 1)}
            f = details[f"stream_{scale}x"]
            print(
                f"streamed {scale}x: {f['train_rows']} training rows, {mb:.0f} MB of Parquet, peak PSS "
                f"{f['peak_pss_gb']:.2f} GB, {f['samples_per_s']:.0f} samples/s, rows seen once: {f['seen_once']}",
                flush=True,
            )
        one = work / f"{scales[0]}x.parquet"  # the first scale's rows, named so a later --scales reads its own
        if not one.exists():
            import pyarrow.parquet as pq

            pq.write_table(pq.read_table(work / f"{scales[0]}x"), one)
        details["memory_1x"] = measure(args, one, "memory")
        m = details["memory_1x"]
        print(f"in memory 1x: peak PSS {m['peak_pss_gb']:.2f} GB, {m['samples_per_s']:.0f} samples/s", flush=True)
    first, last = details[f"stream_{scales[0]}x"], details[f"stream_{scales[-1]}x"]
    figures = {f"pss_{s}x_gb": Figure(details[f"stream_{s}x"]["peak_pss_gb"], ".2f") for s in scales}
    figures["pss_growth_16x"] = Figure(last["peak_pss_gb"] / first["peak_pss_gb"], ".2f")
    figures["stream_ratio"] = Figure(first["samples_per_s"] / m["samples_per_s"], ".2f")
    figures["rows_seen_once"] = Figure(int(all(details[f"stream_{s}x"]["seen_once"] for s in scales)), "d")
    run.finish(figures, details=details)


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
