"""``hpo sweep`` on a folder of Parquet files, from the CLI in its own process: the driver fits
the streamed dataset with Ray Data once the local cluster is up and hands it to the warm worker
group, whose 2 ranks stream equal shards. Two trials of the tiny breast-cancer sweep, then its
2-fold re-evaluation of the best one; the preprocessing record is the in-memory path's on the
same rows and split."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import PreparedData, load_dataframe, prepare
from ludwig_hpo.train.plan import batches_per_epoch

from ..conftest import SWEEPS
from .test_sweep_cli import run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def _sweep_files(folder):
    """The tiny sweep's rows with a fixed ``split`` column as three Parquet files under
    ``folder/rows`` and as one file; (streamed sweep mapping, in-memory config)."""
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    df = load_dataframe(loaded.config.dataset.source, loaded.base_dir)
    df["split"] = np.random.default_rng(5).choice(3, size=len(df), p=[0.7, 0.15, 0.15])
    (folder / "rows").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        df.iloc[part].to_parquet(folder / "rows" / f"part-{i}.parquet")
    df.to_parquet(folder / "rows.parquet")
    raw = {k: v for k, v in loaded.raw.items() if k != "dataset"}
    # the final model stays the search's best: the test-split checks below score those weights
    raw["kfold"] = {**raw["kfold"], "k": 2, "top_k": 1, "select": "search"}
    raw["preprocessing"] = {"split": {"type": "fixed", "column": "split"}}
    raw["trainer"] = {**raw["trainer"], "batch_size": 32}
    # half a CPU per rank: the 2 ranks leave a CPU of 2 to Ray Data's read and map tasks
    raw["backend"] = {"num_workers": 2, "cpus_per_worker": 0.5}
    raw["hyperopt"] = {**raw["hyperopt"], "executor": {"num_samples": 2, "max_concurrent_trials": 1}}
    memory = SweepConfig.model_validate({**raw, "dataset": {"source": str(folder / "rows.parquet")}})
    return {**raw, "dataset": {"source": "rows"}}, memory


def test_hpo_sweep_streams_a_parquet_folder_through_equal_rank_shards(tmp_path):
    streamed, memory = _sweep_files(tmp_path)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(streamed, sort_keys=False))
    proc = run_cli("sweep", "sweep.yaml", "--output", "results", cwd=tmp_path)
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert "streamed from 3 file(s)" in proc.stdout
    assert "streaming_executor" not in proc.stderr and "Running Dataset" not in proc.stderr  # Ray Data's progress
    out = tmp_path / "results" / "breast-cancer-tiny"

    in_memory = prepare(load_dataframe(memory.dataset.source, None), memory)
    record = json.loads((out / "best_model" / "preprocessing.json").read_text())
    assert record.keys() == in_memory.meta.keys()
    for name, meta in in_memory.meta.items():
        assert record[name]["type"] == meta.type and record[name]["vocab"] == list(meta.vocab), name
        assert record[name]["stats"] == pytest.approx(meta.stats, rel=1e-9, abs=1e-12), name

    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    entries = [e for e in journal if e["experiment"] == "search"]
    assert len(entries) == 2 and all(e["status"] == "FINISHED" for e in entries)
    per_rank = -(-len(in_memory.splits["train"]) // 2)  # the streamed split padded to the 2 ranks
    for e in entries:
        last = e["results"][-1]
        assert last["world_size"] == 2
        assert last["optimizer_steps"] == 2 * batches_per_epoch(per_rank, 32)  # every rank as many batches
    _check_kfold(streamed, tmp_path, out, in_memory)
    _check_test_scores_and_model(proc.stdout, out, memory, in_memory, tmp_path)


def _check_kfold(streamed: dict, tmp_path, out, in_memory) -> None:
    """The k-fold phase ran on the stream: 2 fold runs and a test run of the best configuration
    on the 2 ranks, each fold trained on the train+validation rows outside it (the folds, from
    the rows' seeded hash, add up to train+validation), and its scores in the results and the
    report."""
    from ludwig_hpo.data.origin import DataOrigin
    from ludwig_hpo.data.streaming.fit import batch_partial
    from ludwig_hpo.data.streaming.splits import split_rule
    from ludwig_hpo.execution.streaming.prepare import needed_columns

    cfg = SweepConfig.model_validate(streamed)
    rule = split_rule(cfg)
    rows = pd.read_parquet(tmp_path / "rows.parquet")[needed_columns(cfg, rule)]
    held = batch_partial(rows, cfg, rule, DataOrigin()).fold_rows
    both = len(in_memory.splits["train"]) + len(in_memory.splits["validation"])
    assert len(held) == 2 and sum(held) == both and min(held) > 0
    entries = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    runs = sorted((e for e in entries if e["experiment"] == "kfold"), key=lambda e: e["trial_id"])
    assert [e["status"] for e in runs] == ["FINISHED"] * 3  # fold 0, fold 1, test (grid order)
    for fold, e in enumerate(runs[:2]):
        per_rank = -(-(both - held[fold]) // 2)
        assert e["results"][-1]["world_size"] == 2
        assert e["results"][-1]["optimizer_steps"] == 2 * batches_per_epoch(per_rank, 32)
    assert runs[2]["results"][-1]["optimizer_steps"] == 2 * batches_per_epoch(-(-both // 2), 32)
    (kfold,) = json.loads((out / "results.json").read_text())["kfold"]
    assert len(kfold["fold_scores"]) == 2 and kfold["failed_folds"] == 0 and kfold["test_score"] is not None
    assert all(0.0 <= s <= 1.0 for s in kfold["fold_scores"])
    assert 'id="kfold-vs-test"' in (out / "report.html").read_text()


def _check_test_scores_and_model(stdout: str, out, memory: SweepConfig, in_memory, tmp_path) -> None:
    """The driver scored the best weights on the streamed test split as the same weights score
    the same rows in memory, logged them on the parent run, and logged the raw-row MLflow model
    that ``hpo predict`` loads from the output folder and from the ``models:/`` URI."""
    import torch
    from mlflow.tracking import MlflowClient
    from typer.testing import CliRunner

    from ludwig_hpo.cli import app
    from ludwig_hpo.driver.model_source import resolve_source
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.predictions import output_values
    from ludwig_hpo.model.saved_weights import load_saved_state_dict
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    assert "not scored" not in stdout and "logs no MLflow model" not in stdout
    scores = json.loads((out / "results.json").read_text())["test_scores"]
    assert {"test/malignant/roc_auc", "test/malignant/accuracy", "test/malignant/loss"} <= set(scores)
    assert "test split (best weights of trial " in stdout and "test/malignant/roc_auc = " in stdout
    best = yaml.safe_load((out / "best_model" / "config.yaml").read_text())
    cfg = SweepConfig.model_validate({**best, "dataset": {"source": memory.dataset.source}})
    model = build_model(cfg, in_memory.meta)
    state = torch.load(out / "best_model" / "model.pt", map_location="cpu", weights_only=True)["state_dict"]
    load_saved_state_dict(model, state)
    rows = in_memory.splits["test"]
    want = evaluate(model, cfg, DeviceData(in_memory, torch.device("cpu")), rows, "test", 512)
    assert scores == pytest.approx({k: want[k] for k in scores}, rel=1e-5)

    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parent = next(r for r in runs if r.data.tags.get("run_kind") == "sweep")
    assert {k: parent.data.metrics[k] for k in scores} == pytest.approx(scores)
    tags = parent.data.tags
    assert tags["best_model_uri"].startswith("models:/") and tags["pytorch_model_uri"].startswith("models:/")

    raw = pd.read_parquet(tmp_path / "rows.parquet").iloc[rows[:8]]
    direct = output_values(
        model.eval(), PreparedData({k: v[rows[:8]] for k, v in in_memory.inputs.items()}, {}, {}, (), in_memory.meta)
    )
    for source in (str(out), tags["best_model_uri"]):
        served = resolve_source(source, client.tracking_uri).load()
        got = served.predict(raw[served.input_columns()]).frame
        np.testing.assert_allclose(_p_true(got), direct["malignant"], rtol=1e-5, atol=1e-6)
    raw.to_csv(tmp_path / "some_rows.csv", index=False)
    result = CliRunner().invoke(
        app, ["predict", str(out), "--dataset", str(tmp_path / "some_rows.csv"), "-o", str(tmp_path / "p.csv")]
    )
    assert result.exit_code == 0, result.output
    predicted = pd.read_csv(tmp_path / "p.csv")
    np.testing.assert_allclose(_p_true(predicted), direct["malignant"], rtol=1e-5, atol=1e-6)


def _p_true(frame: pd.DataFrame) -> np.ndarray:
    """A binary output's probability of true from its ``_probabilities`` column ([false, true]
    lists, or their JSON text in a CSV file)."""
    cells = frame["malignant_probabilities"]
    return np.array([json.loads(c) if isinstance(c, str) else c for c in cells], dtype=np.float64)[:, 1]
