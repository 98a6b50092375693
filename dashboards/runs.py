"""A sweep's MLflow runs, as read from the store, turned into the :class:`SweepResult` the report
is built from. Pure: no store, no I/O (:mod:`dashboards.mlflow_source` reads the runs).

The names read here (params, tags, metrics of the parent run and its child runs) are those
the sweep writes, from :mod:`ludwig_hpo.tracking.layout`: the parent's params ``metric``,
``goal``, ``kfold.k`` and tags ``best_trial_id``, ``output_dir``, ``objectives``, ``stop_reason``; each child's
tags ``trial_id``, ``status``, ``stopped_by``, ``stopped_at_epoch``, ``error``, ``batch_size`` (read from the params when no tag holds it), k-fold runs'
``kfold``, ``config_rank``, ``source_trial_id``; params are dotted parameter paths; metrics
``objective`` and ``<split>/<feature>/<metric>`` with ``step`` = epoch. Runs in the process
that builds the report (the sweep driver or ``hpo report``).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, NamedTuple

from dashboards._format import value_label
from dashboards.links import RunIds
from ludwig_hpo.errors import TrackingError
from ludwig_hpo.results import EpochRecord, KFoldRecord, ParamInfo, SweepResult, TrialRecord
from ludwig_hpo.results.kfold import aggregate_kfold
from ludwig_hpo.results.records import Goal, TrialStatus
from ludwig_hpo.results.selection import selection_from_tags
from ludwig_hpo.tracking import layout
from ludwig_hpo.train.report_keys import TRAIN_TIME_S

_STATUSES: tuple[TrialStatus, ...] = ("FINISHED", "KILLED", "FAILED", "RUNNING")
_GOALS: tuple[Goal, ...] = ("minimize", "maximize")


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
        metrics: each metric's latest value (read for the parent run, whose histories are
            not fetched).
        experiment_id: the MLflow experiment holding the run.
    """

    run_id: str
    name: str
    status: str
    start_s: float | None
    end_s: float | None
    tags: dict[str, str]
    params: dict[str, str]
    history: dict[str, list[tuple[int, float]]]
    metrics: dict[str, float] = {}
    experiment_id: str = ""


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
    metric = parent.params.get(layout.METRIC_PARAM)
    goal = _goal(parent.params.get(layout.GOAL_PARAM))
    if not metric or goal is None:
        raise TrackingError(
            f"run {parent.run_id} is not the parent run of a sweep (it has no 'metric'/'goal' params)",
            fix="pass the parent run id printed by 'hpo sweep' (or --experiment NAME)",
        )
    sign = 1.0 if goal == "minimize" else -1.0
    parameters = param_infos_from_space(space) if space else ()
    declared = {p.path: p for p in parameters}

    # a child run of kind ``sweep`` is no trial: ``hpo train --from-sweep`` nests its runs under the sweep
    search = [
        c
        for c in children
        if layout.KFOLD_TAG not in c.tags and c.tags.get(layout.RUN_KIND_TAG) != layout.RUN_KIND_SWEEP
    ]
    search.sort(key=lambda c: (c.start_s or 0.0, c.tags.get(layout.TRIAL_ID_TAG, c.run_id)))
    trials = tuple(_trial(c, metric, sign, declared, now_s, known=set(declared) if declared else None) for c in search)
    if not parameters:
        paths = sorted({p for t in trials for p in t.params})
        parameters = tuple(ParamInfo(p, "unknown") for p in paths)

    kfold_runs = [c for c in children if layout.KFOLD_TAG in c.tags and layout.CONFIG_RANK_TAG in c.tags]
    kfold: tuple[KFoldRecord, ...] = ()
    if kfold_runs:
        folds = {c.tags[layout.KFOLD_TAG] for c in kfold_runs} - {layout.KFOLD_TEST}
        k = _maybe_int(parent.params.get(layout.KFOLD_K_PARAM)) or len(folds)
        feature_metric = metric.split("/", 1)[1] if metric.count("/") >= 2 else metric
        runs = []
        for c in sorted(kfold_runs, key=lambda c: c.start_s or 0.0):
            tags = {**c.tags, layout.SOURCE_TRIAL_ID_TAG: c.tags.get(layout.SOURCE_TRIAL_ID_TAG, "?")}
            runs.append((tags, _trial(c, None, sign, declared, now_s, known=set(declared) or None)))
        kfold = aggregate_kfold(runs, k, feature_metric)

    best = parent.tags.get(layout.BEST_TRIAL_ID_TAG) or _best_trial_id(trials, sign)
    objectives = layout.parse_objectives_tag(parent.tags.get(layout.OBJECTIVES_TAG))
    pareto: tuple[str, ...] = ()
    if objectives:
        from ludwig_hpo.search.pareto import pareto_trial_ids  # the sweep's own rule (search/ imports optuna)

        pareto = pareto_trial_ids(trials, objectives)
    return SweepResult(
        name=layout.sweep_name_of(parent.name),
        metric=metric,
        goal=goal,
        parameters=parameters,
        trials=trials,
        kfold=kfold,
        best_trial_id=best,
        wall_time_s=sweep_wall_time(parent, now_s),
        output_dir=parent.tags.get(layout.OUTPUT_DIR_TAG, ""),
        tracking_uri=tracking_uri,
        objectives=tuple(k for k, _ in objectives),
        pareto_trial_ids=pareto,
        stop_reason=parent.tags.get(layout.STOP_REASON_TAG) or None,
        selection=selection_from_tags(parent.tags, kfold),
    )


