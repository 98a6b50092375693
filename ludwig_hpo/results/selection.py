"""Which model a sweep with ``kfold`` ends with (``kfold.select``): the rule that picks a
configuration from the k-fold scores, and the record of that choice in ``results.json``.
Pure; the driver applies it after the k-fold phase (:mod:`ludwig_hpo.driver.final_model`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ludwig_hpo.results.records import Goal, KFoldRecord
from ludwig_hpo.tracking import layout

SelectMode = Literal["cv", "search"]
#: ``cv_mean``: the configuration with the best CV mean (the search's best when it has it);
#: ``search_best``: the search's best, by ``select: search`` or because the k-fold scores
#: could not tell another configuration from it.
ChosenBy = Literal["cv_mean", "search_best"]


@dataclass(frozen=True)
class ModelSelection:
    """The sweep's final model: which configuration, by which rule, and how it was trained.

    Attributes:
        select: ``kfold.select`` (``cv`` or ``search``).
        config_rank: the chosen configuration's rank in the search (1 = the search's best).
        trial_id: the search trial whose parameters it has.
        chosen_by: ``cv_mean`` or ``search_best`` (see :data:`ChosenBy`).
        reason: why, in one sentence (CV means, the paired test's p-value and folds).
        cv_means: each re-evaluated configuration's mean fold score, rank order; None where
            a fold did not finish or scored NaN.
        p_value: two-sided p-value of the paired t-test between the best CV mean and the
            search's best over the same folds; None when they are the same configuration or
            the test could not run.
        retrained: True when the final model is the chosen configuration trained on
            train+validation (``select: cv``); False when it is the search trial's own best
            weights (``select: search``, or a retrain that left no weights).
        epochs: epochs the retrained model trained for (its search trial's best epoch), else None.
        train_rows: rows the retrained model trained on, as its training run recorded them
            (train + validation), else None.
        search_test_scores: the search's best trial's best weights on the test split
            (``{"test/<feature>/<metric>": value}``), for comparison with the final model's
            (``SweepResult.test_scores``); the same scores when the final model is those weights.
    """

    select: SelectMode
    config_rank: int
    trial_id: str
    chosen_by: ChosenBy
    reason: str
    cv_means: tuple[float | None, ...] = ()
    p_value: float | None = None
    retrained: bool = False
    epochs: int | None = None
    train_rows: int | None = None
    search_test_scores: dict[str, float] = field(default_factory=dict)


def cv_mean(record: KFoldRecord) -> float | None:
    """The mean of ``record``'s fold scores; None when a fold failed or a score is not finite."""
    scores = record.fold_scores
    if record.failed_folds or not scores or not all(math.isfinite(s) for s in scores):
        return None
    return sum(scores) / len(scores)


def select_configuration(kfold: Sequence[KFoldRecord], goal: Goal, select: SelectMode) -> ModelSelection | None:
    """Choose the configuration the sweep's final model is made of (pure; driver).

    ``search``: the search's best (rank 1). ``cv``: the configuration with the best CV mean
    (ties: the better search rank) when it is the search's best, or when a paired t-test over
    the folds (:func:`~ludwig_hpo.results.paired.paired_test`, 5 %) tells it from the search's
    best; otherwise (not significant, or the search's best lacks a fold) the search's best:
    the simpler rule stands unless the folds say otherwise.

    Args:
        kfold: the k-fold records of the top configurations (any order).
        goal: the sweep's goal (which mean is better).
        select: ``kfold.select``.

    Returns:
        The choice (its ``retrained``, ``epochs``, ``train_rows`` and ``search_test_scores``
        are filled in by the driver), or None when ``kfold`` is empty.
    """
    from ludwig_hpo.results.paired import ALPHA, paired_test

    records = sorted(kfold, key=lambda r: r.config_rank)
    if not records:
        return None
    means = tuple(cv_mean(r) for r in records)
    first = records[0]

    def keep_search_best(reason: str, p: float | None = None) -> ModelSelection:
        return ModelSelection(select, first.config_rank, first.trial_id, "search_best", reason, means, p)

    if select == "search":
        return keep_search_best("kfold.select is search: the search's best trial")
    sign = 1.0 if goal == "minimize" else -1.0
    scored = [(sign * m, r.config_rank, r) for r, m in zip(records, means, strict=True) if m is not None]
    if not scored:
        return keep_search_best("no configuration has every fold scored: the search's best is kept")
    _, _, top = min(scored, key=lambda x: (x[0], x[1]))
    top_mean = means[records.index(top)]
    metric = first.metric
    if top is first:
        reason = f"the search's best has the best CV mean of {metric}, {top_mean:.4g}"
        return ModelSelection(select, first.config_rank, first.trial_id, "cv_mean", reason, means)
    first_mean = means[0]
    if first_mean is None:
        return keep_search_best(
            f"config #{top.config_rank} has the best CV mean of {metric} ({top_mean:.4g}), but a fold of the "
            "search's best did not finish, so the paired test cannot compare them: the search's best is kept"
        )
    test = paired_test(first.config_rank, top.config_rank, list(first.fold_scores), list(top.fold_scores), goal)
    p = test.t_pvalue
    compared = f"{metric} {top_mean:.4g} against {first_mean:.4g} of the search's best (config #{first.config_rank})"
    if p is not None and p < ALPHA:
        return ModelSelection(
            select,
            top.config_rank,
            top.trial_id,
            "cv_mean",
            f"config #{top.config_rank} has the best CV mean, {compared}; paired t-test p = {p:.3g} over {test.n} folds",
            means,
            p,
        )
    shown = "n/a" if p is None else f"{p:.3g}"
    return keep_search_best(
        f"config #{top.config_rank} has the best CV mean, {compared}, but the paired t-test cannot tell "
        f"them apart (p = {shown} over {test.n} folds): the search's best is kept",
        p,
    )


def selection_from_tags(tags: dict[str, str], kfold: Sequence[KFoldRecord]) -> ModelSelection | None:
    """The choice as a parent run's ``final_model.*`` tags hold it (``hpo report`` from
    MLflow), with the CV means recomputed from ``kfold``; the p-value, the retrain's epochs and
    the search's best's test scores are not in tags (None, empty). None without the tags. Pure."""
    select, chosen_by = tags.get(layout.FINAL_MODEL_SELECT_TAG), tags.get(layout.FINAL_MODEL_CHOSEN_BY_TAG)
    rank, trial = tags.get(layout.FINAL_MODEL_CONFIG_RANK_TAG), tags.get(layout.FINAL_MODEL_TRIAL_ID_TAG)
    if select not in ("cv", "search") or chosen_by not in ("cv_mean", "search_best") or not rank or not trial:
        return None
    rows = tags.get(layout.FINAL_MODEL_TRAIN_ROWS_TAG)
    return ModelSelection(
        select="cv" if select == "cv" else "search",
        config_rank=int(rank),
        trial_id=trial,
        chosen_by="cv_mean" if chosen_by == "cv_mean" else "search_best",
        reason=tags.get(layout.FINAL_MODEL_REASON_TAG, ""),
        cv_means=tuple(cv_mean(r) for r in sorted(kfold, key=lambda r: r.config_rank)),
        retrained=tags.get(layout.FINAL_MODEL_RETRAINED_TAG) == "true",
        train_rows=int(rows) if rows and rows.isdigit() else None,
    )
