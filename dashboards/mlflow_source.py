"""A sweep read back from MLflow alone: the parent run and its child runs → :class:`SweepResult`.

Two steps, so the conversion is tested on values without a store:

- :func:`fetch_sweep_runs` (I/O): finds the sweep's parent run (by run id, by experiment
  name, or in a sweep output folder's embedded store) and snapshots it and every child run
  (tags, params, full per-epoch metric histories) as :class:`RunSnapshot` records.
- :func:`sweep_from_runs` (pure): turns those snapshots into the :class:`SweepResult` the
  report is built from: one :class:`TrialRecord` per search trial (status, parameters with
  their original types, per-epoch metrics, final and best value) and one
  :class:`KFoldRecord` per re-evaluated configuration.

What the sweep logs and this module reads: parent run params ``metric``, ``goal``,
``kfold.k``; tags ``best_trial_id``, ``output_dir``, ``objectives`` (a multi-objective
sweep's metrics and goals, JSON); artifact ``search_space.json``. Child
runs (tag ``mlflow.parentRunId``): tags ``trial_id``, ``status``, ``error``,
``stopped_by``; k-fold runs also ``kfold`` (fold index or ``test``), ``config_rank``,
``source_trial_id``, ``batch_size`` (a tag; a param in older stores); params are dotted parameter paths; metrics
``objective`` and ``<split>/<feature>/<metric>`` with ``step`` = epoch.
Runs in the process that builds the report (the sweep driver or ``hpo report``).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from dashboards._format import value_label
from ludwig_hpo.errors import TrackingError
from ludwig_hpo.results import EpochRecord, ParamInfo, SweepResult, TrialRecord
from ludwig_hpo.results.kfold import aggregate_kfold

PARENT_TAG = "mlflow.parentRunId"
SEARCH_SPACE_ARTIFACT = "search_space.json"
OBJECTIVE_METRIC = "objective"
#: Params of a trial run that are not searched parameters.
RUN_PARAMS = frozenset({"batch_size", "global_batch_size", "eval_batch_size", "world_size"})
#: Metrics with a "/" that are not per-epoch split metrics: the wall-time split logged at a
#: trial's end and mutated hyperparameters (PBT).
RUN_METRIC_PREFIXES = ("time/", "hparam/")
_STATUSES = ("FINISHED", "KILLED", "FAILED", "RUNNING")
_STAMP = re.compile(r"-\d{8}-\d{6}$")  # the parent run name is "<sweep name>-<YYYYmmdd-HHMMSS>"


class RunSnapshot(NamedTuple):
    """One MLflow run as read from the store.

    Attributes:
        run_id: MLflow run id.
        name: run name.
        status: MLflow's run status (RUNNING, FINISHED, FAILED, KILLED, SCHEDULED).
        start_s: start time, seconds since the epoch (None if unknown).
        end_s: end time, seconds since the epoch (None while running).
        tags: every tag, values as strings.
        params: every param, values as strings (as logged).
        history: metric key → ``[(step, value), ...]`` in step order (the last value
            logged at a step wins).
    """

    run_id: str
    name: str
    status: str
    start_s: float | None
    end_s: float | None
    tags: dict[str, str]
    params: dict[str, str]
    history: dict[str, list[tuple[int, float]]]


# --------------------------------------------------------------------------- pure part
def param_infos_from_space(space: dict[str, Any]) -> tuple[ParamInfo, ...]:
    """:class:`ParamInfo` of each parameter of a ``search_space.json`` document
    (``{dotted path: {"space": ..., "lower"/"upper" or "categories": ...}}``), in its order."""
    infos = []
    for path, spec in space.items():
        kind = str(spec.get("space", "unknown"))
        categories = spec.get("categories")
        infos.append(
            ParamInfo(
                path=path,
                space=kind,
                log=kind.startswith("log") or kind.startswith("qlog"),
                categories=tuple(categories) if categories is not None else None,
                lower=_maybe_float(spec.get("lower")),
                upper=_maybe_float(spec.get("upper")),
            )
        )
    return tuple(infos)


def parse_param(text: str, info: ParamInfo | None = None) -> Any:
    """A parameter value logged as MLflow text, back in its original type.

    A declared category whose text matches is returned as declared (a list or a dict
    config block, or a string that looks like a number); otherwise JSON text is parsed
    (``"16"`` → 16, ``"0.001"`` → 0.001, ``"[1, 2]"`` → [1, 2]) and anything else stays a
    string.
    """
    try:
        parsed: Any = json.loads(text)
    except (ValueError, TypeError):
        parsed = text
    if info is not None and info.categories is not None:
        for category in info.categories:
            if isinstance(category, str) and category == text:
                return category
        for category in info.categories:
            if value_label(category) == value_label(parsed):
                return category
    return parsed


def sweep_from_runs(
    parent: RunSnapshot,
    children: list[RunSnapshot],
    space: dict[str, Any] | None = None,
    tracking_uri: str = "",
    now_s: float | None = None,
) -> SweepResult:
    """Build the :class:`SweepResult` of one sweep from its MLflow runs. Pure.

    Args:
        parent: the sweep's parent run (params ``metric`` and ``goal`` are required).
        children: every child run: search trials and k-fold/test runs (tag ``kfold``).
        space: the parsed ``search_space.json`` artifact, or None when it could not be read
            (parameters are then described from their values only: no log axes).
        tracking_uri: shown in the report.
        now_s: the time a still-running sweep or trial is measured to (default: now).

    Raises:
        TrackingError: ``parent`` is not a sweep's parent run (no ``metric``/``goal``).
    """
    now_s = time.time() if now_s is None else now_s
    metric = parent.params.get("metric")
    goal = parent.params.get("goal")
    if not metric or goal not in ("minimize", "maximize"):
        raise TrackingError(
            f"run {parent.run_id} is not the parent run of a sweep (it has no 'metric'/'goal' params)",
            fix="pass the parent run id printed by 'hpo sweep' (or --experiment NAME)",
        )
    sign = 1.0 if goal == "minimize" else -1.0
    parameters = param_infos_from_space(space) if space else ()
    declared = {p.path: p for p in parameters}

    search = [c for c in children if "kfold" not in c.tags]
    search.sort(key=lambda c: (c.start_s or 0.0, c.tags.get("trial_id", c.run_id)))
    trials = tuple(_trial(c, metric, sign, declared, now_s, known=set(declared) if declared else None) for c in search)
    if not parameters:
        paths = sorted({p for t in trials for p in t.params})
        parameters = tuple(ParamInfo(p, "unknown") for p in paths)

    kfold_runs = [c for c in children if "kfold" in c.tags and "config_rank" in c.tags]
    kfold = ()
    if kfold_runs:
        folds = {c.tags["kfold"] for c in kfold_runs} - {"test"}
        k = _maybe_int(parent.params.get("kfold.k")) or len(folds)
        feature_metric = metric.split("/", 1)[1] if metric.count("/") >= 2 else metric
        runs = []
        for c in sorted(kfold_runs, key=lambda c: c.start_s or 0.0):
            tags = {**c.tags, "source_trial_id": c.tags.get("source_trial_id", "?")}
            runs.append((tags, _trial(c, None, sign, declared, now_s, known=set(declared) or None)))
        kfold = aggregate_kfold(runs, k, feature_metric)

    best = parent.tags.get("best_trial_id") or _best_trial_id(trials, sign)
    objectives = _objectives(parent)
    pareto: tuple[str, ...] = ()
    if objectives:
        from ludwig_hpo.search.pareto import pareto_trial_ids  # the sweep's own rule (search/ imports optuna)

        pareto = pareto_trial_ids(trials, objectives)
    end = parent.end_s if parent.end_s is not None else now_s
    return SweepResult(
        name=_STAMP.sub("", parent.name) or parent.name,
        metric=metric,
        goal=goal,
        parameters=parameters,
        trials=trials,
        kfold=kfold,
        best_trial_id=best,
        wall_time_s=end - parent.start_s if parent.start_s is not None else None,
        output_dir=parent.tags.get("output_dir", ""),
        tracking_uri=tracking_uri,
        objectives=tuple(k for k, _ in objectives),
        pareto_trial_ids=pareto,
    )


def _objectives(parent: RunSnapshot) -> list[tuple[str, str]]:
    """``[(reported key, goal)]`` of a multi-objective sweep from the parent's ``objectives``
    tag; empty for a single-metric sweep or an unreadable tag (the report then shows the
    metric against cost)."""
    try:
        items = json.loads(parent.tags.get("objectives") or "[]")
        out = [(str(o["metric"]), str(o["goal"])) for o in items]
    except (ValueError, TypeError, KeyError):
        return []
    if len(out) < 2 or any(g not in ("minimize", "maximize") for _, g in out):
        return []
    return out


def _trial(
    run: RunSnapshot,
    metric: str | None,
    sign: float,
    declared: dict[str, ParamInfo],
    now_s: float,
    known: set[str] | None,
) -> TrialRecord:
    """One child run as a trial; ``metric`` None: the objective is the ``objective`` metric."""
    objective = run.history.get(OBJECTIVE_METRIC)
    if metric is not None and metric in run.history:
        objective = run.history[metric]
    objective = objective or []
    by_step: dict[int, dict[str, float]] = {}
    for key, points in run.history.items():
        if "/" in key and not key.startswith(RUN_METRIC_PREFIXES):
            for step, value in points:
                by_step.setdefault(step, {})[key] = value
    history = tuple(
        EpochRecord(epoch=step, objective=value, metrics=by_step.get(step, {})) for step, value in objective
    )
    finite = [h.objective for h in history if math.isfinite(h.objective)]
    status = run.tags.get("status") or run.status
    if status not in _STATUSES:
        status = "RUNNING" if status == "SCHEDULED" else "FAILED"
    params = {
        path: parse_param(text, declared.get(path))
        for path, text in run.params.items()
        if (path in known if known is not None else path not in RUN_PARAMS)
    }
    train_time = run.history.get("train_time_s")
    end = run.end_s if run.end_s is not None else now_s
    return TrialRecord(
        trial_id=run.tags.get("trial_id", run.run_id),
        status=status,
        params=params,
        objective_last=history[-1].objective if history else None,
        objective_best=min(finite, key=lambda v: sign * v) if finite else None,
        history=history,
        batch_size=_maybe_int(run.tags.get("batch_size", run.params.get("batch_size"))),
        wall_time_s=end - run.start_s if run.start_s is not None else None,
        train_time_s=train_time[-1][1] if train_time else None,
        error=run.tags.get("error"),
    )


def _best_trial_id(trials: tuple[TrialRecord, ...], sign: float) -> str | None:
    scored = [t for t in trials if t.objective_best is not None and math.isfinite(t.objective_best)]
    return min(scored, key=lambda t: sign * t.objective_best).trial_id if scored else None


def _maybe_float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _maybe_int(value: Any) -> int | None:
    try:
        return None if value in (None, "", "None") else int(float(value))
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- I/O part
def store_uri_of_dir(results_dir: Path) -> str:
    """The tracking URI of a sweep output folder's embedded store (``DIR/mlflow.db``).

    Raises:
        TrackingError: the folder holds no ``mlflow.db``.
    """
    db = Path(results_dir) / "mlflow.db"
    if not db.is_file():
        raise TrackingError(
            "no mlflow.db in this folder",
            source=str(results_dir),
            fix="pass the output folder printed by 'hpo sweep', or --tracking-uri with --experiment/--run-id",
        )
    return f"sqlite:///{db.resolve()}"


def fetch_sweep_runs(
    uri: str,
    *,
    experiment: str | None = None,
    run_id: str | None = None,
    output_dir: Path | None = None,
) -> tuple[RunSnapshot, list[RunSnapshot], dict[str, Any] | None]:
    """Read one sweep's parent run, its child runs and its search space from the store.

    The parent is ``run_id``; else the latest parent run of ``experiment`` (a run without
    ``mlflow.parentRunId``); else (``output_dir``) the latest parent run whose
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
            for run in _search_all(client, experiment_ids, f"tags.`{PARENT_TAG}` = '{parent.run_id}'")
        ]
    except TrackingError:
        raise
    except Exception as e:  # connection errors, a malformed store...
        raise _store_error(uri, e) from None
    return parent, children, _search_space(client, parent.run_id)


