"""The streamed pipelines of the warm worker groups (the pools actor's side).

A group's ranks stream a job's rows through one ``streaming_split`` per job
(:func:`~ludwig_hpo.execution.stream_shards.rank_feeds`). The pools actor keeps those splits
per group and job (search, fold ``i``, test) and hands them to every later trial of the same
job on that group: successive trials reuse the pipeline (its split coordinator and the
ranks' iterators) instead of building it again. A rebuilt group (a rank died) gets new ones.

A group keeps the pipelines of its :data:`~ludwig_hpo.execution.stream_shards.KEPT_FEEDS`
most recently run jobs: each streamed pipeline holds two split coordinators (Ray actors of
~130 MB each, one for the training rows and one for the scored rows), so a k-fold phase's
``k`` fold pipelines and its test run's, kept all at once beside the search's, would hold up to
``2(k + 2)``. The search's trials run one job and keep reusing its pipeline; the k-fold phase,
which runs each configuration's folds in turn, builds a fold's pipeline again when it comes
back to it (once per k-fold trial, each of which trains the full number of epochs). The ranks
keep their scored shards of as many feeds (:func:`~ludwig_hpo.execution.stream_shards.job_stream`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ludwig_hpo.train.job import Job

if TYPE_CHECKING:  # the pools actor imports neither torch nor pandas until a streamed job starts
    from ludwig_hpo.execution.stream_shards import RankFeed


class GroupFeeds:
    """Per group and job, the ranks' :class:`~ludwig_hpo.execution.stream_shards.RankFeed`;
    lives in the pools actor.

    Args:
        data: the executor's data list (an in-memory dataset's ``ObjectRef``: nothing to feed,
            the ranks hold the rows; or a :class:`~ludwig_hpo.data.streaming.record.StreamedData`).
        num_workers: ranks per group.
        reserved_cpus: the CPUs all groups' ranks reserve together.
    """

    def __init__(self, data: list[Any], num_workers: int, reserved_cpus: float = 0.0) -> None:
        import ray

        self.streamed = None if isinstance(data[0], ray.ObjectRef) else data[0]
        self.num_workers, self.reserved_cpus = num_workers, reserved_cpus
        self._feeds: dict[tuple[int, int, str, int | None], list[RankFeed]] = {}

    async def for_run(self, slot: int, build: int, job: Job) -> list[RankFeed | None]:
        """The feed of each rank (rank order) of group ``slot`` in its ``build``-th start for
        ``job``; Nones for an in-memory dataset. The first call per group and job builds the
        splits and reads the probe rows, off the actor's event loop.

        Raises:
            ResourceError: the ranks reserve every CPU of the cluster: Ray Data's read and
                map tasks could never run, and the ranks would wait for rows forever.
        """
        if self.streamed is None:
            return [None] * self.num_workers
        import ray

        from ludwig_hpo.errors import ResourceError

        cpus = ray.cluster_resources().get("CPU", 0.0)
        if cpus - self.reserved_cpus < 1:
            raise ResourceError(
                f"a streamed dataset needs a CPU beside its ranks' for Ray Data's tasks, but the ranks "
                f"reserve {self.reserved_cpus:g} of the cluster's {cpus:g}",
                key="backend.num_workers",
                fix="run fewer workers or trials at once (hyperopt.executor.max_concurrent_trials), or add CPUs",
            )
        from ludwig_hpo.execution import stream_shards

        key = (slot, build, job.kind, job.fold)
        if key in self._feeds:
            self._feeds[key] = self._feeds.pop(key)  # the most recently run last
        else:
            for stale in [k for k in self._feeds if k[0] == slot and k[1] != build]:  # an earlier start's
                del self._feeds[stale]
            mine = [k for k in self._feeds if k[0] == slot]  # least recently run first
            for old in mine[: max(0, len(mine) - stream_shards.KEPT_FEEDS + 1)]:
                del self._feeds[old]
            loop = asyncio.get_running_loop()
            self._feeds[key] = await loop.run_in_executor(
                None, stream_shards.rank_feeds, self.streamed, job, self.num_workers
            )
        return list(self._feeds[key])
