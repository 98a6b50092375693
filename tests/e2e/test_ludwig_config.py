"""End-to-end: a Ludwig config runs unchanged with ``hpo sweep CONFIG --dataset data.csv``
(fixed split column, type defaults, a '.' parameter of config blocks, a grid over a defaults
path) on a real Ray cluster with 2-worker DDP trials and an embedded MLflow store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ludwig"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]


@pytest.fixture(scope="module")
def ludwig_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("ludwig")
    proc = run_cli(
        "sweep",
        str(FIXTURES / "defaults_and_blocks.yaml"),
        "--dataset",
        str(FIXTURES / "data.csv"),
        "--output",
        "results",
        cwd=cwd,
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd / "results" / "defaults_and_blocks"


def test_runs_with_the_fixed_split_and_the_printed_trial_count(ludwig_sweep):
    proc, _ = ludwig_sweep
    assert "180 rows (train 120, validation 30, test 30)" in proc.stdout
    assert "search: 2 trials (grid of 2 points x num_samples 1)" in proc.stdout


def test_block_and_grid_values_reach_the_trials_intact(ludwig_sweep):
    _, out = ludwig_sweep
    result = json.loads((out / "results.json").read_text())
    trials = result["trials"]
    assert len(trials) == 2
    assert sorted(t["params"]["defaults.number.encoder.output_size"] for t in trials) == [4, 8]
    blocks = yaml.safe_load((FIXTURES / "defaults_and_blocks.yaml").read_text())["hyperopt"]["parameters"]["."]
    for t in trials:
        assert t["params"]["."] in blocks["categories"]
    best = yaml.safe_load((out / "best_model" / "config.yaml").read_text())
    assert best["defaults"]["number"]["encoder"]["type"] == "dense"


def test_the_best_trial_is_scored_on_the_test_split_without_kfold(ludwig_sweep):
    from mlflow.tracking import MlflowClient

    proc, out = ludwig_sweep
    result = json.loads((out / "results.json").read_text())
    assert result["kfold"] == [] and {"test/positive/accuracy", "test/positive/roc_auc"} <= set(result["test_scores"])
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("defaults_and_blocks")
    (parent,) = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("run_kind") == "sweep"]
    assert {k: parent.data.metrics[k] for k in result["test_scores"]} == pytest.approx(result["test_scores"])
    assert f"test split (best weights of trial {result['best_trial_id']})" in proc.stdout


def test_block_parameter_is_readable_in_mlflow(ludwig_sweep):
    from mlflow.tracking import MlflowClient

    _, out = ludwig_sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("defaults_and_blocks")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("phase") == "search"]
    assert len(runs) == 2
    for r in runs:
        assert json.loads(r.data.params["root_block"])["trainer"]["learning_rate"] in (0.01, 0.003)


@pytest.fixture(scope="module")
def image_sweep(tmp_path_factory):
    """The Ludwig image fixture (PNG paths in a CSV, fixed split column) run from another
    folder with one-worker trials."""
    cwd = tmp_path_factory.mktemp("ludwig-images")
    proc = run_cli(
        "sweep",
        str(FIXTURES / "image_digits.yaml"),
        "--dataset",
        str(FIXTURES / "image_digits.csv"),
        "--num-workers",
        "1",
        "--output",
        "results",
        cwd=cwd,
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd / "results" / "image_digits"


def test_image_files_train_with_the_fixed_split(image_sweep):
    proc, out = image_sweep
    assert "150 rows (train 100, validation 25, test 25)" in proc.stdout
    result = json.loads((out / "results.json").read_text())
    assert [t["status"] for t in result["trials"]] == ["FINISHED", "FINISHED"]
    for t in result["trials"]:
        assert [h["epoch"] for h in t["history"]] == [1, 2]
        assert t["history"][-1]["metrics"]["validation/digit/loss"] > 0
    meta = json.loads((out / "best_model" / "preprocessing.json").read_text())
    # (channels, height, width)
    assert meta["image_path"]["type"] == "image" and meta["image_path"]["shape"] == [1, 8, 8]
    assert meta["image_path"]["stats"]["scale"] == 255.0  # 8-bit PNGs
    assert meta["digit"]["vocab"] == [str(d) for d in range(10)]  # Ludwig reads categories as strings
    assert (out / "best_model" / "model.pt").is_file() and (out / "report.html").is_file()


def test_image_sweep_trials_are_mlflow_child_runs(image_sweep):
    from mlflow.tracking import MlflowClient

    _, out = image_sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("image_digits")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("run_kind") == "sweep")
    trials = [r for r in runs if r.data.tags.get("run_kind") == "trial"]
    assert len(trials) == 2 and {r.data.tags["world_size"] for r in trials} == {"1"}
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in trials)
    assert set(trials[0].data.params) == {"trainer.learning_rate", "image_path.encoder.dropout"}


@pytest.fixture(scope="module")
def ludwig_train(tmp_path_factory):
    """``hpo train`` of a Ludwig model config (no name, dataset or hyperopt section: the fixed-split
    fixture without its search) with ``--dataset``, one worker, ``--set`` of its epochs."""
    cwd = tmp_path_factory.mktemp("ludwig-train")
    (cwd / "model.yaml").write_text((FIXTURES / "fixed_split.yaml").read_text().split("\nhyperopt:")[0] + "\n")
    proc = run_cli(
        "train",
        "model.yaml",
        "--dataset",
        str(FIXTURES / "data.csv"),
        "--num-workers",
        "1",
        "--set",
        "trainer.epochs=3",
        "--output",
        "results",
        cwd=cwd,
    )
    assert proc.returncode == 0, f"train failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd / "results" / "model-train"


def test_hpo_train_trains_a_ludwig_model_config_and_scores_it_on_the_test_split(ludwig_train):
    from mlflow.tracking import MlflowClient

    proc, out = ludwig_train
    assert "180 rows (train 120, validation 30, test 30)" in proc.stdout
    assert "done in" in proc.stdout and ": 3 epochs, 1 worker(s)" in proc.stdout
    result = json.loads((out / "results.json").read_text())
    (trial,) = result["trials"]
    assert trial["status"] == "FINISHED" and [h["epoch"] for h in trial["history"]] == [1, 2, 3]
    assert "validation/target/accuracy" in trial["history"][-1]["metrics"]  # validated each epoch
    scores = result["test_scores"]
    assert {"test/target/accuracy", "test/combined/loss"} <= set(scores) and 0 <= scores["test/target/accuracy"] <= 1
    assert f"test split (best weights of trial {trial['trial_id']}): test/combined/loss = " in proc.stdout
    assert (out / "best_model" / "model.pt").is_file() and not (out / "report.html").exists()
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("model")  # the file's stem names it
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("run_kind") == "sweep"]
    (child,) = [r for r in runs if r.data.tags.get("run_kind") == "trial"]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id and child.info.status == "FINISHED"
    assert {k: parent.data.metrics[k] for k in scores} == pytest.approx(scores)
