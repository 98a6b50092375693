"""End-to-end: a CSV whose column names hold what real headers hold (parentheses, a ``/``, dots,
brackets, unicode, spaces), searched parameters on those features, through the real ``hpo`` CLI,
Ray and an embedded MLflow store. The names reach every output as written: MLflow's keys decode
to them, ``results.json`` and the report's axes show them, the console prints them."""

from __future__ import annotations

import csv
import json
import random

import pytest

from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]

INPUTS = {"size (cm)": "number", "a/b": "category", "x.y": "number", "width [px]": "number", "naïve 日本": "number"}
OUTPUT = "label (y/n)"
PARAMS = {
    "size (cm).encoder.type": {"space": "choice", "categories": ["passthrough", "dense"]},
    "a/b.encoder.embedding_size": {"space": "choice", "categories": [4, 8]},
    "x.y.encoder.type": {"space": "choice", "categories": ["passthrough", "dense"]},
    "trainer.learning_rate": {"space": "loguniform", "lower": 1.0e-3, "upper": 1.0e-1},
}
METRIC = f"validation/{OUTPUT}/roc_auc"


def _write_sweep(folder):
    rng = random.Random(0)
    with open(folder / "data.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([*INPUTS, OUTPUT])
        for _ in range(60):
            size = rng.random()
            w.writerow(
                [round(size, 3), rng.choice("pqr"), rng.random(), rng.randint(1, 9), rng.random(), int(size > 0.5)]
            )
    sweep = {
        "name": "awkward-names",
        "dataset": {"source": "data.csv"},
        "input_features": [{"name": n, "type": t} for n, t in INPUTS.items()],
        "output_features": [{"name": OUTPUT, "type": "binary"}],
        "trainer": {"epochs": 1, "batch_size": 16},
        "backend": {"num_workers": 1},
        "hyperopt": {
            "goal": "maximize",
            "metric": "roc_auc",
            "output_feature": OUTPUT,
            "search_alg": {"sampler": "random", "seed": 1},
            "executor": {"num_samples": 2},
            "parameters": PARAMS,
        },
    }
    # JSON is YAML: the names stay exactly as written, quotes and all
    (folder / "sweep.yaml").write_text(json.dumps(sweep, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="module")
def awkward_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("awkward")
    _write_sweep(cwd)
    valid = run_cli("validate", "sweep.yaml", cwd=cwd, timeout=120)
    assert valid.returncode == 0, valid.stderr
    proc = run_cli("sweep", "sweep.yaml", "--output", "results", cwd=cwd)
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd / "results" / "awkward-names"


def test_mlflow_keys_decode_to_the_names_as_written_and_no_run_is_left_running(awkward_sweep):
    from mlflow.tracking import MlflowClient

    from ludwig_hpo.tracking.names import name_of_key

    _, out = awkward_sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    runs = client.search_runs([client.get_experiment_by_name("awkward-names").experiment_id], max_results=100)
    assert [r.info.status for r in runs if r.info.status == "RUNNING"] == []
    trials = [r for r in runs if r.data.tags.get("run_kind") == "trial"]
    assert len(trials) == 2 and {r.info.status for r in trials} == {"FINISHED"}
    for r in trials:
        assert {name_of_key(k) for k in r.data.params} == set(PARAMS)
        assert METRIC in {name_of_key(k) for k in r.data.metrics}
    parent = next(r for r in runs if r.data.tags.get("run_kind") == "sweep")
    assert {name_of_key(k) for k in parent.data.params if k.startswith("best.")} == {f"best.{p}" for p in PARAMS}


def test_results_report_and_console_show_the_names_as_written(awkward_sweep):
    from dashboards.mlflow_source import load_sweep_result
    from dashboards.parallel import parallel_coordinates_info
    from ludwig_hpo.results.io import read_result

    proc, out = awkward_sweep
    from_file = read_result(out / "results.json")
    from_mlflow = load_sweep_result(f"sqlite:///{(out / 'mlflow.db').resolve()}", experiment="awkward-names")
    for result in (from_file, from_mlflow):
        assert [p.path for p in result.parameters] == list(PARAMS)
        assert result.metric == METRIC
        assert all(set(t.params) == set(PARAMS) for t in result.trials)
        assert all(METRIC in t.history[-1].metrics for t in result.trials)
        info = parallel_coordinates_info(result)
        assert {a.label for a in info.axes[:-1]} | set(info.fixed_params) == set(PARAMS)
        assert info.axes[-1].label == METRIC
    assert "size (cm).encoder.type=" in proc.stdout and "a/b.encoder.embedding_size=" in proc.stdout
