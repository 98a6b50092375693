"""The typed records one sweep's phases hand each other: what was checked before anything
exists (:class:`Prepared`), the open output folder and tracking store (:class:`SweepOutput`),
everything a running sweep's phases need (:class:`SweepRun`), and what the search found
(:class:`SearchOutcome`). Built once each by :class:`~ludwig_hpo.driver.sweep.Sweep`, never
changed. Driver process only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.driver.journal import JournalEntry
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.driver.state import Phase, SweepState, write_state
from ludwig_hpo.execution.executor import ExecutorChoice
from ludwig_hpo.execution.resources import ResourcePlan
from ludwig_hpo.results import TrialRecord
from ludwig_hpo.tracking.protocol import Tracker

if TYPE_CHECKING:
    from ludwig_hpo.data import PreparedData
    from ludwig_hpo.data.streaming.record import StreamedData
    from ludwig_hpo.execution.cache import PersistedSizes
    from ludwig_hpo.execution.trainable import TrialContext


@dataclass(frozen=True)
class Prepared:
    """What the sweep checked before creating anything: the data (in memory, or a streamed
    dataset's lazy pipelines and fitted metadata), the resources, the executor."""

    data: PreparedData | StreamedData
    plan: ResourcePlan
    executor: ExecutorChoice


@dataclass(frozen=True)
class SearchOutcome:
    """What the search phase hands on.

    Attributes:
        records: every search trial, in start order.
        checkpoints: ``{trial id: checkpoint folder}`` holding each trial's best weights.
        final_params: ``{trial id: parameters it ended with}`` (PBT changes them mid-trial).
        stop_reason: why the search ended before its planned trials (the time budget), or None.
    """

    records: tuple[TrialRecord, ...]
    checkpoints: dict[str, str]
    final_params: dict[str, dict[str, Any]]
    stop_reason: str | None = None


@dataclass(frozen=True)
class SweepOutput:
    """A sweep's output folder and tracking, open (created, or reopened by a resume).

    Attributes:
        paths: the output folder's files.
        store: the tracking store (the driver closes it when the sweep ends).
        parent: the MLflow parent run id of the sweep.
        state: the sweep's state as this driver found or created it (its phase is rewritten
            as the sweep moves on, see :meth:`enter`).
        resumed: this driver continues an interrupted sweep.
    """

    paths: SweepPaths
    store: Tracker
    parent: str
    state: SweepState
    resumed: bool

    def enter(self, phase: Phase) -> None:
        """Record in ``state.json`` that the sweep reached ``phase`` (atomically)."""
        write_state(self.paths.root, self.state.at(phase))


@dataclass(frozen=True)
class SweepRun:
    """What the search and k-fold phases of a running sweep share.

    Attributes:
        output: the open output folder and tracking store.
        data: the prepared data (also in Ray's object store, see ``ctx.data``), or the streamed
            dataset the ranks read their shards of (``ctx.data`` holds it as it is).
        plan: the resources of a trial and how many run at once.
        executor: the trial executor (``fresh`` or ``pooled``) and why.
        ctx: what every trial of the sweep receives.
        journal: a resumed sweep's journal (``{trial id: entry}``); empty for a new sweep.
    """

    output: SweepOutput
    data: PreparedData | StreamedData
    plan: ResourcePlan
    executor: ExecutorChoice
    ctx: TrialContext
    journal: dict[str, JournalEntry]

    @classmethod
    def start(
        cls,
        output: SweepOutput,
        prepared: Prepared,
        loaded: LoadedSweep,
        journal: dict[str, JournalEntry],
        mode: str,
        persisted: PersistedSizes | None = None,
    ) -> SweepRun:
        """Put the prepared data in Ray's object store (once per sweep; a streamed dataset is
        handed to the executors as it is: warm groups ``streaming_split`` it, fresh Ray Train
        jobs take their ``get_dataset_shard``), start the warm worker
        groups (pooled executor) and the batch-size cache actor, and build the trials' context
        from the sweep file (``loaded``), the resources, ``journal`` (a resumed sweep's
        recorded results) and ``mode`` (``min``/``max``: which checkpoint a trial keeps).
        ``persisted``: the batch sizes earlier sweeps tuned, and the files new ones go to.
        Inside the sweep's Ray cluster."""
        import ray

        from ludwig_hpo.execution.cache import start_cache_actor
        from ludwig_hpo.execution.pool import start_pools
        from ludwig_hpo.execution.trainable import TrialContext
        from ludwig_hpo.search.schedulers import pbt_checkpoints, stop_epochs
        from ludwig_hpo.search.space import index_encoded_choices

        cfg, plan = loaded.config, prepared.plan
        from ludwig_hpo.data.streaming.record import StreamedData

        streamed = isinstance(prepared.data, StreamedData)  # its pipelines are handed on, never put
        data_ref = [prepared.data if streamed else ray.put(prepared.data)]
        pools = None
        if prepared.executor.executor == "pooled":
            pools = start_pools(
                groups=plan.max_concurrent,
                num_workers=plan.num_workers,
                cpus_per_worker=plan.cpus_per_worker,
                use_gpu=plan.use_gpu,
                data=data_ref,
            )
        ctx = TrialContext(
            raw=loaded.raw,
            data=data_ref,
            storage_path=str(output.paths.train_storage),
            num_workers=plan.num_workers,
            use_gpu=plan.use_gpu,
            cpus_per_worker=plan.cpus_per_worker,
            gpus_per_worker=plan.gpus_per_worker,
            choices=index_encoded_choices(cfg.hyperopt.parameters),
            mode=mode,
            batch_cache=start_cache_actor(persisted),
            pools=pools,
            replay={tid: e["results"] for tid, e in journal.items()},
            checkpoints=pbt_checkpoints(cfg.hyperopt),
            stop_epochs=stop_epochs(cfg.hyperopt, cfg.trainer.epochs),
        )
        return cls(output, prepared.data, plan, prepared.executor, ctx, journal)

    @property
    def paths(self) -> SweepPaths:
        return self.output.paths

    @property
    def store(self) -> Tracker:
        return self.output.store

    @property
    def parent(self) -> str:
        return self.output.parent

    @property
    def resumed(self) -> bool:
        return self.output.resumed

    @property
    def pooled(self) -> bool:
        """Trials run on the sweep's warm worker groups."""
        return self.executor.executor == "pooled"
