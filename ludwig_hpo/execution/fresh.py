"""The ``fresh`` executor's multi-worker trial: one Ray Train ``TorchTrainer`` job per trial.

Built and fitted in the Tune trial actor; its ``num_workers`` ranks run
:func:`~ludwig_hpo.execution.worker.run_worker` with a reporter that calls
``ray.train.report`` (rank 0's reports reach Tune through ``TuneReportCallback``). A
stable Train run name per trial (its trial id) lets a restored trial find the checkpoints
its run kept under ``<storage_path>/<trial_id>/``.

Ray Train starts a group again, without a word, when a worker died while the group started
(its ``FailureConfig.controller_failure_limit`` is unlimited); :class:`StartAttempts` counts
those starts in the trial's folder and rank 0's first report carries the count
(``worker_group_restarts``), which the trial's MLflow run keeps as a tag.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ludwig_hpo.errors import TrialError, WorkerLostError, one_line_error
from ludwig_hpo.execution.spec import TrialSpec
from ludwig_hpo.train.report_keys import WORKER_GROUP_RESTARTS_FILE


def read_restarts(storage_path: str, trial_id: str) -> int:
    """The group restarts of trial ``trial_id``'s current Train job (0 when none was recorded)."""
    try:
        return int((Path(storage_path) / trial_id / WORKER_GROUP_RESTARTS_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return 0


def _start_attempts_callback(storage_path: str, trial_id: str) -> Any:
    """A Ray Train worker-group callback (built here so Train's internal base class is imported
    only in the Tune trial actor) that writes, before each start of the job's worker group,
    how many starts came before it in this job to ``<storage_path>/<trial_id>/`` (see
    :data:`WORKER_GROUP_RESTARTS_FILE`). It runs in the job's Train controller actor; the file is written
    before the group's workers exist, so their first report reads this start's count."""
    from ray.train.v2._internal.execution.callback import WorkerGroupCallback

    class StartAttempts(WorkerGroupCallback):
        def __init__(self) -> None:
            self.starts = 0

        def before_worker_group_start(self, worker_group_context: Any) -> None:
            folder = Path(storage_path) / trial_id
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{WORKER_GROUP_RESTARTS_FILE}.tmp").write_text(str(self.starts))
            (folder / f"{WORKER_GROUP_RESTARTS_FILE}.tmp").replace(folder / WORKER_GROUP_RESTARTS_FILE)
            self.starts += 1

    return StartAttempts()


def train_worker(spec: TrialSpec, data: list[Any], feed: Any = None) -> None:
    """Ray Train's ``train_loop_per_worker`` (bound to its arguments): runs on every rank of
    the trial's worker group, in a process Ray Train started with ``torch.distributed`` set up.

    Args:
        spec: the trial.
        data: a one-element list holding the prepared data's ``ObjectRef`` (a list, so Ray
            passes the reference instead of the value).
        feed: a streamed dataset's :class:`~ludwig_hpo.execution.stream_shards.RankFeed`
            template; the rank streams its ``get_dataset_shard`` shards instead of ``data``.
    """
    import ray
    import ray.train
    import ray.train.torch

    from ludwig_hpo.execution.worker import run_worker
    from ludwig_hpo.execution.worker_loss import remember_rank
    from ludwig_hpo.train.report_keys import WORKER_GROUP_RESTARTS

    remember_rank()  # what a diagnosis of this process's death compares against
    once = {WORKER_GROUP_RESTARTS: read_restarts(spec.storage_path, spec.trial_id)}

    def report(metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        ckpt = ray.train.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
        ray.train.report({**metrics, **once}, checkpoint=ckpt)
        once.clear()  # the first report only

    if feed is not None:
        from ludwig_hpo.execution.stream_shards import job_stream, rank_feed_of_train_worker

        prepared: Any = job_stream(rank_feed_of_train_worker(feed), feed.probe.meta)
    else:
        prepared = ray.get(data[0])
    run_worker(
        spec,
        prepared,
        ray.train.torch.get_device(),
        report,
        local_world_size=ray.train.get_context().get_local_world_size(),
    )


def fit_fresh(
    spec: TrialSpec,
    data: list[Any],
    *,
    num_workers: int,
    use_gpu: bool,
    cpus_per_worker: float,
    gpus_per_worker: float,
    loop: Callable[..., None] = train_worker,
    callbacks: Sequence[Any] = (),
) -> None:
    """Build and fit one ``TorchTrainer`` of ``num_workers`` ranks for ``spec``; runs in the
    Tune trial actor and returns when the job ended.

    The job keeps one checkpoint (the best by ``checkpoint_objective`` in ``spec.mode``) and a
    failed training is not retried by Train (Tune's failure handling retries the trial). A
    group whose start failed (a worker died before training began) Train starts again; the
    trial's first report says how many times (``worker_group_restarts``).

    Args:
        data: a one-element list holding the prepared data's ``ObjectRef``, or a streamed
            dataset's :class:`~ludwig_hpo.data.streaming.record.StreamedData`: the job's
            training and scored rows then go to the ranks as Ray Train dataset shards.
        cpus_per_worker: logical CPUs each rank reserves.
        gpus_per_worker: GPUs each rank reserves when ``use_gpu`` (1, or a fraction to share one).
        loop: what every rank runs (``train_worker``; a test's stand-in, which shares the job's
            set-up and failure handling).
        callbacks: more Ray Train callbacks of the job (a test's stand-in for a failing start).

    Raises:
        WorkerLostError: a worker process died (which rank, where, how).
        TrialError: the workers failed; its message is the root cause's one-line form.
    """
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    from ludwig_hpo.execution.stream_shards import fresh_job_inputs, job_data_config, streamed_in
    from ludwig_hpo.train.report_keys import CHECKPOINT_OBJECTIVE

    resources = {"CPU": cpus_per_worker, **({"GPU": gpus_per_worker} if use_gpu else {})}
    streamed, streams = streamed_in(data), {}
    if streamed is not None:
        datasets, feed = fresh_job_inputs(streamed, spec.job, num_workers)
        streams = {"datasets": datasets, "dataset_config": job_data_config()}
        loop = functools.partial(loop, feed=feed)
    trainer = TorchTrainer(
        functools.partial(loop, spec, data),
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu, resources_per_worker=resources),
        run_config=RunConfig(
            name=spec.trial_id,  # stable per trial: a restored trial resumes from its checkpoint
            storage_path=spec.storage_path,
            # ray.train.RunConfig is Train V2's at run time; its static type names V1's callback base.
            callbacks=[
                TuneReportCallback(),  # type: ignore[list-item]
                _start_attempts_callback(spec.storage_path, spec.trial_id),
                *callbacks,
            ],
            checkpoint_config=CheckpointConfig(
                num_to_keep=1, checkpoint_score_attribute=CHECKPOINT_OBJECTIVE, checkpoint_score_order=spec.mode
            ),
            failure_config=FailureConfig(max_failures=0),
        ),
        **streams,
    )
    try:
        trainer.fit()
    except Exception as e:  # TrainingFailedError wraps the workers' errors
        raise _trial_error(e, num_workers) from e


def _trial_error(error: Exception, num_workers: int) -> TrialError:
    """The trial's error for a failed ``fit``: a dead rank's :class:`WorkerLostError` (Ray
    Train's ``WorkerGroupError`` keeps the ranks' errors by rank), else the most specific
    line of the ranks' errors."""
    from ludwig_hpo.execution.worker_loss import describe_dead_rank, is_dead_actor

    failures: dict[int, BaseException] = dict(sorted(getattr(error, "worker_failures", {}).items()))
    dead = next((r for r, e in failures.items() if is_dead_actor(e)), None)
    if dead is not None:
        return WorkerLostError(describe_dead_rank(failures[dead], dead, num_workers))
    return TrialError(one_line_error(f"{type(error).__name__}: {error}"))
