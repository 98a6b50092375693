"""The trials table: one row per trial, the data every other view starts from."""

from __future__ import annotations

import pandas as pd

from ludwig_hpo.results import SweepResult

TRIAL_COLUMNS = (
    "trial_id",
    "status",
    "objective_last",
    "objective_best",
    "epochs",
    "batch_size",
    "wall_time_s",
)


def param_paths(result: SweepResult) -> list[str]:
    """Dotted paths of the searched parameters: declared ones in declaration order, then
    any other path found in a trial's params (sorted)."""
    declared = [p.path for p in result.parameters]
    extra = sorted({path for t in result.trials for path in t.params} - set(declared))
    return declared + extra


def param_column(path: str) -> str:
    """Column name of a parameter in the trials table: its dotted path, or
    ``"params.<path>"`` when the path would clash with a fixed column (e.g. ``"epochs"``)."""
    return f"params.{path}" if path in TRIAL_COLUMNS else path


def trials_table(result: SweepResult) -> pd.DataFrame:
    """One row per trial of the sweep, in start order. Pure: reads ``result`` only.

    Columns: ``trial_id`` (str), ``status`` (str), ``objective_last`` and ``objective_best``
    (float, the sweep's metric in its own units; NaN when nothing was reported), ``epochs``
    (int, number of reported epochs), ``batch_size`` (per-worker, None if unknown),
    ``wall_time_s`` (float seconds, NaN if unknown), then one column per parameter named by
    its dotted path (see :func:`param_column`), holding the sampled value as it is (lists
    and dicts included; None where a trial lacks the parameter).

    A sweep without trials gives an empty frame with these columns.
    """
    paths = param_paths(result)
    trials = result.trials
    columns: dict[str, pd.Series] = {
        "trial_id": pd.Series([t.trial_id for t in trials], dtype=object),
        "status": pd.Series([t.status for t in trials], dtype=object),
        "objective_last": pd.Series([_float(t.objective_last) for t in trials], dtype=float),
        "objective_best": pd.Series([_float(t.objective_best) for t in trials], dtype=float),
        "epochs": pd.Series([len(t.history) for t in trials], dtype=int),
        # object keeps ints as ints next to None (a float column would show 64.0)
        "batch_size": pd.Series([t.batch_size for t in trials], dtype=object),
        "wall_time_s": pd.Series([_float(t.wall_time_s) for t in trials], dtype=float),
    }
    for path in paths:
        columns[param_column(path)] = pd.Series([t.params.get(path) for t in trials], dtype=object)
    return pd.DataFrame(columns)


def _float(value: float | None) -> float:
    return float("nan") if value is None else float(value)
