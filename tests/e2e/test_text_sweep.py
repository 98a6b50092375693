"""End-to-end: sweeps/text_classification.yaml, cut to a slice of its WordNet glosses (2
trials of 2 epochs, no k-fold), run by the real ``hpo sweep`` (Ray Tune, 2-worker gloo DDP
trials, MLflow): the text feature is prepared once, the trials train on its token ids, the
best trial is scored on the test split and its model is logged."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from ..conftest import SWEEPS
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]

#: Rows of the slice: enough for every class in each split.
ROWS = 480


@pytest.fixture(scope="module")
def text_sweep(tmp_path_factory):
    """The shipped text sweep on ``ROWS`` glosses; returns (process, output folder)."""
    cwd = tmp_path_factory.mktemp("text")
    pd.read_csv(SWEEPS / "data" / "wordnet_glosses.csv").head(ROWS).to_csv(cwd / "glosses.csv", index=False)
    raw = yaml.safe_load((SWEEPS / "text_classification.yaml").read_text())
    raw["dataset"]["source"] = "glosses.csv"
    raw["trainer"]["epochs"] = 2
    raw["hyperopt"]["executor"]["num_samples"] = 2
    raw["hyperopt"]["scheduler"] = {"type": "fifo"}
    raw.pop("kfold")
    (cwd / "text.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    proc = run_cli(
        "sweep", "text.yaml", "--output", "results", cwd=cwd, env_extra={"LUDWIG_HPO_CACHE_DIR": str(cwd / "cache")}
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd / "results" / raw["name"]


def test_the_text_sweep_trains_and_scores_the_best_trial_on_the_test_split(text_sweep):
    proc, out = text_sweep
    assert f"{ROWS} rows (train 336, validation 72, test 72)" in proc.stdout
    result = json.loads((out / "results.json").read_text())
    assert len(result["trials"]) == 2
    assert all(t["status"] == "FINISHED" for t in result["trials"]), result["trials"]
    accuracy = result["test_scores"]["test/label/accuracy"]
    assert 0.0 <= accuracy <= 1.0
    best = yaml.safe_load((out / "best_model" / "config.yaml").read_text())
    assert [(f["name"], f["type"]) for f in best["input_features"]] == [("gloss", "text")]
