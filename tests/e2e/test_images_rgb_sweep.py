"""End-to-end: sweeps/images_rgb.yaml, cut to a slice of its colour icons (2 trials of 2
epochs, no k-fold), run by the real ``hpo sweep`` (Ray Tune, 2-worker gloo DDP trials with
Ludwig's augmentation on each worker's training batches, MLflow): the RGBA files are read as
3-channel uint8 images once, the trials train on them, and the logged best model loads with
MLflow and scores the test rows exactly as the sweep reported."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import yaml

from ..conftest import SWEEPS
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]

#: Rows per icon context in the slice: every context in every split.
PER_CONTEXT = 40


@pytest.fixture(scope="module")
def rgb_sweep(tmp_path_factory):
    """The shipped RGB sweep on a slice of the icons; returns (process, folder, output folder)."""
    cwd = tmp_path_factory.mktemp("rgb")
    rows = pd.read_csv(SWEEPS / "data" / "icons_rgb.csv").groupby("context").head(PER_CONTEXT)
    rows.to_csv(cwd / "icons.csv", index=False)
    (cwd / "icons_rgb").symlink_to(SWEEPS / "data" / "icons_rgb", target_is_directory=True)
    raw = yaml.safe_load((SWEEPS / "images_rgb.yaml").read_text())
    raw["dataset"]["source"] = "icons.csv"
    raw["trainer"]["epochs"] = 2
    raw["hyperopt"]["executor"]["num_samples"] = 2
    raw["hyperopt"]["scheduler"] = {"type": "fifo"}
    raw.pop("kfold")
    (cwd / "rgb.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    proc = run_cli(
        "sweep", "rgb.yaml", "--output", "results", cwd=cwd, env_extra={"LUDWIG_HPO_CACHE_DIR": str(cwd / "cache")}
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd, cwd / "results" / raw["name"]


def raw_experiment(cwd) -> str:
    return yaml.safe_load((cwd / "rgb.yaml").read_text())["tracking"]["experiment"]


def test_the_rgb_sweep_trains_and_its_logged_model_predicts_the_test_rows(rgb_sweep):
    import torch

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.model.serving import flat_inputs

    proc, cwd, out = rgb_sweep
    assert f"data: icons.csv: {PER_CONTEXT * 6} rows" in proc.stdout
    result = json.loads((out / "results.json").read_text())
    assert len(result["trials"]) == 2 and (out / "report.html").is_file()
    accuracy = result["test_scores"]["test/context/accuracy"]
    loaded = load_sweep(cwd / "rgb.yaml")
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config, cwd)
    assert data.inputs["image_path"].dtype == np.uint8 and data.meta["image_path"].shape == (3, 32, 32)
    rows = data.splits["test"]
    x = flat_inputs(data.inputs, rows, ["image_path"], data.meta)
    uri = f"sqlite:///{(out / 'mlflow.db').resolve()}"
    saved = dict(os.environ)
    os.environ["MLFLOW_TRACKING_URI"] = uri  # where models:/ URIs resolve
    try:
        import mlflow.pytorch
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(raw_experiment(cwd))
        (parent,) = client.search_runs([experiment.experiment_id], "tags.run_kind = 'sweep'")
        children = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
        assert len([r for r in children if r.data.tags.get("run_kind") == "trial"]) == 2
        model = mlflow.pytorch.load_model(parent.data.tags["pytorch_model_uri"])
    finally:  # MLflow's torch import also sets KMP_* variables
        os.environ.clear()
        os.environ.update(saved)
    with torch.no_grad():
        p = model(torch.tensor(x.to_numpy(np.float32))).numpy()
    assert p.shape == (len(rows), len(data.meta["context"].vocab))
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-5)
    assert float((p.argmax(axis=1) == data.targets["context"][rows]).mean()) == pytest.approx(accuracy)
