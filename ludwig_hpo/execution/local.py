"""One trial on this machine without Ray: the worker entry on N ``torch.multiprocessing`` processes.

:func:`run_local` starts ``workers`` spawned processes, each joining a ``torch.distributed``
process group on a loopback address (NCCL on CUDA, one GPU per rank; gloo on CPU) and
running :func:`~ludwig_hpo.execution.worker.run_worker`, exactly as a sweep's ranks do; their
per-epoch reports come back through a queue. One worker runs in the calling process.

``python -m ludwig_hpo.execution.local SWEEP.yaml --workers 2 [--device cuda] [--epochs N]``
trains the sweep file's own values once and prints rank 0's objective per epoch: a way to
debug one trial (data, model, DDP, batch-size search) without a cluster, tracking or search.
Imports no Ray.
"""

from __future__ import annotations

import argparse
import os
import queue
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, NoReturn

import torch

from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.errors import ResourceError, TrialError, UserError, one_line_error
from ludwig_hpo.execution.spec import TrialSpec

DeviceType = Literal["cpu", "cuda"]
#: Timeout of the ranks' collectives (a rank that died ends the others' wait this late at most).
COLLECTIVE_TIMEOUT_S = 600.0
#: How often the caller looks for reports and ended ranks (seconds).
POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class LocalRun:
    """What the ranks of one local trial reported.

    Attributes:
        reports: per rank (index = rank), its per-epoch reports in epoch order (the same
            metrics on every rank, except rank 0's ``checkpoint_*`` keys).
        wall_s: seconds from the start of the processes to the end of the last one.
    """

    reports: tuple[tuple[dict[str, Any], ...], ...]
    wall_s: float


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def end_spawned_rank() -> NoReturn:
    """End this spawned rank's process with exit code 0, skipping the interpreter's teardown.

    Runs on a rank started with ``torch.multiprocessing``'s ``spawn``, as the last call of its
    entry function once its work succeeded and its results are written: files closed, a
    ``multiprocessing`` queue closed and its feeder thread joined (``close()`` then
    ``join_thread()``). A model sharded with FSDP2 keeps its process group alive past
    ``destroy_process_group`` (DTensor's sharding caches hold the device mesh), and the
    teardown that then destroys the group races the group's gloo threads: the process can
    abort (SIGABRT, "terminate called without an active exception") after its work is done.
    A rank that raised still ends through the teardown, so its traceback reaches the caller.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _device(device_type: DeviceType, rank: int) -> torch.device:
    return torch.device("cuda", rank) if device_type == "cuda" else torch.device("cpu")


def _rank_main(
    rank: int,
    world: int,
    port: int,
    device_type: DeviceType,
    spec: TrialSpec,
    data: PreparedData,
    reports: Any,
) -> None:
    """One spawned rank: join the process group, run the worker entry, send each epoch's
    report as ``(rank, metrics)`` to the ``reports`` queue, and end the process once they are
    all in the queue's pipe."""
    import torch.distributed as dist

    from ludwig_hpo.execution.worker import run_worker

    device = _device(device_type, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )

    def report(metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        # A checkpoint folder is rewritten by the next write; a local run keeps none.
        reports.put((rank, dict(metrics)))

    try:
        run_worker(spec, data, device, report, local_world_size=world)
    finally:
        dist.destroy_process_group()
    reports.close()
    reports.join_thread()
    end_spawned_rank()


def run_local(
    spec: TrialSpec,
    data: PreparedData,
    *,
    workers: int = 1,
    device: DeviceType = "cpu",
    on_report: Callable[[dict[str, Any]], None] | None = None,
) -> LocalRun:
    """Train ``spec`` on ``workers`` local ranks and return every rank's reports.

    Runs in the calling process, which waits for the ranks. With ``workers > 1`` the ranks
    are new processes (``spawn``: no state of the caller is inherited) and ``data`` is pickled
    to each; with one worker it trains in the calling process, without a process group.

    Args:
        spec: the trial (its ``batch_cache`` should be None: there is no cache actor).
        data: the prepared data of ``spec``'s sweep.
        workers: ranks (world size).
        device: ``cuda`` puts rank ``i`` on GPU ``i`` (NCCL), ``cpu`` uses gloo.
        on_report: called in the calling process with each of rank 0's reports as it arrives.

    Raises:
        ValueError: ``workers < 1``.
        ResourceError: more CUDA ranks than GPUs.
        TrialError: a spawned rank raised or died (one line; the rank's traceback follows as
            cause). One worker in the calling process raises the loop's own errors.
    """
    if workers < 1:
        raise ValueError(f"workers >= 1 must hold, but got workers={workers}")
    if device == "cuda" and workers > torch.cuda.device_count():
        raise ResourceError(
            f"one GPU per CUDA rank must be available, but got {workers} rank(s) and "
            f"{torch.cuda.device_count()} GPU(s)",
            key="--workers",
            fix="run as many ranks as there are GPUs, or on cpu",
        )
    t0 = time.perf_counter()
    if workers == 1:
        from ludwig_hpo.execution.worker import run_worker

        alone: list[dict[str, Any]] = []

        def report(metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
            alone.append(dict(metrics))
            if on_report is not None:
                on_report(alone[-1])

        run_worker(spec, data, _device(device, 0), report)
        return LocalRun((tuple(alone),), time.perf_counter() - t0)
    return _run_spawned(spec, data, workers, device, on_report, t0)


def _run_spawned(
    spec: TrialSpec,
    data: PreparedData,
    workers: int,
    device: DeviceType,
    on_report: Callable[[dict[str, Any]], None] | None,
    t0: float,
) -> LocalRun:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    inbox = ctx.Queue()
    got: list[list[dict[str, Any]]] = [[] for _ in range(workers)]

    def drain() -> None:
        while True:
            try:
                rank, metrics = inbox.get_nowait()
            except queue.Empty:
                return
            got[rank].append(metrics)
            if rank == 0 and on_report is not None:
                on_report(metrics)

    procs = mp.start_processes(
        _rank_main,
        args=(workers, _free_loopback_port(), device, spec, data, inbox),
        nprocs=workers,
        join=False,
        start_method="spawn",
    )
    try:
        # The ranks' queue writes must be read while they run: a rank exits only once its
        # queued reports are in the pipe, which holds little.
        while not procs.join(timeout=POLL_INTERVAL_S):
            drain()
    except mp.ProcessRaisedException as e:
        raise TrialError(one_line_error(str(e))) from e
    except mp.ProcessExitedException as e:
        raise TrialError(f"WorkerDiedError: local rank {e.error_index} exited with code {e.exit_code}") from e
    finally:
        for p in procs.processes:  # interrupted, or one rank failed: end the rest
            if p.is_alive():
                p.terminate()
        drain()
        inbox.close()
    return LocalRun(tuple(tuple(r) for r in got), time.perf_counter() - t0)


def _workers(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m ludwig_hpo.execution.local",
        description="Train one trial of a sweep file's own values on local processes, without Ray, "
        "and print rank 0's objective per epoch.",
    )
    ap.add_argument("sweep", help="the sweep YAML file")
    ap.add_argument("--workers", type=_workers, default=None, help="DDP ranks (default: backend.num_workers)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: one GPU per rank, NCCL")
    ap.add_argument("--epochs", type=_workers, default=None, help="override trainer.epochs")
    ap.add_argument("--dataset", default=None, help="a CSV / Parquet file that replaces dataset.source")
    return ap.parse_args(argv)


def _show(m: dict[str, Any]) -> None:
    from ludwig_hpo.train.report_keys import OBJECTIVE, RUNNING_LOSS, TIME_ATTR

    print(
        f"epoch {m[TIME_ATTR]}: objective {m[OBJECTIVE]:.6g}  train loss {m[RUNNING_LOSS]:.6g}  "
        f"batch size {m['batch_size']} x {m['world_size']}",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The ``python -m ludwig_hpo.execution.local`` entry; returns the exit code: 0; 2 for a
    mistake in the file, data or resources (one line on stderr); 1 for a failed trial (its
    traceback, then one line)."""
    from ludwig_hpo.config.loader import load_sweep
    from ludwig_hpo.data import dataset_folder, load_dataframe, prepare

    args = _parse(argv)
    try:
        loaded = load_sweep(args.sweep, args.dataset, search=False)  # a model config trains too
        raw = loaded.raw
        if args.epochs is not None:
            raw = {**raw, "trainer": {**(raw.get("trainer") or {}), "epochs": args.epochs}}
        cfg = loaded.config
        workers = args.workers if args.workers is not None else cfg.backend.num_workers
        source = cfg.dataset.source
        data = prepare(load_dataframe(source, loaded.base_dir), cfg, dataset_folder(source, loaded.base_dir))
        print(
            f"{loaded.path}: {data.num_rows} rows, {workers} worker(s) on {args.device}, metric {cfg.hyperopt.metric}"
        )
        run = run_local(TrialSpec(raw=raw), data, workers=workers, device=args.device, on_report=_show)
    except UserError as e:
        print(f"error: {e.one_line()}", file=sys.stderr)
        return 2
    except Exception as e:  # the trial's own failure: a debugging run shows all of it
        traceback.print_exc()
        print(f"trial failed: {one_line_error(f'{type(e).__name__}: {e}')}", file=sys.stderr)
        return 1
    print(f"{len(run.reports[0])} epoch(s) in {run.wall_s:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
