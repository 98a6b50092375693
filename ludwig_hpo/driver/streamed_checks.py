"""What ``hpo sweep`` and ``hpo validate`` check of a sweep whose dataset streams
(``dataset.streaming``), before anything starts and without Ray: the CPUs Ray Data's tasks need
beside the ranks', and the files' footers and headers.
Driver process only.
"""

from __future__ import annotations

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.data.streaming.mode import size_text, streaming_choice
from ludwig_hpo.errors import ResourceError
from ludwig_hpo.execution.resources import ResourcePlan

#: Ray Data's read and map tasks of a streamed sweep need this many CPUs beside the ranks'.
STREAM_TASK_CPUS = 1.0


def check_streamed_sweep(loaded: LoadedSweep, plan: ResourcePlan) -> str | None:
    """None when the sweep loads its dataset in memory; when it streams, check what a streamed
    sweep refuses of its config and its files' footers and headers
    (:func:`~ludwig_hpo.data.streaming.sources.stream_files`), reading no row, and return the
    data line ``hpo validate`` prints (``hpo sweep`` then splits and fits the rows with Ray
    Data). Driver; no Ray.

    Raises:
        ResourceError: the trials' ranks leave the cluster less than :data:`STREAM_TASK_CPUS`
            (Ray Data's tasks could never run, the ranks would wait for rows forever).
        DataError: what a streamed sweep refuses of its config or files (one line naming the
            file and the column), ``streaming: true`` on a bundled dataset.
    """
    cfg = loaded.config
    choice = streaming_choice(cfg, loaded.base_dir)
    if not choice.streams:
        return None
    from ludwig_hpo.data.streaming.checks import check_streamable
    from ludwig_hpo.data.streaming.splits import split_rule
    from ludwig_hpo.execution.streaming.prepare import dataset_files

    check_streamable(cfg)
    files = dataset_files(cfg, loaded.base_dir, split_rule(cfg))
    reserved = plan.max_concurrent * plan.num_workers * plan.cpus_per_worker
    if plan.cluster_cpus - reserved < STREAM_TASK_CPUS:
        raise ResourceError(
            f"a streamed dataset needs {STREAM_TASK_CPUS:g} CPU beside the ranks' for Ray Data's tasks, but "
            f"{plan.max_concurrent} trial(s) at once of {plan.num_workers} worker(s) x {plan.cpus_per_worker:g} "
            f"CPU reserve {reserved:g} of the cluster's {plan.cluster_cpus:g}",
            source=str(loaded.path),
            key="backend.cpus_per_worker",
            fix="lower backend.cpus_per_worker or hyperopt.executor.max_concurrent_trials, or add CPUs",
        )
    return (
        f"data: {cfg.dataset.source}: streamed, {len(files.paths)} {files.format} file(s) "
        f"({size_text(files.bytes)}; {choice.why}), schemas and columns checked; hpo sweep splits and fits the rows"
    )


def in_memory_line(loaded: LoadedSweep) -> str | None:
    """The line ``hpo validate`` prints of a dataset file loaded in memory: why it does not
    stream (``dataset.streaming: false``, or ``auto`` and its size against the threshold);
    None for a bundled dataset or one that streams. Driver; a stat."""
    cfg = loaded.config
    choice = streaming_choice(cfg, loaded.base_dir)
    if choice.streams or cfg.dataset.source.startswith("sklearn:"):
        return None
    return f"data: {cfg.dataset.source}: loaded in memory ({choice.why})"
