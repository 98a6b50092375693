"""Which reported scores early stopping and the learning rate's plateau reduction watch, and
in which direction. Pure; every rank resolves the same."""

from __future__ import annotations

from dataclasses import dataclass

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.config.trainer import SPLIT_PREFIX, larger_is_better
from ludwig_hpo.train.report_keys import RUNNING_LOSS


@dataclass(frozen=True)
class Watched:
    """What a run watches.

    Attributes:
        early_stop_key: the score ``trainer.early_stop`` watches
            (``validation/<validation_field>/<validation_metric>``), None when it is off (or
            the run is not a search run).
        early_stop_larger: whether a larger value of it is better.
        plateau_key: the score ``reduce_on_plateau`` watches, None when it is off (or the run
            does not score that split: a test run has no validation split). On the training
            split, the combined loss is the running loss unless the split is scored.
        plateau_larger: whether a larger value of it is better.
        score_train: the whole training split is scored every epoch (``evaluate_training_set``,
            or a plateau watched on a training metric other than the combined loss).
    """

    early_stop_key: str | None
    early_stop_larger: bool
    plateau_key: str | None
    plateau_larger: bool
    score_train: bool


def watched_keys(cfg: SweepConfig, job_kind: str, scored_split: str) -> Watched:
    """The :class:`Watched` scores of a run of ``job_kind`` scoring ``scored_split``."""
    tr = cfg.trainer
    kinds = {f.name: f.type for f in cfg.output_features}
    field = tr.validation_field
    kind = "combined" if field == "combined" else kinds[field]
    early = None
    if job_kind == "search" and tr.early_stop > 0:
        early = f"validation/{field}/{tr.validation_metric}"
    sch = tr.learning_rate_scheduler
    score_train = tr.evaluate_training_set
    plateau = None
    if sch.reduce_on_plateau > 0:
        prefix = SPLIT_PREFIX[sch.reduce_eval_split]
        if prefix == "train":
            if field == "combined" and sch.reduce_eval_metric == "loss" and not score_train:
                plateau = RUNNING_LOSS
            else:
                plateau, score_train = f"train/{field}/{sch.reduce_eval_metric}", True
        elif prefix == scored_split:
            plateau = f"{prefix}/{field}/{sch.reduce_eval_metric}"
    return Watched(
        early_stop_key=early,
        early_stop_larger=larger_is_better(kind, tr.validation_metric),
        plateau_key=plateau,
        plateau_larger=larger_is_better(kind, sch.reduce_eval_metric),
        score_train=score_train,
    )