def load_sweep(
    uri: str,
    *,
    experiment: str | None = None,
    run_id: str | None = None,
    output_dir: Path | None = None,
) -> SweepResult:
    """:func:`fetch_sweep_runs` then :func:`sweep_from_runs`: the sweep as the report sees it.

    Raises:
        TrackingError: see :func:`fetch_sweep_runs`.
    """
    parent, children, space = fetch_sweep_runs(uri, experiment=experiment, run_id=run_id, output_dir=output_dir)
    return sweep_from_runs(parent, children, space, tracking_uri=uri)


def _client(uri: str):
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


def _get_run(client, uri: str, run_id: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise TrackingError(
            f"no run with id {run_id!r} in this store",
            source=uri,
            fix="pass the parent run id printed by 'hpo sweep' (or --experiment NAME)",
        ) from None


def _experiment_ids(client, uri: str, experiment: str | None) -> list[str]:
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


def _latest_parent(client, uri: str, experiment_ids, experiment, output_dir):
    # A sweep's parent run is the one run without a parent that logged the sweep's metric.
    parents = [
        r
        for r in _search_all(client, experiment_ids, "params.metric != ''")
        if PARENT_TAG not in r.data.tags and "goal" in r.data.params
    ]
    if output_dir is not None:
        here = str(Path(output_dir).resolve())
        mine = [r for r in parents if r.data.tags.get("output_dir") == here]
        parents = mine or parents
    if not parents:
        where = f"experiment {experiment!r}" if experiment else "this store"
        raise TrackingError(
            f"{where} holds no sweep (no parent run with 'metric' and 'goal' params)",
            source=uri,
            fix="run 'hpo sweep' first, or pass --run-id of the sweep's parent run",
        )
    return max(parents, key=lambda r: r.info.start_time or 0)


def _search_all(client, experiment_ids, filter_string: str) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _snapshot(client, run, with_history: bool) -> RunSnapshot:
    info, data = run.info, run.data
    history: dict[str, list[tuple[int, float]]] = {}
    if with_history:
        for key in data.metrics:
            points: dict[int, tuple[int, float]] = {}
            for m in client.get_metric_history(info.run_id, key):
                # the latest value logged at a step wins (a resumed trial re-logs its epochs)
                if m.step not in points or m.timestamp >= points[m.step][0]:
                    points[m.step] = (m.timestamp, m.value)
            history[key] = [(step, points[step][1]) for step in sorted(points)]
    return RunSnapshot(
        run_id=info.run_id,
        name=info.run_name or info.run_id,
        status=info.status,
        start_s=info.start_time / 1000 if info.start_time else None,
        end_s=info.end_time / 1000 if info.end_time else None,
        tags=dict(data.tags),
        params=dict(data.params),
        history=history,
    )


def _search_space(client, run_id: str) -> dict[str, Any] | None:
    import os
    import tempfile

    quiet = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(quiet)
    os.environ[quiet] = "false"  # no progress bar on the console for one small file
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run_id, SEARCH_SPACE_ARTIFACT, tmp)
            space = json.loads(Path(path).read_text())
    except Exception:  # artifacts not reachable: describe parameters from their values
        return None
    finally:
        if before is None:
            os.environ.pop(quiet, None)
        else:
            os.environ[quiet] = before
    return space if isinstance(space, dict) else None


__all__ = [
    "RunSnapshot",
    "fetch_sweep_runs",
    "load_sweep",
    "param_infos_from_space",
    "parse_param",
    "store_uri_of_dir",
    "sweep_from_runs",
]