def sweep_wall_time(parent: RunSnapshot, now_s: float) -> float | None:
    """The sweep's wall time (seconds): the one the sweep measured and logged
    (:data:`~ludwig_hpo.tracking.layout.SWEEP_WALL_TIME_METRIC`, the same as ``results.json``
    and the console); for a sweep still running (or one that logged none), its parent run's
    time so far."""
    logged = parent.metrics.get(layout.SWEEP_WALL_TIME_METRIC)
    if logged is not None and math.isfinite(logged):
        return float(logged)
    if parent.start_s is None:
        return None
    return (parent.end_s if parent.end_s is not None else now_s) - parent.start_s


def trial_run_ids(parent: RunSnapshot, children: list[RunSnapshot]) -> RunIds:
    """The MLflow run of each search trial of the sweep (for the report's links). Pure."""
    search = [c for c in children if layout.KFOLD_TAG not in c.tags]
    return RunIds(parent.experiment_id, {c.tags.get(layout.TRIAL_ID_TAG, c.run_id): c.run_id for c in search})


def _goal(text: str | None) -> Goal | None:
    return next((g for g in _GOALS if g == text), None)


def _status(run: RunSnapshot) -> TrialStatus:
    """The sweep's status tag, else MLflow's (SCHEDULED reads as RUNNING, anything else as FAILED)."""
    status = run.tags.get(layout.STATUS_TAG) or run.status
    known = next((s for s in _STATUSES if s == status), None)
    if known is not None:
        return known
    return "RUNNING" if status == "SCHEDULED" else "FAILED"


def _trial(
    run: RunSnapshot,
    metric: str | None,
    sign: float,
    declared: dict[str, ParamInfo],
    now_s: float,
    known: set[str] | None,
) -> TrialRecord:
    """One child run as a trial; ``metric`` None: the objective is the ``objective`` metric."""
    objective = run.history.get(layout.OBJECTIVE_METRIC)
    if metric is not None and metric in run.history:
        objective = run.history[metric]
    objective = objective or []
    by_step: dict[int, dict[str, float]] = {}
    for key, points in run.history.items():
        if layout.is_score_metric(key):
            for step, value in points:
                by_step.setdefault(step, {})[key] = value
    history = tuple(
        EpochRecord(epoch=step, objective=value, metrics=by_step.get(step, {})) for step, value in objective
    )
    finite = [h.objective for h in history if math.isfinite(h.objective)]
    params = {
        path: parse_param(text, declared.get(path))
        for path, text in run.params.items()
        if (path in known if known is not None else path not in layout.OLDER_RUN_PARAMS)
    }
    train_time = run.history.get(TRAIN_TIME_S)
    end = run.end_s if run.end_s is not None else now_s
    return TrialRecord(
        trial_id=run.tags.get(layout.TRIAL_ID_TAG, run.run_id),
        status=_status(run),
        params=params,
        objective_last=history[-1].objective if history else None,
        objective_best=min(finite, key=lambda v: sign * v) if finite else None,
        history=history,
        batch_size=_maybe_int(run.tags.get(layout.BATCH_SIZE_TAG, run.params.get(layout.BATCH_SIZE_TAG))),
        wall_time_s=end - run.start_s if run.start_s is not None else None,
        train_time_s=train_time[-1][1] if train_time else None,
        error=run.tags.get(layout.ERROR_TAG),
        stopped_by=run.tags.get(layout.STOPPED_BY_TAG) or None,
        stopped_at_epoch=_maybe_int(run.tags.get(layout.STOPPED_AT_EPOCH_TAG)),
    )


def _best_trial_id(trials: tuple[TrialRecord, ...], sign: float) -> str | None:
    scored = [(t.objective_best, t.trial_id) for t in trials if t.objective_best is not None]
    finite = [(v, tid) for v, tid in scored if math.isfinite(v)]
    return min(finite, key=lambda s: sign * s[0])[1] if finite else None


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


__all__ = [
    "RunSnapshot",
    "param_infos_from_space",
    "parse_param",
    "sweep_from_runs",
    "sweep_wall_time",
    "trial_run_ids",
]
