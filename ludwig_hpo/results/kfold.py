"""K-fold re-evaluation of the top configurations: the jobs to run and how their scores are
gathered. Pure; the sweep runs the jobs as a second Tune run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ludwig_hpo.results import KFoldRecord, TrialRecord
from ludwig_hpo.tracking import layout

if TYPE_CHECKING:
    from ludwig_hpo.results.live import LiveTrial


def kfold_jobs(top: list[TrialRecord], k: int) -> list[dict[str, Any]]:
    """For each configuration (rank 1 first): ``k`` fold jobs, then one test job.

    Each job: ``{"kind": "fold" | "test", "fold": int | None, "params", "epochs",
    "config_rank", "trial_id"}``. ``epochs`` is the epoch at which the search trial reached
    its best value: the number of epochs is chosen on validation like any hyperparameter, and
    each re-run trains that long and is scored at its end.
    """
    jobs = []
    for rank, rec in enumerate(top, 1):
        epochs = best_epoch(rec)
        common = {"params": rec.params, "epochs": epochs, "config_rank": rank, "trial_id": rec.trial_id}
        for fold in range(k):
            jobs.append({"kind": "fold", "fold": fold, **common})
        jobs.append({"kind": "test", "fold": None, **common})
    return jobs


def best_epoch(rec: TrialRecord) -> int | None:
    """The epoch of ``rec``'s best value (``objective_best``), or None without history."""
    for h in rec.history:
        if h.objective == rec.objective_best:
            return h.epoch
    return None


def job_tags(job: dict[str, Any]) -> dict[str, Any]:
    """MLflow tags of a k-fold job: ``kfold`` (fold index or ``test``), ``config_rank``,
    ``source_trial_id``, ``run_kind`` (``kfold`` or ``test``)."""
    test = job["kind"] == "test"
    return {
        layout.PHASE_TAG: layout.PHASE_KFOLD,
        layout.RUN_KIND_TAG: layout.RUN_KIND_TEST if test else layout.RUN_KIND_KFOLD,
        layout.KFOLD_TAG: layout.KFOLD_TEST if test else job["fold"],
        layout.CONFIG_RANK_TAG: job["config_rank"],
        layout.SOURCE_TRIAL_ID_TAG: job["trial_id"],
    }


def job_name(job: dict[str, Any]) -> str:
    """Run name of a k-fold job, e.g. ``config1-fold0`` or ``config1-test``."""
    return f"config{job['config_rank']}-" + ("test" if job["kind"] == "test" else f"fold{job['fold']}")


def aggregate_kfold(runs: Iterable[tuple[dict[str, Any], TrialRecord]], k: int, metric: str) -> tuple[KFoldRecord, ...]:
    """Gather finished k-fold runs into one :class:`KFoldRecord` per configuration.

    Args:
        runs: ``(tags from :func:`job_tags`, record)`` of every k-fold run.
        k: folds per configuration.
        metric: ``"<feature>/<metric>"``.

    A fold's score is the metric at its final epoch (no selection on the held-out fold); a
    run that did not finish counts as a failed fold (or a missing test score).
    """
    by_rank: dict[int, dict[str, Any]] = {}
    for tags, rec in runs:
        slot = by_rank.setdefault(
            int(tags[layout.CONFIG_RANK_TAG]),
            {"folds": {}, "test": None, "trial": tags[layout.SOURCE_TRIAL_ID_TAG], "params": rec.params},
        )
        score = rec.objective_last if rec.status == "FINISHED" else None
        if tags[layout.KFOLD_TAG] == layout.KFOLD_TEST:
            slot["test"] = score
        elif score is not None:
            slot["folds"][int(tags[layout.KFOLD_TAG])] = score
    return tuple(
        KFoldRecord(
            config_rank=r,
            trial_id=s["trial"],
            params=s["params"],
            fold_scores=tuple(s["folds"][f] for f in sorted(s["folds"])),
            test_score=s["test"],
            metric=metric,
            failed_folds=k - len(s["folds"]),
        )
        for r, s in sorted(by_rank.items())
    )


def retrained_weights(trials: Iterable[LiveTrial]) -> dict[int, str]:
    """``{config rank: checkpoint folder}`` of the k-fold phase's finished test runs that kept
    their final weights (``kfold.select: cv``: each configuration trained on train+validation;
    its folder's ``model.pt``). Driver only, from the k-fold monitor's trials."""
    out = {}
    for t in trials:
        if t.tags.get(layout.KFOLD_TAG) == layout.KFOLD_TEST and t.status == "FINISHED" and t.checkpoint:
            out[int(t.tags[layout.CONFIG_RANK_TAG])] = t.checkpoint
    return out
