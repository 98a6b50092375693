"""The sweep's finish: ``results.json``, the outcome on the parent run and the report. Driver
process only, once the search and the k-fold re-evaluation have ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.driver.console import activity
from ludwig_hpo.driver.sweep_run import SweepOutput
from ludwig_hpo.results import SweepResult, TrialRecord
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.protocol import Tracker

if TYPE_CHECKING:
    from dashboards.links import RunIds


def report_links(store: Tracker, parent: str) -> tuple[str, RunIds] | None:
    """``(MLflow UI address, each trial's run)`` for the report's links from its trials to
    their runs, when the store is an ``http(s)`` MLflow server (its address is its UI's); None
    for an embedded store, whose UI runs only under ``hpo ui`` (the report then says how to
    get the links). Driver only.

    Raises:
        Exception: the store's error.
    """
    if not store.uri.startswith(("http://", "https://")):
        return None
    from dashboards.links import RunIds

    return store.uri, RunIds(store.experiment_id, store.children_by_tag(parent, layout.TRIAL_ID_TAG))


def finish_sweep(
    output: SweepOutput, result: SweepResult, best: TrialRecord | None, cfg: SweepConfig, console: Console
) -> None:
    """Write ``results.json`` (also an artifact of the parent run), log the sweep's wall time,
    the best trial and the outcome on the parent run, and write the report when
    ``report.enabled`` (its trials link to their MLflow runs when the store is a server: see
    :func:`report_links`). Driver only.

    Raises:
        OSError: a file cannot be written.
        Exception: the store's error.
    """
    from ludwig_hpo.driver.export import log_best_trial
    from ludwig_hpo.driver.outcome import log_sweep_summary
    from ludwig_hpo.results.io import write_result

    paths, store, parent = output.paths, output.store, output.parent
    write_result(result, paths.results)
    store.log_artifact(parent, paths.results)
    if result.wall_time_s is not None:
        store.log_metrics(parent, {layout.SWEEP_WALL_TIME_METRIC: result.wall_time_s}, step=0)
    if best is not None:
        log_best_trial(best, cfg.hyperopt.metric_key, cfg.hyperopt.goal, store, parent)
    log_sweep_summary(result, store, parent)
    if not cfg.report.enabled:
        return
    from dashboards import build_report

    links = report_links(store, parent)
    with activity(console, "writing the report"):
        report = build_report(
            result,
            paths.report,
            paths.hiplot,
            mlflow_ui_url=links[0] if links else None,
            run_ids=links[1] if links else None,
        )
    store.log_artifact(parent, report)
    if paths.hiplot.exists():
        store.log_artifact(parent, paths.hiplot)
