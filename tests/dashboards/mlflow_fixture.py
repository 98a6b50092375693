"""A small sweep written into a real SQLite MLflow store by the product's own writer
(:class:`ludwig_hpo.tracking.mlflow_store.MlflowStore`), with the runs, tags, params and metrics a sweep
logs: a parent run, five search trials (finished, stopped early, failed, running) and the
k-fold re-evaluation of two configurations (3 folds + test each, one failed fold)."""

from __future__ import annotations

import json
from pathlib import Path

from ludwig_hpo.tracking import layout as L
from ludwig_hpo.tracking.mlflow_store import MlflowStore

EXPERIMENT = "digits-cnn"
METRIC = "validation/label/loss"
EVIL = "<script>alert(1)</script>"
SPACE = {
    "trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1},
    "image.encoder.num_layers": {"space": "randint", "lower": 1, "upper": 4},
    "trainer.optimizer": {
        "space": "choice",
        "categories": ["adam", {"type": "sgd", "momentum": 0.9}, [1, 2], EVIL, "16"],
    },
}
# trial id -> (params, per-epoch losses, status, tags)
TRIALS = {
    "t_00000": (
        {"trainer.learning_rate": 1e-3, "image.encoder.num_layers": 2, "trainer.optimizer": "adam"},
        [0.9, 0.5, 0.4],
        "FINISHED",
        {},
    ),
    "t_00001": (
        {
            "trainer.learning_rate": 3e-2,
            "image.encoder.num_layers": 1,
            "trainer.optimizer": {"type": "sgd", "momentum": 0.9},
        },
        [1.2],
        "KILLED",
        {L.STOPPED_BY_TAG: L.STOPPED_BY_SCHEDULER, L.STOPPED_AT_EPOCH_TAG: 1},
    ),
    "t_00002": (
        {"trainer.learning_rate": 2e-4, "image.encoder.num_layers": 3, "trainer.optimizer": [1, 2]},
        [],
        "FAILED",
        {L.ERROR_TAG: "RuntimeError: boom"},
    ),
    "t_00003": (
        {"trainer.learning_rate": 5e-3, "image.encoder.num_layers": 3, "trainer.optimizer": EVIL},
        [0.8, 0.3, 0.35],
        "FINISHED",
        {},
    ),
    "t_00004": (
        {"trainer.learning_rate": 7e-3, "image.encoder.num_layers": 2, "trainer.optimizer": "16"},
        [0.7],
        "RUNNING",
        {},
    ),
}
# config rank -> (source trial, fold scores (None: failed), test score)
KFOLD = {1: ("t_00003", [0.31, 0.29, 0.36], 0.33), 2: ("t_00000", [0.41, None, 0.44], 0.47)}
K = 3
#: the sweep's own wall time, as the sweep logs it on the parent run
WALL_TIME_S = 151.25
#: why the search ended early, as the sweep tags its parent run
STOP_REASON = "time budget reached after 5 of 8 trials"


def write_store(root: Path) -> tuple[str, str]:
    """Write the sweep into ``root/mlflow.db``; returns ``(tracking uri, parent run id)``."""
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{(root / 'mlflow.db').resolve()}"
    store = MlflowStore(uri, EXPERIMENT, artifact_location=root / "mlartifacts")
    parent = store.start_run(
        f"{EXPERIMENT}-20260101-120000",
        tags={L.OUTPUT_DIR_TAG: str(root.resolve())},
        params={
            L.METRIC_PARAM: METRIC,
            L.GOAL_PARAM: "minimize",
            L.KFOLD_K_PARAM: K,
            L.KFOLD_TOP_K_PARAM: 2,
            L.EPOCHS_PARAM: 3,
        },
    )
    store.log_text(parent, json.dumps(SPACE, indent=2), L.SEARCH_SPACE_ARTIFACT)
    for tid, (params, losses, status, tags) in TRIALS.items():
        run = store.start_run(
            L.trial_run_name(tid),
            parent_id=parent,
            tags={L.TRIAL_ID_TAG: tid, L.PHASE_TAG: L.PHASE_SEARCH},
            params=params,
        )
        if losses:
            store.log_params(run, {"batch_size": 64, "world_size": 2})
        for epoch, loss in enumerate(losses, start=1):
            store.log_metrics(
                run,
                {
                    METRIC: loss,
                    L.OBJECTIVE_METRIC: loss,
                    "train/combined/running_loss": loss + 0.1,
                    "validation/label/accuracy": 1 - loss / 2,
                    "train_time_s": 2.0 * epoch,
                },
                step=epoch,
            )
        if status != "RUNNING":
            store.set_tags(run, {L.STATUS_TAG: status, **tags})
            store.end_run(run, status)
    for rank, (tid, folds, test) in KFOLD.items():
        params = TRIALS[tid][0]
        for fold, score in [*enumerate(folds), (L.KFOLD_TEST, test)]:
            run = store.start_run(
                f"config{rank}-{fold}",
                parent_id=parent,
                params=params,
                tags={
                    L.PHASE_TAG: L.PHASE_KFOLD,
                    L.KFOLD_TAG: fold,
                    L.CONFIG_RANK_TAG: rank,
                    L.SOURCE_TRIAL_ID_TAG: tid,
                    L.TRIAL_ID_TAG: f"k{rank}_{fold}",
                },
            )
            split = "test" if fold == L.KFOLD_TEST else "fold"
            status = "FAILED" if score is None else "FINISHED"
            if score is not None:
                for epoch in (1, 2):
                    value = score + (0.2 if epoch == 1 else 0.0)
                    store.log_metrics(run, {L.OBJECTIVE_METRIC: value, f"{split}/label/loss": value}, step=epoch)
            store.set_tags(run, {L.STATUS_TAG: status})
            store.end_run(run, status)
    store.set_tags(parent, {L.BEST_TRIAL_ID_TAG: "t_00003", L.STOP_REASON_TAG: STOP_REASON})
    store.log_metrics(parent, {L.SWEEP_WALL_TIME_METRIC: WALL_TIME_S}, step=0)
    store.end_run(parent, "FINISHED")
    return uri, parent
