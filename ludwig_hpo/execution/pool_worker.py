"""One rank of a warm DDP worker group (the ``pooled`` executor): the :class:`PoolWorker` actor.

A group of these is started once per trial slot by
:class:`~ludwig_hpo.execution.pool.WorkerPools`; each joins the group's
``torch.distributed`` process group once and then runs successive trials through
:func:`~ludwig_hpo.execution.worker.run_worker`, sending rank 0's per-epoch metrics to the
pools actor.
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ludwig_hpo.execution.spec import TrialSpec
from ludwig_hpo.train.report_keys import PENDING_CHECKPOINT_DIR

if TYPE_CHECKING:  # the pools actor imports this module for the class alone, without pandas
    from ludwig_hpo.data.preprocess import PreparedData
    from ludwig_hpo.data.streaming.record import StreamedData

#: Timeout of the groups' collectives; a peer that died is normally noticed much sooner.
COLLECTIVE_TIMEOUT_S = 600.0

#: Name prefix of the checkpoint folders rank 0 moves beside a trial's checkpoints until its
#: trial actor hands them to Tune (a stale one is left by an interrupted run).
PENDING_PREFIX = "pending_"

#: How a rank's run of one trial ended: trained every epoch, or left at an epoch boundary
#: because the trial was stopped.
RunOutcome = Literal["finished", "stopped"]


class Stopped(Exception):
    """Raised inside the worker loop at an epoch boundary when the trial was stopped."""


def _open_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        port: int = s.getsockname()[1]
        return port


class PoolWorker:
    """One rank of a warm group. Runs as a Ray actor (in its own process, for the sweep).

    Args:
        data: the sweep's :class:`~ludwig_hpo.data.PreparedData` (resolved from the object
            store once, when the actor starts); for a streamed dataset its ``StreamedData``
            (each trial then streams the shard :meth:`run` is handed).
        use_gpu: train on this actor's GPU (Ray sets ``CUDA_VISIBLE_DEVICES`` to it).
    """

    def __init__(self, data: PreparedData | StreamedData, use_gpu: bool) -> None:
        import torch

        from ludwig_hpo.execution.worker_loss import remember_rank

        remember_rank()  # what a diagnosis of this process's death compares against
        self.data = data
        self.device = torch.device("cuda", 0) if use_gpu else torch.device("cpu")
        if use_gpu:
            torch.cuda.set_device(self.device)
        self.rank, self.world, self.local_world = 0, 1, 1

    def address(self) -> tuple[str, str, int, int]:
        """(node id, node IP, a free TCP port on it, pid): where rank 0 hosts the rendezvous."""
        import ray

        return (ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), _open_port(), os.getpid())

    def setup(self, rank: int, world: int, master: str, port: int, local_world: int) -> None:
        """Join the group's process group (gloo on CPU, NCCL on GPU) and pay the first DDP
        wrap's one-time cost now instead of in the first trial. Called on every rank at once."""
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.rank, self.world, self.local_world = rank, world, local_world
        if world > 1:
            dist.init_process_group(
                "nccl" if self.device.type == "cuda" else "gloo",
                init_method=f"tcp://{master}:{port}",
                rank=rank,
                world_size=world,
                timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S),
            )
            DDP(
                torch.nn.Linear(1, 1).to(self.device),
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
            )
            dist.barrier()

    def run(self, spec: TrialSpec, pools: Any, token: str, feed: Any = None) -> RunOutcome:
        """Train one trial on this rank; ``"finished"`` or ``"stopped"`` (at an epoch boundary).

        Args:
            feed: a streamed dataset's shard of this rank for the trial's job
                (:class:`~ludwig_hpo.execution.stream_shards.RankFeed`, kept by the pools
                actor across trials); None: the rows this actor holds.
            spec: the trial (the same on every rank of the group).
            pools: handle of the :class:`~ludwig_hpo.execution.pool.WorkerPools` actor that
                receives rank 0's per-epoch metrics.
            token: the run's token at the pools actor.

        Raises:
            Exception: whatever the loop raised (the same on every rank for errors in the
                training itself, e.g. ``FloatingPointError``).
        """
        import torch

        from ludwig_hpo.execution.worker import run_worker

        report = PoolReporter(spec, pools, token, self.rank, self.world, self.device)
        data: Any = self.data
        if feed is not None:
            from ludwig_hpo.execution.stream_shards import job_stream

            data = job_stream(feed, feed.probe.meta)
        try:
            run_worker(spec, data, self.device, report, local_world_size=self.local_world)
            return "finished"
        except Stopped:
            return "stopped"
        finally:
            # The next trial in this process starts with the memory this one held returned.
            gc.collect()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()


class PoolReporter:
    """The loop's per-epoch reporter on a pooled rank (a :data:`~ludwig_hpo.train.loop.Reporter`).

    Rank 0 moves each checkpoint folder under ``<storage_path>/<trial_id>/`` (the trial actor
    hands it to Tune, which copies it, and then removes it; folders of metrics no trial
    collects are removed by the pools actor), sends the metrics to the pools actor
    and learns whether the trial was stopped; rank 0 broadcasts that, so every rank leaves the
    loop at the same epoch boundary (by raising :class:`Stopped`).
    """

    def __init__(self, spec: TrialSpec, pools: Any, token: str, rank: int, world: int, device: Any) -> None:
        self.spec, self.pools, self.token = spec, pools, token
        self.rank, self.world, self.device = rank, world, device

    def __call__(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        import ray
        import torch
        import torch.distributed as dist

        stop = 0
        if self.rank == 0:
            metrics = dict(metrics)
            dest = None
            if checkpoint_dir is not None:
                dest = Path(self.spec.storage_path) / self.spec.trial_id / f"{PENDING_PREFIX}{uuid.uuid4().hex[:12]}"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(checkpoint_dir, dest)
                metrics[PENDING_CHECKPOINT_DIR] = str(dest)
            stop = int(ray.get(self.pools.report.remote(self.token, metrics)))
            if stop and dest is not None:  # nobody will hand it to Tune
                shutil.rmtree(dest, ignore_errors=True)
        if self.world > 1:
            flag = torch.tensor([stop], dtype=torch.int32, device=self.device)
            dist.broadcast(flag, src=0)
            stop = int(flag.item())
        if stop:
            raise Stopped
