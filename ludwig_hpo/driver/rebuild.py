"""``hpo report``: a sweep's report rebuilt from its MLflow runs alone (or, for a sweep
tracked on a server whose address is not given, from its ``results.json``). Runs in the
command's own process; reads the store, writes the report's two pages."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import DataError
from ludwig_hpo.results import SweepResult

if TYPE_CHECKING:
    from dashboards.links import RunIds


def rebuild_report(
    results_dir: Path | None,
    *,
    experiment: str | None,
    run_id: str | None,
    tracking_uri: str | None,
    output: Path | None,
    mlflow_ui: str | None,
    out: Console,
) -> Path:
    """Rebuild the report of the sweep named by ``results_dir`` (its output folder), the
    latest sweep of ``experiment`` or the parent run ``run_id``, read from ``tracking_uri``
    (default: the folder's ``mlflow.db``, else ``MLFLOW_TRACKING_URI``); print what was read
    and return the written ``report.html`` (in ``output``, else ``results_dir``, else
    ``hpo_reports/<sweep name>``). With ``mlflow_ui`` (the UI's address) its trials link to
    their runs (for a report rebuilt from ``results.json``, found in the store it names).

    Raises:
        DataError: nothing to report on, no such folder, no store to read (or, with
            ``mlflow_ui``, none to find the trials' runs in), or a malformed ``results.json``.
        TrackingError: the store cannot be read or holds no such sweep.
    """
    from dashboards import build_report
    from dashboards.mlflow_source import load_sweep_report
    from ludwig_hpo.tracking.resolve import TRACKING_URI_ENV, existing_store_uri

    if results_dir is None and not (experiment or run_id):
        raise DataError(
            "nothing to report on",
            key="hpo report",
            fix="pass a sweep output folder, --experiment NAME or --run-id PARENT_RUN_ID",
        )
    if results_dir is not None and not results_dir.is_dir():
        raise DataError("no such folder", source=str(results_dir), fix="pass the output folder printed by 'hpo sweep'")
    given = SweepPaths(results_dir) if results_dir is not None else None
    uri = tracking_uri
    if uri is None and given is not None and given.mlflow_db.is_file():
        uri = existing_store_uri(given.root)
    uri = uri or os.environ.get(TRACKING_URI_ENV)
    run_ids = None
    if uri is None and given is not None and given.results.is_file():
        result = read_results_json(given.results)  # a sweep tracked on a server
        if mlflow_ui:
            run_ids = _stored_run_ids(result, given.root)
    elif uri is None:
        raise DataError(
            "no MLflow store to read",
            source=str(results_dir) if results_dir else None,
            fix="pass --tracking-uri (or set MLFLOW_TRACKING_URI), or a sweep output folder",
        )
    else:
        result, run_ids = load_sweep_report(uri, experiment=experiment, run_id=run_id, output_dir=results_dir)
    target = SweepPaths(output or results_dir or Path("hpo_reports") / result.name)
    n = len(result.trials)
    out.print(
        f"{result.name}: {n} trial{'s' if n != 1 else ''}, {len(result.kfold)} k-fold configuration(s)"
        f" from {uri or results_dir}"
    )
    return build_report(result, target.report, target.hiplot, mlflow_ui_url=mlflow_ui, run_ids=run_ids)


def _stored_run_ids(result: SweepResult, folder: Path) -> RunIds:
    """Each trial's MLflow run, read from the store ``results.json`` names (the report's links
    to the MLflow UI, for a report rebuilt from ``results.json``).

    Raises:
        DataError: ``results.json`` names no store, or it cannot be read or holds no such sweep.
    """
    from dashboards.mlflow_source import fetch_sweep_runs, trial_run_ids
    from ludwig_hpo.errors import TrackingError

    def unreachable(why: str) -> DataError:
        return DataError(
            f"--mlflow-ui needs the sweep's MLflow store ({why})", source=str(folder), fix="pass --tracking-uri URI"
        )

    if not result.tracking_uri:
        raise unreachable("results.json names none")
    try:
        parent, children, _ = fetch_sweep_runs(
            result.tracking_uri, output_dir=Path(result.output_dir) if result.output_dir else folder
        )
    except TrackingError as e:
        raise unreachable(f"{result.tracking_uri}: {e.message}") from None
    return trial_run_ids(parent, children)


def read_results_json(path: Path) -> SweepResult:
    """The sweep in ``results.json`` at ``path``.

    Raises:
        DataError: the file is malformed (names the rerun as the fix).
    """
    from ludwig_hpo.results.io import read_result

    try:
        return read_result(path)
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(
            f"results.json is malformed ({type(e).__name__}: {e})", source=str(path), fix="rerun the sweep"
        ) from None
