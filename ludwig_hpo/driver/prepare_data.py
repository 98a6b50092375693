"""The sweep's data, prepared before the output folder exists: read and preprocessed in memory
(:func:`~ludwig_hpo.data.prepare`), or, for a dataset ``dataset.streaming`` streams, read,
split and fitted with Ray Data once the cluster is up
(:func:`~ludwig_hpo.execution.streaming.prepare.prepare_streamed`; what a streamed sweep cannot
do yet is refused before, by :mod:`.streamed_checks`). Driver process only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ludwig_hpo.config.backend import unused_key_notes
from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.data import PreparedData, batch_size_note, dataset_folder, load_dataframe, prepare
from ludwig_hpo.data.streaming.record import StreamedData
from ludwig_hpo.driver.sweep_run import Prepared
from ludwig_hpo.execution.cluster_start import ClusterStart
from ludwig_hpo.execution.executor import ExecutorChoice
from ludwig_hpo.execution.resources import ResourcePlan
from ludwig_hpo.model.llm_checks import check_base_model_reachable


def prepare_sweep(
    loaded: LoadedSweep,
    plan: ResourcePlan,
    executor: ExecutorChoice,
    starting: ClusterStart | None,
    say: Callable[[str], None],
    *,
    streams: bool,
) -> Prepared:
    """The sweep's data, checked against the model, with the lines saying what was prepared,
    the resources and the executor. ``streams`` (:func:`~.streamed_checks.check_streamed_sweep`): the data is a
    :class:`~ludwig_hpo.data.streaming.record.StreamedData` fitted once ``starting`` (the local
    cluster's start; None: an existing cluster, already connected) has ended.

    Raises:
        UserError: bad data, a model that cannot be built on it.
    """
    cfg = loaded.config
    check_base_model_reachable(cfg, str(loaded.path))  # an llm's tokenizer reads the rows
    t = time.time()
    data: PreparedData | StreamedData
    if streams:
        from ludwig_hpo.execution.streaming.prepare import prepare_streamed

        if starting is not None:
            starting.wait()
        import ray

        from ludwig_hpo.execution.cluster import ray_data_off_the_console
        from ludwig_hpo.execution.streaming.cache import cache_if_fits

        with ray_data_off_the_console():
            data, cache = cache_if_fits(
                prepare_streamed(cfg, loaded.base_dir), int(ray.cluster_resources().get("object_store_memory", 0))
            )
        rows, splits, filled = data.num_rows, data.rows, data.filled
        what = f"streamed from {len(data.sources)} file(s), fitted; {cache.text()}"
    else:
        prepared = prepare(
            load_dataframe(cfg.dataset.source, loaded.base_dir),
            cfg,
            dataset_folder(cfg.dataset.source, loaded.base_dir),
        )
        data, rows, filled = prepared, prepared.num_rows, prepared.filled
        splits = {k: len(v) for k, v in prepared.splits.items()}
        what = "prepared"
    from ludwig_hpo.driver.model_checks import check_model  # torch stays out of the driver

    check_model(cfg, data.meta, str(loaded.path))
    sizes = ", ".join(f"{k} {n}" for k, n in splits.items())
    say(f"data: {cfg.dataset.source}: {rows} rows ({sizes}), {what} in {time.time() - t:.1f}s")
    for line in [f"data: {f.text()}" for f in filled] + batch_size_note(cfg, splits["train"]):
        say(line)
    say(f"resources: {plan.describe()}")
    if (note := plan.concurrency_note()) is not None:
        say(note)
    for line in unused_key_notes(cfg.backend, cfg.hyperopt.executor.kubernetes_namespace):
        say(line)
    say(f"trial executor: {executor.executor} ({executor.reason})")
    return Prepared(data, plan, executor)
