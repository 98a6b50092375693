"""The Tune function trainables of a sweep (search and k-fold) and what a trial does first.

Runs in the Tune trial actor. :func:`run_job` replays a trial that ended before an
interruption, finds where a restarted search trial continues (:func:`resume_point`) and the
seed offset of a retried one (its failure count), builds the trial's
:class:`~ludwig_hpo.execution.spec.TrialSpec` and hands it to the sweep's executor:
``pooled``, a warm worker group (:mod:`ludwig_hpo.execution.pool`); ``fresh``, one Ray
Train job (:mod:`ludwig_hpo.execution.fresh`), or for a 1-worker trial the worker entry in
the trial actor itself (which then reserves the worker's CPU/GPU). Either way Tune
schedulers see every epoch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ludwig_hpo.config.spaces import ParamSpace
from ludwig_hpo.execution.resources import ResourcePlan
from ludwig_hpo.execution.spec import Mode, TrialSpec
from ludwig_hpo.train.job import Job


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a sweep shares (sent to the object store once per sweep).

    Attributes:
        raw: the sweep file's mapping; each trial applies its sampled parameters to it.
        data: a one-element list holding the ``ObjectRef`` of the :class:`PreparedData`
            (wrapped so Ray passes the reference instead of the value).
        storage_path: folder where Ray Train keeps each trial's checkpoints.
        num_workers: DDP world size of a trial.
        use_gpu: workers take GPUs (``gpus_per_worker`` each: 1, or a fraction to share one).
        cpus_per_worker: logical CPUs each worker reserves.
        choices: the parameters whose sampled value is decoded before use
            (:func:`~ludwig_hpo.search.space.index_encoded_choices`: categories sampled by
            index, normal and quantized spaces), by dotted path.
        mode: ``"min"`` or ``"max"``: which checkpoint (by ``checkpoint_objective``) a trial keeps.
        batch_cache: handle of the sweep's batch-size cache actor, or None.
        pools: handle of the sweep's :class:`~ludwig_hpo.execution.pool.WorkerPools` actor
            (``pooled`` executor), or None (``fresh``).
    """

    raw: dict[str, Any]
    data: list[Any]
    storage_path: str
    num_workers: int
    use_gpu: bool
    cpus_per_worker: float
    choices: dict[str, ParamSpace] = field(default_factory=dict)
    mode: str = "min"
    batch_cache: Any = None
    pools: Any = None
    gpus_per_worker: float = 1.0
    #: a resumed sweep: per trial id, the results of trials that ended before the interruption
    #: (see :mod:`ludwig_hpo.driver.journal`); such a trial reports them again instead of training.
    replay: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: search trials write a checkpoint at epochs ``first``, ``first + every``, ... (PBT's
    #: perturbation epochs, see :func:`~ludwig_hpo.search.schedulers.pbt_checkpoints`), besides
    #: the ones their checkpoint budget allows and their last; ``(0, 0)``: none besides those.
    checkpoints: tuple[int, int] = (0, 0)
    #: epochs after which the scheduler may stop a trial: it writes its best weights there if
    #: they changed since its last checkpoint (:func:`~ludwig_hpo.search.schedulers.stop_epochs`).
    stop_epochs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in ("min", "max"):
            raise ValueError(f"TrialContext.mode must be 'min' or 'max', but got {self.mode!r}")


#: Beside a trial's checkpoints: how many times it failed (a retry's seed offset).
FAILURES_FILE = "failures.txt"


@contextlib.contextmanager
def resume_point(storage_path: str, trial_id: str) -> Iterator[str | None]:
    """The checkpoint folder a starting trial continues from, or None (a first start).

    Tune's checkpoint of the trial when it has one (a trial restored after an interruption,
    retried after a failure, or cloned by PBT); else the newest resumable checkpoint its own
    Ray Train run kept under ``<storage_path>/<trial_id>/`` (a fresh multi-worker trial,
    whose checkpoints Tune does not hold). Runs in the Tune trial actor; the folder exists
    while the context is open.
    """
    from ray import tune

    from ludwig_hpo.train.report_keys import TRAINER_STATE_FILE

    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as folder:
            yield folder if (Path(folder) / TRAINER_STATE_FILE).is_file() else None
        return
    kept = sorted(p.parent for p in (Path(storage_path) / trial_id).glob(f"checkpoint_*/{TRAINER_STATE_FILE}"))
    yield str(kept[-1]) if kept else None


def _failures_file(storage_path: str, trial_id: str) -> Path:
    return Path(storage_path) / trial_id / FAILURES_FILE


def _failures(storage_path: str, trial_id: str) -> int:
    """How many times the trial failed before (kept beside its checkpoints, so a resumed
    sweep and a retry on another node see the same count)."""
    try:
        return int(_failures_file(storage_path, trial_id).read_text())
    except (OSError, ValueError):
        return 0


def _count_failure(storage_path: str, trial_id: str) -> None:
    f = _failures_file(storage_path, trial_id)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(str(_failures(storage_path, trial_id) + 1))


def trial_resources(plan: ResourcePlan, executor: str = "fresh") -> dict[str, float]:
    """What the Tune trial actor reserves: a token (``trial_slot``, or a byte of memory on an
    existing cluster; its Train workers, or the warm group's workers, reserve the CPUs/GPUs),
    or, for a fresh 1-worker trial that trains in the actor, also its CPU/GPU."""
    if plan.num_workers > 1 or executor == "pooled":
        return {"cpu": 0, **plan.trial_token}
    return {"cpu": plan.cpus_per_worker, "gpu": plan.gpus_per_worker if plan.use_gpu else 0, **plan.trial_token}


def run_job(params: dict[str, Any], job: Job, ctx: TrialContext) -> None:
    """Train one configuration (``params`` applied to ``ctx.raw``) for ``job``, reporting to Tune.

    Runs in the Tune trial actor. A search trial that starts again continues from its last
    checkpoint (:func:`resume_point`); one that failed before runs with ``trainer.seed``
    offset by its number of failures (reported as ``seed``).

    Raises:
        TrialError: the workers failed; its message is the root cause's one-line form.
    """
    from ray import tune

    trial_id = tune.get_context().get_trial_id()
    if trial_id in ctx.replay:
        # It ended before the sweep was interrupted, after Tune last saved its state: report
        # what it reported then, so the searcher and scheduler see the same results.
        for result in ctx.replay[trial_id]:
            tune.report(result)
        return
    if job.kind != "search":
        _run(params, job, ctx, trial_id)
        return
    first, every = ctx.checkpoints
    job = replace(
        job,
        seed_offset=_failures(ctx.storage_path, trial_id),
        checkpoint_first=first,
        checkpoint_every=every,
        stop_epochs=ctx.stop_epochs,
    )
    try:
        with resume_point(ctx.storage_path, trial_id) as folder:
            _run(params, replace(job, resume_from=folder), ctx, trial_id)
    except Exception:
        _count_failure(ctx.storage_path, trial_id)  # a retry runs with the next seed
        raise


_MODES: dict[str, Mode] = {"min": "min", "max": "max"}


def _spec(params: dict[str, Any], job: Job, ctx: TrialContext, trial_id: str) -> TrialSpec:
    return TrialSpec(
        raw=ctx.raw,
        params=params,
        job=job,
        trial_id=trial_id,
        storage_path=ctx.storage_path,
        mode=_MODES[ctx.mode],
        batch_cache=ctx.batch_cache,
    )


def _run(params: dict[str, Any], job: Job, ctx: TrialContext, trial_id: str) -> None:
    """Run the trial on the sweep's executor: a warm group, the trial actor itself (a fresh
    1-worker trial), or a fresh Ray Train job."""
    spec = _spec(params, job, ctx, trial_id)
    if ctx.pools is not None:
        from ludwig_hpo.execution.pool import run_pooled

        run_pooled(ctx.pools, spec)
    elif ctx.num_workers == 1:
        _run_in_actor(spec, ctx)
    else:
        from ludwig_hpo.execution.fresh import fit_fresh

        fit_fresh(
            spec,
            ctx.data,
            num_workers=ctx.num_workers,
            use_gpu=ctx.use_gpu,
            cpus_per_worker=ctx.cpus_per_worker,
            gpus_per_worker=ctx.gpus_per_worker,
        )


def _run_in_actor(spec: TrialSpec, ctx: TrialContext) -> None:
    """A fresh 1-worker trial: the worker entry runs in the Tune trial actor (which reserved
    the worker's CPU/GPU) and reports straight to Tune."""
    import ray
    import torch
    from ray import tune

    from ludwig_hpo.execution.worker import run_worker

    def report(metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        ckpt = tune.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
        tune.report(metrics, checkpoint=ckpt)

    from ludwig_hpo.execution.stream_shards import job_stream, rank_feeds, streamed_in

    device = torch.device("cuda") if ctx.use_gpu else torch.device("cpu")
    streamed = streamed_in(ctx.data)
    if streamed is not None:  # one rank: the job's rows streamed whole, in this actor
        (feed,) = rank_feeds(streamed, spec.job, 1)
        run_worker(spec, job_stream(feed, streamed.meta), device, report)
    else:
        run_worker(spec, ray.get(ctx.data[0]), device, report)


def search_trial(config: dict[str, Any], ctx: TrialContext) -> None:
    """Tune trainable of the search: ``config`` is the sampled ``{dotted path: value}``."""
    from ludwig_hpo.search.space import decode_with

    run_job(decode_with(ctx.choices, config), Job("search"), ctx)


def kfold_trial(config: dict[str, Any], ctx: TrialContext) -> None:
    """Tune trainable of the k-fold re-evaluation: ``config["job"]`` holds ``params``,
    ``kind`` (``fold`` / ``test``), ``fold``, ``config_rank`` and ``trial_id``."""
    job = config["job"]
    run_job(job["params"], Job(job["kind"], job.get("fold"), job.get("epochs")), ctx)
