"""Resource planning: how many trials of N workers fit on the cluster at once. Pure.

Tune does not count the Train workers a trial starts, so the trial itself reserves only a
token resource (a custom ``trial_slot`` on a cluster the sweep starts, a byte of ``memory``
on an existing cluster; plus its CPU/GPU for a 1-worker trial, which trains in the trial
actor). The concurrency computed here is Tune's ``max_concurrent_trials``.

A worker (its ``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs) must fit on one node;
a trial's workers may spread over nodes. Trials fit at once when their workers fit in the
nodes' worker slots together. With whole GPUs (``gpus_per_worker: 1``) no two workers, and
so no two trials, ever share a GPU; only a fractional ``gpus_per_worker`` packs several
workers onto one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ludwig_hpo.errors import ResourceError

_EPS = 1e-9  # float noise (3 x 0.1 CPU) must not cost a slot


@dataclass(frozen=True)
class NodeShape:
    """What one Ray node offers: logical CPUs and GPUs."""

    cpus: float
    gpus: float = 0.0


@dataclass(frozen=True)
class ResourcePlan:
    """Per-trial request and the resulting concurrency.

    Attributes:
        num_workers: world size of a trial.
        use_gpu: each worker takes ``gpus_per_worker`` GPUs.
        cpus_per_worker: logical CPUs per worker.
        cpus_per_trial, gpus_per_trial: the trial's total request.
        max_concurrent: trials that fit at once (>= 1).
        cluster_cpus, cluster_gpus: what the cluster offers in total.
        gpus_per_worker: GPUs per worker when ``use_gpu`` (1 = a whole GPU).
        nodes: number of nodes in the cluster.
        existing_cluster: the sweep runs on a cluster it did not start (no ``trial_slot``
            resource there).
        requested_concurrent: ``hyperopt.executor.max_concurrent_trials`` when it is a number,
            None for ``auto``.
        fit_concurrent: how many trials the cluster's resources hold at once (before the
            ``max_concurrent_trials`` and trial-count caps).
    """

    num_workers: int
    use_gpu: bool
    cpus_per_worker: float
    cpus_per_trial: float
    gpus_per_trial: float
    max_concurrent: int
    cluster_cpus: float
    cluster_gpus: float
    gpus_per_worker: float = 1.0
    nodes: int = 1
    existing_cluster: bool = False
    requested_concurrent: int | None = None
    fit_concurrent: int | None = None

    @property
    def trial_token(self) -> dict[str, float]:
        """What a trial actor reserves besides its own CPU/GPU: one ``trial_slot`` of the
        cluster this sweep starts, or (an existing cluster has no such resource) one byte of
        ``memory``, which every node has (an actor must reserve something non-zero)."""
        return {"memory": 1} if self.existing_cluster else {"trial_slot": 1}

    def describe(self) -> str:
        """One line for the console."""
        gpu = f" + {self.gpus_per_worker:g} GPU" if self.use_gpu else ""
        where = f"{self.nodes} node(s), " if self.nodes > 1 or self.existing_cluster else ""
        return (
            f"{self.num_workers} worker(s) x {self.cpus_per_worker:g} CPU{gpu} per trial; "
            f"cluster {where}{self.cluster_cpus:g} CPU / {self.cluster_gpus:g} GPU -> "
            f"{self.max_concurrent} trial(s) at once"
        )

    def concurrency_note(self) -> str | None:
        """One line when ``max_concurrent_trials`` asks for more trials at once than the
        cluster's resources hold (the plan runs fewer), saying what they would need and how to
        get them; None otherwise. Pure."""
        asked, fit = self.requested_concurrent, self.fit_concurrent
        if asked is None or fit is None or asked <= fit:
            return None
        gpu = f" + {self.gpus_per_worker:g} GPU" if self.use_gpu else ""
        need = f"{asked * self.cpus_per_trial:g} CPUs" + (f" / {asked * self.gpus_per_trial:g} GPUs" if gpu else "")
        have = f"{self.cluster_cpus:g} CPUs" + (f" / {self.cluster_gpus:g} GPUs" if gpu else "")
        lower = (
            "hyperopt.executor.gpu_resources_per_trial"
            if gpu and self.cluster_gpus < asked * self.gpus_per_trial
            else ("hyperopt.executor.cpu_resources_per_trial (backend.cpus_per_worker)")
        )
        return (
            f"note: max_concurrent_trials {asked} cannot be honoured: {asked} concurrent trials of "
            f"{self.num_workers} worker(s) x {self.cpus_per_worker:g} CPU{gpu} need {need}; this cluster has {have}, "
            f"so {fit} run at once: lower {lower} or backend.num_workers, or run on {need}"
        )


def nodes_from_ray(nodes: Sequence[Mapping]) -> list[NodeShape]:
    """:class:`NodeShape` of every alive node of ``ray.nodes()``."""
    return [
        NodeShape(float(n.get("Resources", {}).get("CPU", 0)), float(n.get("Resources", {}).get("GPU", 0)))
        for n in nodes
        if n.get("Alive", True)
    ]


def _workers_on(node: NodeShape, cpus_per_worker: float, gpus_per_worker: float) -> int:
    fit = math.floor((node.cpus + _EPS) / cpus_per_worker)
    if gpus_per_worker:
        fit = min(fit, math.floor((node.gpus + _EPS) / gpus_per_worker))
    return fit


def plan_resources(
    *,
    num_workers: int,
    use_gpu: bool,
    cpus_per_worker: float,
    cluster_cpus: float | None = None,
    cluster_gpus: float = 0,
    max_concurrent: int | str = "auto",
    num_samples: int | None = None,
    gpus_per_worker: float = 1.0,
    nodes: Sequence[NodeShape] | None = None,
    existing_cluster: bool = False,
) -> ResourcePlan:
    """Compute how many trials run at once.

    Args:
        cluster_cpus, cluster_gpus: a one-node cluster (when ``nodes`` is not given).
        nodes: the cluster's nodes (from ``ray.nodes()``, see :func:`nodes_from_ray`).
        max_concurrent: ``"auto"`` (as many as fit, at most ``num_samples``) or a cap.
        gpus_per_worker: GPUs per worker with ``use_gpu`` (fractions share a GPU).

    Raises:
        ResourceError: one worker fits on no node, or one trial's workers do not fit in the
            whole cluster (it would wait forever), naming the request and the fix.
    """
    if nodes is None:
        nodes = [NodeShape(float(cluster_cpus or 0), float(cluster_gpus))]
    total_cpus = sum(n.cpus for n in nodes)
    total_gpus = sum(n.gpus for n in nodes)
    gpw = gpus_per_worker if use_gpu else 0.0
    cpus = num_workers * cpus_per_worker
    gpus = num_workers * gpw
    biggest = max(nodes, key=lambda n: n.cpus) if nodes else NodeShape(0)
    if cpus_per_worker > biggest.cpus + _EPS:
        where = "the cluster has" if len(nodes) == 1 else "the largest node has"
        raise ResourceError(
            f"one worker needs {cpus_per_worker:g} CPUs but {where} {biggest.cpus:g}",
            key="backend.cpus_per_worker",
            fix=f"set backend.cpus_per_worker <= {biggest.cpus:g}",
        )
    if gpw and not any(n.gpus + _EPS >= gpw for n in nodes):
        most = max((n.gpus for n in nodes), default=0)
        raise ResourceError(
            f"a trial needs {gpus:g} GPUs ({gpw:g} per worker) but no node has {gpw:g} (most on one node: {most:g})",
            key="backend.use_gpu",
            fix="set backend.use_gpu: false" if not total_gpus else "lower backend.gpus_per_worker",
        )
    slots = [_workers_on(n, cpus_per_worker, gpw) for n in nodes]
    if sum(slots) < num_workers:
        if gpw and gpus > total_gpus + _EPS:
            raise ResourceError(
                f"a trial needs {gpus:g} GPUs ({gpw:g} per worker) but the cluster has {total_gpus:g}",
                key="backend.use_gpu",
                fix="lower backend.num_workers or set backend.use_gpu: false",
            )
        if len(nodes) == 1:
            raise ResourceError(
                f"a trial needs {num_workers} workers x {cpus_per_worker:g} CPU = {cpus:g} CPUs but the cluster has "
                f"{total_cpus:g}",
                key="backend.num_workers",
                fix=f"set backend.num_workers <= {sum(slots)} or lower backend.cpus_per_worker",
            )
        raise ResourceError(
            f"a trial needs {num_workers} workers of {cpus_per_worker:g} CPU{f' + {gpw:g} GPU' if gpw else ''} but "
            f"the cluster's {len(nodes)} nodes hold only {sum(slots)} such workers",
            key="backend.num_workers",
            fix=f"set backend.num_workers <= {sum(slots)} or lower backend.cpus_per_worker",
        )
    fits = max(1, sum(slots) // num_workers)
    asked = None if max_concurrent == "auto" else int(max_concurrent)
    fit = fits if asked is None else min(fits, asked)
    if num_samples:
        fit = min(fit, num_samples)
    return ResourcePlan(
        num_workers=num_workers,
        use_gpu=use_gpu,
        cpus_per_worker=cpus_per_worker,
        cpus_per_trial=cpus,
        gpus_per_trial=gpus,
        max_concurrent=fit,
        cluster_cpus=total_cpus,
        cluster_gpus=total_gpus,
        gpus_per_worker=gpw or 1.0,
        nodes=len(nodes),
        existing_cluster=existing_cluster,
        requested_concurrent=asked,
        fit_concurrent=fits,
    )
