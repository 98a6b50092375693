"""The ``fresh`` executor's multi-worker trial: one Ray Train ``TorchTrainer`` job per trial.

Built and fitted in the Tune trial actor; its ``num_workers`` ranks run
:func:`~ludwig_hpo.execution.worker.run_worker` with a reporter that calls
``ray.train.report`` (rank 0's reports reach Tune through ``TuneReportCallback``). A
stable Train run name per trial (its trial id) lets a restored trial find the checkpoints
its run kept under ``<storage_path>/<trial_id>/``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ludwig_hpo.errors import TrialError, WorkerLostError, one_line_error
from ludwig_hpo.execution.spec import TrialSpec


def train_worker(spec: TrialSpec, data: list[Any]) -> None:
    """Ray Train's ``train_loop_per_worker`` (bound to its arguments): runs on every rank of
    the trial's worker group, in a process Ray Train started with ``torch.distributed`` set up.

    Args:
        spec: the trial.
        data: a one-element list holding the prepared data's ``ObjectRef`` (a list, so Ray
            passes the reference instead of the value).
    """
    import ray
    import ray.train
    import ray.train.torch

    from ludwig_hpo.execution.worker import run_worker
    from ludwig_hpo.execution.worker_loss import remember_rank

    remember_rank()  # what a diagnosis of this process's death compares against

    def report(metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        ckpt = ray.train.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
        ray.train.report(metrics, checkpoint=ckpt)

    run_worker(
        spec,
        ray.get(data[0]),
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
    loop: Callable[[TrialSpec, list[Any]], None] = train_worker,
) -> None:
    """Build and fit one ``TorchTrainer`` of ``num_workers`` ranks for ``spec``; runs in the
    Tune trial actor and returns when the job ended.

    The job keeps one checkpoint (the best by ``checkpoint_objective`` in ``spec.mode``) and
    is not retried by Train (Tune's failure handling retries the trial).

    Args:
        data: a one-element list holding the prepared data's ``ObjectRef``.
        cpus_per_worker: logical CPUs each rank reserves.
        gpus_per_worker: GPUs each rank reserves when ``use_gpu`` (1, or a fraction to share one).
        loop: what every rank runs (``train_worker``; a test's stand-in, which shares the job's
            set-up and failure handling).

    Raises:
        WorkerLostError: a worker process died (which rank, where, how).
        TrialError: the workers failed; its message is the root cause's one-line form.
    """
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    from ludwig_hpo.train.report_keys import CHECKPOINT_OBJECTIVE

    resources = {"CPU": cpus_per_worker, **({"GPU": gpus_per_worker} if use_gpu else {})}
    trainer = TorchTrainer(
        functools.partial(loop, spec, data),
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu, resources_per_worker=resources),
        run_config=RunConfig(
            name=spec.trial_id,  # stable per trial: a restored trial resumes from its checkpoint
            storage_path=spec.storage_path,
            # ray.train.RunConfig is Train V2's at run time; its static type names V1's callback base.
            callbacks=[TuneReportCallback()],  # type: ignore[list-item]
            checkpoint_config=CheckpointConfig(
                num_to_keep=1, checkpoint_score_attribute=CHECKPOINT_OBJECTIVE, checkpoint_score_order=spec.mode
            ),
            failure_config=FailureConfig(max_failures=0),
        ),
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
