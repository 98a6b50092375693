"""``kfold.select: cv`` in the driver, without Ray: two configurations retrained on
train+validation by the worker loop, k-fold scores in which the second one is clearly better,
and a real embedded MLflow store. The final model exported and logged is the second one's
retrained weights, with its parameters, its test scores and the parent run's tags."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from rich.console import Console

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.driver.final_model import FinalModel
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.driver.state import SweepState
from ludwig_hpo.driver.sweep_run import SweepOutput
from ludwig_hpo.results import EpochRecord, KFoldRecord, TrialRecord
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.mlflow_store import MlflowStore
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.report_keys import MODEL_FILE, MODEL_TRAIN_ROWS

from ..conftest import SWEEPS

EPOCHS = 2


def _retrain(cfg, data, folder: Path) -> tuple[str, dict]:
    """The k-fold test run of ``cfg`` in this process: (its kept folder, its last report)."""
    reports: list[dict] = []

    def report(metrics, ckpt):
        reports.append(dict(metrics))
        if ckpt is not None:
            shutil.copytree(ckpt, folder)

    train_loop(cfg, data, Job("test", epochs=EPOCHS), report)
    return str(folder), reports[-1]


def test_a_significantly_better_cv_mean_makes_its_retrained_model_the_final_one(tmp_path):
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    assert loaded.config.kfold is not None and loaded.config.kfold.select == "cv"
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    params = [{"trainer.learning_rate": 0.002}, {"trainer.learning_rate": 0.05}]
    top = [
        TrialRecord(f"t{i}", "FINISHED", p, 0.9, 0.9, tuple(EpochRecord(e, 0.9) for e in range(1, EPOCHS + 1)))
        for i, p in enumerate(params, 1)
    ]
    retrained, last = {}, {}
    for rank, rec in enumerate(top, 1):
        cfg = resolve_trial_config(loaded.raw, {**rec.params, "trainer.batch_size": 32})
        retrained[rank], last[rank] = _retrain(cfg, data, tmp_path / f"retrain{rank}")
    # fold scores (roc_auc, maximized) in which config #2 beats #1 on every fold
    kfold = (
        KFoldRecord(1, "t1", params[0], (0.90, 0.91), 0.9, "malignant/roc_auc"),
        KFoldRecord(2, "t2", params[1], (0.97, 0.979), 0.95, "malignant/roc_auc"),
    )
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "final", artifact_location=tmp_path / "art")
    try:
        parent = store.start_run("sweep")
        paths = SweepPaths(tmp_path / "out")
        paths.root.mkdir()
        state = SweepState("f", str(loaded.path), parent, store.uri, phase="kfold")
        output = SweepOutput(paths, store, parent, state, resumed=False)
        final = FinalModel(top[0], {}, loaded=loaded, data=data, output=output, console=Console(file=io.StringIO()))
        final.after_search()
        assert not paths.best_weights.exists()  # cv: nothing exported before the k-fold phase
        final.after_kfold(top, kfold, retrained)
        sel = final.selection
        assert sel is not None and (sel.config_rank, sel.trial_id, sel.chosen_by, sel.retrained) == (
            2,
            "t2",
            "cv_mean",
            True,
        )
        rows = len(data.splits["train"]) + len(data.splits["validation"])
        assert (sel.epochs, sel.train_rows) == (EPOCHS, rows)
        exported = torch.load(paths.best_weights, weights_only=True)
        kept = torch.load(Path(retrained[2]) / MODEL_FILE, weights_only=True)
        assert exported[MODEL_TRAIN_ROWS] == rows
        assert all(torch.equal(exported["state_dict"][k], v) for k, v in kept["state_dict"].items())
        assert yaml.safe_load(paths.best_config.read_text())["hyperopt"]["parameters"]  # the sweep file's mapping
        assert yaml.safe_load(paths.best_config.read_text())["trainer"]["learning_rate"] == 0.05
        # scored in the driver, the exported weights give the retrained run's own test score
        assert final.test_scores["test/malignant/roc_auc"] == pytest.approx(last[2]["test/malignant/roc_auc"])
        tags = store.client.get_run(parent).data.tags
        assert (tags[layout.FINAL_MODEL_CONFIG_RANK_TAG], tags[layout.FINAL_MODEL_TRIAL_ID_TAG]) == ("2", "t2")
        assert (tags[layout.FINAL_MODEL_SELECT_TAG], tags[layout.FINAL_MODEL_RETRAINED_TAG]) == ("cv", "true")
        assert tags[layout.FINAL_MODEL_TRAIN_ROWS_TAG] == str(rows)
        assert layout.BEST_MODEL_URI_TAG in tags  # the logged model is this one
    finally:
        store.close()
