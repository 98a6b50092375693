"""End-to-end: a pretrained Hugging Face text encoder in a real ``hpo sweep`` (Ray Tune, 2-worker
gloo DDP trials on warm worker groups, MLflow). The model is a tiny random BERT saved with
``save_pretrained`` (tests/hf_models.py), given by its folder as a user's hub id or folder is;
the hub is off (``HF_HUB_OFFLINE=1``). Also: a hub id that is neither local nor downloadable
stops ``hpo sweep`` before any trial, in one line."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from ..conftest import SWEEPS
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]

#: Glosses of the slice: every class in each split, a short epoch for a 2-layer BERT on 2 cores.
ROWS_PER_CLASS = 24


def _sweep_file(cwd, model: str) -> None:
    glosses = pd.read_csv(SWEEPS / "data" / "wordnet_glosses.csv")
    glosses.groupby("label").head(ROWS_PER_CLASS).to_csv(cwd / "glosses.csv", index=False)
    raw = {
        "name": "tiny-bert-text",
        "dataset": {"source": "glosses.csv", "split": {"train": 0.7, "validation": 0.15, "test": 0.15, "seed": 1}},
        "input_features": [
            {
                "name": "gloss",
                "type": "text",
                "preprocessing": {"max_sequence_length": 32},
                "encoder": {"type": "bert", "pretrained_model_name_or_path": model, "trainable": True},
            }
        ],
        "output_features": [{"name": "label", "type": "category"}],
        "trainer": {"epochs": 1, "batch_size": 16, "learning_rate": 1.0e-3},
        "backend": {"num_workers": 2},
        "hyperopt": {
            "goal": "maximize",
            "metric": "accuracy",
            "output_feature": "label",
            "executor": {"num_samples": 1},
            "parameters": {"gloss.encoder.reduce_output": {"space": "grid_search", "values": ["cls_pooled", "mean"]}},
        },
    }
    (cwd / "sweep.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")


OFFLINE = {"HF_HUB_OFFLINE": "1"}


def test_a_tiny_bert_folder_is_swept_with_each_reduction(tmp_path, tiny_bert_dir):
    _sweep_file(tmp_path, str(tiny_bert_dir))
    proc = run_cli(
        "sweep",
        "sweep.yaml",
        "--output",
        "results",
        cwd=tmp_path,
        env_extra={**OFFLINE, "LUDWIG_HPO_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    out = tmp_path / "results" / "tiny-bert-text"
    result = json.loads((out / "results.json").read_text())
    reductions = sorted(t["params"]["gloss.encoder.reduce_output"] for t in result["trials"])
    assert reductions == ["cls_pooled", "mean"]
    assert all(t["status"] == "FINISHED" for t in result["trials"]), result["trials"]
    assert 0.0 <= result["test_scores"]["test/label/accuracy"] <= 1.0
    assert (out / "best_model").is_dir()
    assert "Loading weights" not in proc.stderr  # no progress bar per rank and trial


def test_a_hub_model_that_cannot_be_downloaded_stops_the_sweep_before_any_trial(tmp_path):
    _sweep_file(tmp_path, "bert-base-uncased")
    proc = run_cli("sweep", "sweep.yaml", "--output", "results", cwd=tmp_path, timeout=120, env_extra=OFFLINE)
    assert proc.returncode != 0
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1, proc.stderr
    assert "'bert-base-uncased' is neither a local folder nor in the local Hugging Face cache" in error[0]
    assert "needs a network" in error[0]
    assert "starting Ray" not in proc.stdout
