"""What ``hpo sweep`` starts before it needs it: the local Ray cluster (in a thread of its own,
:mod:`ludwig_hpo.execution.cluster_start`) and the MLflow store's process (importing MLflow,
:class:`~ludwig_hpo.tracking.process.PendingStore`), both begun before the data is read, so
their start-up overlaps reading and preparing the data and checking the model instead of
following them. Driver process only.
"""

from __future__ import annotations

from pathlib import Path

from ludwig_hpo.execution.cluster_start import ClusterStart, start_local_cluster
from ludwig_hpo.execution.executor import ExecutorChoice
from ludwig_hpo.execution.resources import ResourcePlan
from ludwig_hpo.tracking.process import PendingStore


class Startup:
    """Begins, on construction, the store's process and (unless the sweep runs on an existing
    cluster) the local cluster of ``plan``; a context manager that ends what was not handed
    on when its block ends, however it ends: the cluster is stopped (after its start ended)
    and a store process no :class:`~ludwig_hpo.tracking.process.StoreProcess` adopted is
    ended, so a sweep that stops on bad input leaves neither behind.

    Args:
        plan: the sweep's resources (``existing_cluster``: start no cluster).
        executor: the trial executor (multi-worker ``fresh`` trials are Ray Train jobs,
            which need the dashboard's state API; see :func:`.cluster.local_cluster`).

    Attributes:
        store: the store's process, for ``create_output`` / ``reopen_output`` (``pending=``).
        cluster: the local cluster's start, or None on an existing cluster.
    """

    def __init__(self, plan: ResourcePlan, executor: ExecutorChoice) -> None:
        self.store = PendingStore()
        train_jobs = executor.executor == "fresh" and plan.num_workers > 1
        self.cluster: ClusterStart | None = None
        try:
            if not plan.existing_cluster:
                self.cluster = start_local_cluster(plan, train_jobs=train_jobs)
        except BaseException:
            self.store.close()
            raise

    def logs_to(self, ray_log: Path) -> None:
        """Send Ray's messages about the cluster to ``ray_log`` from now on (the output
        folder exists)."""
        if self.cluster is not None:
            self.cluster.log_file = ray_log

    def __enter__(self) -> Startup:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.cluster is not None:
                self.cluster.stop()
        finally:
            self.store.close()
