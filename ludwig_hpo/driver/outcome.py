"""The sweep's outcome on its parent run, where MLflow's runs table and run page show it: the
best trial's scores, the k-fold mean ± 95 % confidence interval and the test score of each top
configuration (metrics), and a markdown description (MLflow's ``mlflow.note.content``). Driver
process only, at the sweep's end (what the console prints then is :mod:`ludwig_hpo.driver.summary`).
"""

from __future__ import annotations

import math
from typing import Any

from ludwig_hpo.results import SweepResult, TrialRecord
from ludwig_hpo.results.kfold import best_epoch
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.protocol import Tracker


def summary_metrics(result: SweepResult) -> dict[str, float]:
    """The parent run's metrics of the sweep's outcome (step 0), by name (pure):
    ``best/<split>/<feature>/<metric>`` for each score of the best trial at its best epoch
    except the sweep's metric (``best/<metric>`` holds it already), and per re-evaluated
    configuration ``kfold/<rank>/mean``, ``kfold/<rank>/ci95`` (half-width of the 95 % t
    interval; two folds at least) and ``kfold/<rank>/test``, and the best trial's scores on the
    test split (``test/<feature>/<metric>``, ``test/combined/loss``). Non-finite values are left out."""
    from dashboards.kfold import t_interval

    out: dict[str, float] = {}
    best = _best(result)
    if best is not None:
        epoch = best_epoch(best)
        scores = next((h.metrics for h in best.history if h.epoch == epoch), {})
        out.update({layout.best_metric(k): float(v) for k, v in scores.items() if k != result.metric})
    out.update({k: float(v) for k, v in result.test_scores.items() if k.startswith(layout.TEST_SCORE_PREFIX)})
    for kf in result.kfold:
        folds = [float(v) for v in kf.fold_scores if math.isfinite(v)]
        if folds:
            out[layout.kfold_metric(kf.config_rank, layout.KFOLD_MEAN)] = sum(folds) / len(folds)
        interval = t_interval(folds)
        if interval is not None and all(math.isfinite(v) for v in interval):
            out[layout.kfold_metric(kf.config_rank, layout.KFOLD_CI95)] = (interval[1] - interval[0]) / 2
        if kf.test_score is not None:
            out[layout.kfold_metric(kf.config_rank, layout.KFOLD_TEST_SCORE)] = float(kf.test_score)
    return {k: v for k, v in out.items() if math.isfinite(v)}


def _best(result: SweepResult) -> TrialRecord | None:
    return next((t for t in result.trials if t.trial_id == result.best_trial_id), None)


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v).replace("|", "\\|")


def sweep_description(result: SweepResult) -> str:
    """The parent run's description (markdown, pure): the trials by how they ended, the best
    trial and its score, its configuration (a table of its parameters), and the k-fold and
    test scores of the top configurations."""
    from dashboards.kfold import t_interval

    labels: dict[str, int] = {}
    for t in result.trials:
        labels[t.label] = labels.get(t.label, 0) + 1
    counts = ", ".join(f"{n} {label}" for label, n in labels.items()) or "none"
    lines = [f"**{result.name}**: {len(result.trials)} trials ({counts}); {result.goal} `{result.metric}`.", ""]
    best = _best(result)
    if best is None or best.objective_best is None:
        lines.append("No trial reported a score.")
        return "\n".join(lines)
    lines += [
        f"Best trial `{best.trial_id}`: `{result.metric}` = {best.objective_best:.6g} "
        f"(epoch {best_epoch(best)}, {best.label}).",
        "",
        "| parameter | best value |",
        "|---|---|",
        *(f"| `{path}` | {_value(v)} |" for path, v in best.params.items()),
    ]
    if result.test_scores:
        sel = result.selection
        which = "Its best weights on the test split:"
        if sel is not None and sel.retrained:  # kfold.select: cv
            which = (
                f"The final model, config #{sel.config_rank} (`{sel.trial_id}`) retrained on train+validation "
                f"(`kfold.select: cv`: {sel.reason}), on the test split:"
            )
        lines += ["", which, "", "| score | value |", "|---|---|"]
        lines += [f"| `{k}` | {_value(v)} |" for k, v in sorted(result.test_scores.items())]
    if result.kfold:
        k = max(len(kf.fold_scores) + kf.failed_folds for kf in result.kfold)
        lines += [
            "",
            f"Top configurations re-evaluated with {k}-fold cross-validation on train+validation "
            f"and once on the test split (`{result.kfold[0].metric}`):",
            "",
            "| rank | trial | k-fold mean ± 95 % CI | test |",
            "|---|---|---|---|",
        ]
        for kf in result.kfold:
            folds = [v for v in kf.fold_scores if math.isfinite(v)]
            interval = t_interval(folds)
            mean = f"{sum(folds) / len(folds):.4g}" if folds else "n/a"
            if interval is not None:
                mean += f" ± {(interval[1] - interval[0]) / 2:.2g}"
            test = f"{kf.test_score:.4g}" if kf.test_score is not None else "failed"
            lines.append(f"| {kf.config_rank} | `{kf.trial_id}` | {mean} | {test} |")
    return "\n".join(lines)


def log_sweep_summary(result: SweepResult, store: Tracker, parent: str) -> None:
    """Log :func:`summary_metrics` (step 0), :func:`sweep_description` (the
    :data:`~ludwig_hpo.tracking.layout.DESCRIPTION_TAG`) and the search's stop reason, if any
    (:data:`~ludwig_hpo.tracking.layout.STOP_REASON_TAG`), on the parent run. Driver only."""
    metrics = summary_metrics(result)
    if metrics:
        store.log_metrics(parent, metrics, step=0)
    tags = {layout.DESCRIPTION_TAG: sweep_description(result)}
    if result.stop_reason:
        tags[layout.STOP_REASON_TAG] = result.stop_reason
    store.set_tags(parent, tags)
