"""A sweep read back from MLflow alone: the client side of the report source.

:func:`fetch_sweep_runs` finds the sweep's parent run (by run id, by experiment name, or in a
sweep output folder's embedded store) and snapshots it and every child run (tags, params, full
per-epoch metric histories) as :class:`~dashboards.runs.RunSnapshot` records, with the search
space artifact; :func:`load_sweep_result` then turns them into the report's
:class:`~ludwig_hpo.results.SweepResult` (:func:`dashboards.runs.sweep_from_runs`, pure). A store
that cannot be reached or read is one :class:`~ludwig_hpo.errors.TrackingError` naming the fix.
Runs in the process that builds the report (the sweep driver or ``hpo report``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashboards.links import RunIds
from dashboards.runs import RunSnapshot, sweep_from_runs, trial_run_ids
from ludwig_hpo.errors import TrackingError
from ludwig_hpo.results import SweepResult
from ludwig_hpo.results.records import parse_generated
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.names import name_of_key

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient


def fetch_sweep_runs(
    uri: str,
    *,
    experiment: str | None = None,
    run_id: str | None = None,
    output_dir: Path | None = None,
) -> tuple[RunSnapshot, list[RunSnapshot], dict[str, Any] | None]:
    """Read one sweep's parent run, its child runs and its search space from the store.

    The parent is ``run_id``; else the latest parent run of ``experiment`` (a run without a
    parent that logged the sweep's ``metric`` and ``goal`` params); else (``output_dir``) the latest parent run whose
    ``output_dir`` tag is that folder, or the latest parent run in the store.

    Returns:
        ``(parent, children, space)``; ``space`` is None when ``search_space.json`` cannot
        be read (e.g. the artifacts were not copied with the store).

    Raises:
        TrackingError: the store cannot be reached, or the experiment / run does not exist
            or holds no sweep.
    """
    client = _client(uri)
    try:
        if run_id:
            parent_run = _get_run(client, uri, run_id)
            experiment_ids = [parent_run.info.experiment_id]
        else:
            experiment_ids = _experiment_ids(client, uri, experiment)
            parent_run = _latest_parent(client, uri, experiment_ids, experiment, output_dir)
        parent = _snapshot(client, parent_run, with_history=False)
        children = [
            _snapshot(client, run, with_history=True)
            for run in _search_all(client, experiment_ids, f"tags.`{layout.PARENT_RUN_ID_TAG}` = '{parent.run_id}'")
        ]
    except TrackingError:
        raise
    except Exception as e:  # connection errors, a malformed store...
        raise _store_error(uri, e) from None
    return parent, children, _search_space(client, parent.run_id)


def load_sweep_result(
    uri: str,
    *,
    experiment: str | None = None,
    run_id: str | None = None,
    output_dir: Path | None = None,
) -> SweepResult:
    """The sweep's :class:`~ludwig_hpo.results.SweepResult` rebuilt from its MLflow runs alone:
    :func:`fetch_sweep_runs` then :func:`~dashboards.runs.sweep_from_runs`. Arguments as for
    :func:`fetch_sweep_runs`.

    Raises:
        TrackingError: see :func:`fetch_sweep_runs`.
    """
    parent, children, space = fetch_sweep_runs(uri, experiment=experiment, run_id=run_id, output_dir=output_dir)
    result = sweep_from_runs(parent, children, space, tracking_uri=uri)
    return _with_generated(uri, result, trial_run_ids(parent, children))


def load_sweep_report(
    uri: str,
    *,
    experiment: str | None = None,
    run_id: str | None = None,
    output_dir: Path | None = None,
) -> tuple[SweepResult, RunIds]:
    """:func:`load_sweep_result` and the MLflow run of each trial (the report's links to the
    MLflow UI). Arguments and errors as for :func:`fetch_sweep_runs`."""
    parent, children, space = fetch_sweep_runs(uri, experiment=experiment, run_id=run_id, output_dir=output_dir)
    run_ids = trial_run_ids(parent, children)
    return _with_generated(uri, sweep_from_runs(parent, children, space, tracking_uri=uri), run_ids), run_ids


def _client(uri: str) -> MlflowClient:
    for name in ("mlflow", "alembic"):  # schema-migration chatter is not for the console
        logging.getLogger(name).setLevel(logging.WARNING)
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.is_file():  # MLflow would silently create an empty store
            raise TrackingError(
                "the SQLite store does not exist",
                source=uri,
                fix="pass the URI printed by 'hpo sweep' (mlflow: ...) or the sweep's output folder",
            )
    elif uri.startswith(("http://", "https://")):
        from ludwig_hpo.tracking.mlflow_store import check_server

        check_server(uri, key=None, fix="start the server or fix --tracking-uri")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _store_error(uri: str, e: Exception) -> TrackingError:
    first = (str(e).splitlines() or [type(e).__name__])[0][:300]
    return TrackingError(f"cannot read the MLflow store: {first}", source=uri, fix="check --tracking-uri")


def _get_run(client: MlflowClient, uri: str, run_id: str) -> Run:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise TrackingError(
            f"no run with id {run_id!r} in this store",
            source=uri,
            fix="pass the parent run id printed by 'hpo sweep' (or --experiment NAME)",
        ) from None


def _experiment_ids(client: MlflowClient, uri: str, experiment: str | None) -> list[str]:
    if experiment is None:
        return [e.experiment_id for e in client.search_experiments()]
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = [e.name for e in client.search_experiments()]
        raise TrackingError(
            f"no experiment named {experiment!r} in this store"
            + (f" (it has: {', '.join(repr(n) for n in names[:10])})" if names else ""),
            source=uri,
            fix="pass the tracking.experiment of the sweep (default: its name)",
        )
    return [exp.experiment_id]


def _latest_parent(
    client: MlflowClient, uri: str, experiment_ids: list[str], experiment: str | None, output_dir: Path | None
) -> Run:
    # A sweep's parent run is the one run without a parent that logged the sweep's metric.
    parents = [
        r
        for r in _search_all(client, experiment_ids, f"params.{layout.METRIC_PARAM} != ''")
        if layout.PARENT_RUN_ID_TAG not in r.data.tags and layout.GOAL_PARAM in r.data.params
    ]
    if output_dir is not None:
        here = str(Path(output_dir).resolve())
        mine = [r for r in parents if r.data.tags.get(layout.OUTPUT_DIR_TAG) == here]
        parents = mine or parents
    if not parents:
        where = f"experiment {experiment!r}" if experiment else "this store"
        raise TrackingError(
            f"{where} holds no sweep (no parent run with 'metric' and 'goal' params)",
            source=uri,
            fix="run 'hpo sweep' first, or pass --run-id of the sweep's parent run",
        )
    return max(parents, key=lambda r: r.info.start_time or 0)


def _search_all(client: MlflowClient, experiment_ids: list[str], filter_string: str) -> list[Run]:
    runs: list[Run] = []
    token = None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _snapshot(client: MlflowClient, run: Run, with_history: bool) -> RunSnapshot:
    info, data = run.info, run.data
    history: dict[str, list[tuple[int, float]]] = {}
    if with_history:
        for key in data.metrics:
            points: dict[int, tuple[int, float]] = {}
            for m in client.get_metric_history(info.run_id, key):
                # the latest value logged at a step wins (a resumed trial re-logs its epochs)
                if m.step not in points or m.timestamp >= points[m.step][0]:
                    points[m.step] = (m.timestamp, m.value)
            history[name_of_key(key)] = [(step, points[step][1]) for step in sorted(points)]
    return RunSnapshot(
        run_id=info.run_id,
        name=info.run_name or info.run_id,
        status=info.status,
        start_s=info.start_time / 1000 if info.start_time else None,
        end_s=info.end_time / 1000 if info.end_time else None,
        tags={name_of_key(k): v for k, v in data.tags.items()},
        params={name_of_key(k): v for k, v in data.params.items()},
        history=history,
        metrics={k: float(v) for k, v in data.metrics.items()},
        experiment_id=str(info.experiment_id),
    )


def _search_space(client: MlflowClient, run_id: str) -> dict[str, Any] | None:
    text = _artifact_text(client, run_id, layout.SEARCH_SPACE_ARTIFACT)
    if text is None:  # artifacts not reachable: describe parameters from their values
        return None
    try:
        space = json.loads(text)
    except ValueError:
        return None
    return space if isinstance(space, dict) else None


def _with_generated(uri: str, result: SweepResult, run_ids: RunIds) -> SweepResult:
    """``result`` with the generated outputs of the trials the report shows them for (an llm
    sweep's best trials: :func:`~dashboards.generated.generated_trial_ids`), read from each
    trial run's ``generated_sample.json``; a run without one (or unreachable artifacts) keeps none."""
    import dataclasses

    from dashboards.generated import generated_trial_ids

    wanted = [tid for tid in generated_trial_ids(result) if tid in run_ids.by_trial]
    if not wanted:
        return result
    client = _client(uri)
    found = {
        tid: parse_generated(_artifact_text(client, run_ids.by_trial[tid], layout.GENERATED_SAMPLE_ARTIFACT))
        for tid in wanted
    }
    trials = tuple(
        dataclasses.replace(t, generated=found[t.trial_id]) if found.get(t.trial_id) else t for t in result.trials
    )
    return dataclasses.replace(result, trials=trials)


def _artifact_text(client: MlflowClient, run_id: str, name: str) -> str | None:
    """The text of a run's small artifact ``name``, or None when it cannot be read."""
    import os
    import tempfile

    quiet = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(quiet)
    os.environ[quiet] = "false"  # no progress bar on the console for one small file
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run_id, name, tmp)
            return Path(path).read_text(encoding="utf-8")
    except Exception:  # no such artifact, or the store's artifacts are not reachable
        return None
    finally:
        if before is None:
            os.environ.pop(quiet, None)
        else:
            os.environ[quiet] = before


__all__ = ["fetch_sweep_runs", "load_sweep_report", "load_sweep_result"]
