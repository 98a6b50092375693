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

    Columns: ``trial_id`` (str), ``status`` (str, the state as users read it:
    ``TrialRecord.label``), ``objective_last`` and ``objective_best``
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
        "status": pd.Series([t.label for t in trials], dtype=object),
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


def epochs_table(result: SweepResult) -> pd.DataFrame:
    """Per-epoch curves in long form: one row per (trial, epoch). Pure.

    Columns: ``trial_id``, ``status`` (``TrialRecord.label``), ``epoch`` (int, 1-based), ``objective`` (the sweep's
    metric at that epoch), then one float column per reported metric key
    (``"<split>/<feature>/<metric>"``, NaN where a trial did not report it), sorted.
    """
    keys = sorted({k for t in result.trials for h in t.history for k in h.metrics})
    rows = [
        {
            "trial_id": t.trial_id,
            "status": t.label,
            "epoch": h.epoch,
            "objective": h.objective,
            **{k: h.metrics.get(k, float("nan")) for k in keys},
        }
        for t in result.trials
        for h in t.history
    ]
    return pd.DataFrame(rows, columns=["trial_id", "status", "epoch", "objective", *keys])


def kfold_table(result: SweepResult) -> pd.DataFrame:
    """K-fold and test scores in long form: one row per scored run. Pure.

    Columns: ``config_rank`` (int, 1 = best of the search), ``trial_id`` (the search trial
    re-evaluated), ``fold`` (``"0"``, ``"1"``... or ``"test"``), ``score`` (float, the
    metric ``"<feature>/<metric>"`` on the held-out fold or the test split). Failed runs
    have no row, and folds are numbered among the scored ones (a configuration with a
    failed fold has folds ``"0"`` .. ``"k-2"``).
    """
    rows = []
    for record in sorted(result.kfold, key=lambda r: r.config_rank):
        for fold, score in enumerate(record.fold_scores):
            rows.append(
                {
                    "config_rank": record.config_rank,
                    "trial_id": record.trial_id,
                    "fold": str(fold),
                    "score": float(score),
                }
            )
        if record.test_score is not None:
            rows.append(
                {
                    "config_rank": record.config_rank,
                    "trial_id": record.trial_id,
                    "fold": "test",
                    "score": float(record.test_score),
                }
            )
    return pd.DataFrame(rows, columns=["config_rank", "trial_id", "fold", "score"])
