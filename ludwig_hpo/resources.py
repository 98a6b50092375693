"""Resource planning: how many trials of N DDP workers fit on the cluster at once. Pure.

Tune does not count the Train workers a trial starts, so the trial itself reserves only a
custom ``trial_slot`` resource (plus its CPU/GPU for a 1-worker trial, which trains in
the trial actor); the number of slots is the concurrency computed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ludwig_hpo.errors import ResourceError


@dataclass(frozen=True)
class ResourcePlan:
    """Per-trial request and the resulting concurrency.

    Attributes:
        num_workers: DDP world size of a trial.
        use_gpu: each worker takes one GPU.
        cpus_per_worker: logical CPUs per worker.
        cpus_per_trial, gpus_per_trial: the trial's total request.
        max_concurrent: trials that fit at once (>= 1).
        cluster_cpus, cluster_gpus: what the cluster offers.
    """

    num_workers: int
    use_gpu: bool
    cpus_per_worker: float
    cpus_per_trial: float
    gpus_per_trial: int
    max_concurrent: int
    cluster_cpus: float
    cluster_gpus: float

    def describe(self) -> str:
        """One line for the console."""
        gpu = f" + {self.gpus_per_trial} GPU" if self.gpus_per_trial else ""
        return (f"{self.num_workers} DDP worker(s) x {self.cpus_per_worker:g} CPU{gpu} per trial; "
                f"cluster {self.cluster_cpus:g} CPU / {self.cluster_gpus:g} GPU -> "
                f"{self.max_concurrent} trial(s) at once")


def plan_resources(*, num_workers: int, use_gpu: bool, cpus_per_worker: float, cluster_cpus: float,
                   cluster_gpus: float, max_concurrent: int | str = "auto", num_samples: int | None = None) -> ResourcePlan:
    """Compute how many trials run at once.

    Args:
        max_concurrent: ``"auto"`` (as many as fit, at most ``num_samples``) or a cap.

    Raises:
        ResourceError: one trial needs more CPUs or GPUs than the cluster has (it would wait
            forever), naming the request and the fix.
    """
    cpus = num_workers * cpus_per_worker
    gpus = num_workers if use_gpu else 0
    if cpus_per_worker > cluster_cpus + 1e-9:
        raise ResourceError(
            f"one worker needs {cpus_per_worker:g} CPUs but the cluster has {cluster_cpus:g}",
            key="backend.cpus_per_worker", fix=f"set backend.cpus_per_worker <= {cluster_cpus:g}")
    if cpus > cluster_cpus + 1e-9:
        raise ResourceError(
            f"a trial needs {num_workers} workers x {cpus_per_worker:g} CPU = {cpus:g} CPUs but the cluster has "
            f"{cluster_cpus:g}", key="backend.num_workers",
            fix=f"set backend.num_workers <= {int(cluster_cpus // cpus_per_worker)} or lower backend.cpus_per_worker")
    if gpus > cluster_gpus:
        raise ResourceError(
            f"a trial needs {gpus} GPUs (one per worker) but the cluster has {cluster_gpus:g}",
            key="backend.use_gpu", fix="lower backend.num_workers or set backend.use_gpu: false")
    fit = math.floor((cluster_cpus + 1e-9) / cpus)
    if gpus:
        fit = min(fit, math.floor(cluster_gpus / gpus))
    fit = max(1, fit)
    if max_concurrent != "auto":
        fit = min(fit, int(max_concurrent))
    if num_samples:
        fit = min(fit, num_samples)
    return ResourcePlan(num_workers=num_workers, use_gpu=use_gpu, cpus_per_worker=cpus_per_worker,
                        cpus_per_trial=cpus, gpus_per_trial=gpus, max_concurrent=fit,
                        cluster_cpus=cluster_cpus, cluster_gpus=cluster_gpus)
