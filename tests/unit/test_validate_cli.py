"""``hpo validate`` on every shipped sweep and test fixture (Ludwig configs with
``--dataset``), its report of the resolved search, and ``hpo schema``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sklearn  # noqa: F401 (sets KMP_* variables on import: before the hygiene check)
import yaml
from typer.testing import CliRunner

from ludwig_hpo.cli import app

ROOT = Path(__file__).resolve().parents[2]
#: Every shipped sweep and fixture but those written to be refused (``refused_*.yaml``) and
#: Ludwig's public llm configs, whose base model is a tiny local one put in at test time
#: (``tests/unit/test_ludwig_llm_fixtures.py``).
FILES = sorted(
    p
    for p in [*ROOT.glob("sweeps/*.yaml"), *ROOT.glob("tests/fixtures/**/*.yaml")]
    if not p.name.startswith("refused_") and p.parent != ROOT / "tests" / "fixtures" / "ludwig" / "llm"
)


def _args(path: Path) -> list[str]:
    """A Ludwig config (no ``dataset``) runs on the CSV its ``# dataset: FILE`` comment names,
    else the CSV beside it whose name starts its own (``titanic.csv`` for ``titanic_basic.yaml``;
    the longest such), else ``data.csv``."""
    raw = yaml.safe_load(path.read_text())
    if "dataset" in raw:
        return [str(path)]
    named = re.search(r"^# dataset: (\S+)", path.read_text(), re.M)  # the fixture's own CSV
    if named:
        return [str(path), "--dataset", str(path.parent / named.group(1))]
    own = [c for c in path.parent.glob("*.csv") if path.stem.startswith(c.stem)]
    data = max(own, key=lambda c: len(c.stem)) if own else path.parent / "data.csv"
    return [str(path), "--dataset", str(data)]


def test_there_are_ludwig_fixtures():
    assert len([f for f in FILES if "ludwig" in f.parts]) >= 3


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(ROOT)) for f in FILES])
def test_every_sweep_and_fixture_validates(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", *_args(path)])
    assert result.exit_code == 0, result.stderr
    searched = "hyperopt" in yaml.safe_load(path.read_text())  # else a model config, for hpo train
    valid = "valid" if searched else "valid for hpo train; a sweep needs a hyperopt section"
    assert result.stdout.splitlines()[0] == f"{path}: {valid}"
    assert ("search space (" in result.stdout) == searched and "resources: " in result.stdout
    assert list(tmp_path.iterdir()) == [], "validate creates nothing"


def test_validate_digits_shows_the_resolved_search(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = CliRunner().invoke(app, ["validate", str(ROOT / "sweeps" / "digits.yaml")]).stdout.splitlines()
    want = [
        "metric: validation/label/loss (minimize)   epochs per trial: 8",
        "search: 16 trials; optuna tpe sampler (seed 7, n_startup_trials 4, multivariate false)",
        "scheduler: async_hyperband on epoch (grace_period 2, reduction_factor 3, brackets 1, stop_last_trials true, "
        "max_t 8 epochs (trainer.epochs))",
        "time budget: 3600 s (then the search ends: no trial starts and running trials are stopped)",  # Ludwig's default
        "search space (4 parameter(s)):",
        "  trainer.learning_rate     loguniform float in [0.001, 0.03), log scale",
        "  image.encoder.num_layers  randint [1, 4) = integers 1..3, linear scale",
        "  image.encoder.dropout     uniform float in [0, 0.5), linear scale",
        "  image.encoder.channels    choice of 3: 8, 16, 32",
        "resources: 2 worker(s) x 1 CPU per trial; cluster 2 CPU / 0 GPU -> 1 trial(s) at once",
        "results: hpo_results/digits-cnn",
        "mlflow: hpo_results/digits-cnn/mlflow.db (embedded SQLite store), experiment 'digits-cnn'",
    ]
    for line in want:
        assert line in out


def test_validate_prints_grid_counts_and_budget(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "sweeps" / "breast_cancer_tiny.yaml").read_text()
    text = text.replace("executor: {num_samples: 4}", "executor: {num_samples: 3, time_budget_s: 600}")
    text = text.replace(
        "combiner.output_size: {space: choice, categories: [8, 16]}",
        "combiner.output_size: {space: grid_search, values: [8, 16]}",
    )
    (tmp_path / "s.yaml").write_text(text)
    out = CliRunner().invoke(app, ["validate", "s.yaml"]).stdout
    assert "search: 6 trials (grid of 2 points x num_samples 3); optuna tpe sampler" in out
    assert "time budget: 600 s (then the search ends: no trial starts and running trials are stopped)" in out
    assert "  combiner.output_size    grid of 2: 8, 16" in out


@pytest.mark.parametrize(
    ("trainer", "line"),
    [
        ("{epochs: 3, early_stop: -1}", "scheduler: fifo (every trial runs all 3 epochs)"),
        (
            "{epochs: 3}",  # Ludwig's default early_stop 5
            "scheduler: fifo (every trial runs up to 3 epochs; trainer.early_stop ends one after 5 epochs in a row "
            "without improvement of validation/combined/loss)",
        ),
        (
            "{train_steps: 40, early_stop: 0}",
            "scheduler: fifo (every trial runs all 40 optimizer steps (trainer.train_steps))",
        ),
    ],
)
def test_validate_says_how_long_a_fifo_trial_runs(tmp_path, monkeypatch, trainer, line):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(
        "name: t\ndataset: {source: sklearn:breast_cancer}\ninput_features: [{name: mean_radius, type: number}]\n"
        f"output_features: [{{name: malignant, type: binary}}]\ntrainer: {trainer}\nhyperopt:\n"
        "  parameters: {trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 0.1}}\n"
    )
    result = CliRunner().invoke(app, ["validate", "s.yaml"])
    assert result.exit_code == 0, result.stdout
    assert line in result.stdout.splitlines()


def test_schema_is_json_schema_that_accepts_every_sweep():
    jsonschema = pytest.importorskip("jsonschema")
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["title"] == "ludwig_hpo sweep file"
    assert {"hyperopt", "trainer", "input_features", "defaults", "preprocessing"} <= set(doc["properties"])
    # the schema is this platform's language; the Ludwig fixtures also use spellings the loader
    # renames (legacy keys, Ray Tune's names), which it does not list
    for path in (f for f in FILES if "ludwig" not in f.parts):
        jsonschema.validate(yaml.safe_load(path.read_text()), doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"hyperopt": {"parameters": {"x.y": {"space": "lognormal"}}}}, doc)


def test_validate_says_valid_only_after_every_check_passed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "sweeps" / "breast_cancer_tiny.yaml").read_text()
    (tmp_path / "s.yaml").write_text(text.replace("source: sklearn:breast_cancer", "source: missing.csv"))
    result = CliRunner().invoke(app, ["validate", "s.yaml"])
    assert result.exit_code == 2
    assert result.stdout == ""  # neither "valid" nor the summary of a file that failed a check
    assert "missing.csv" in result.stderr and "dataset.source" in result.stderr


def test_a_grid_search_is_described_without_a_seed(tmp_path, monkeypatch):
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.config.describe import algorithm_text

    monkeypatch.chdir(tmp_path)
    text = (ROOT / "sweeps" / "breast_cancer_tiny.yaml").read_text()
    text = text.replace("search_alg: {sampler: tpe, seed: 3}", "search_alg: {type: grid}")
    text = text.replace("executor: {num_samples: 4}", "executor: {}")
    text = text.replace(
        "{space: loguniform, lower: 1.0e-3, upper: 1.0e-1}", "{space: grid_search, values: [0.01, 0.1]}"
    )
    text = text.replace("{space: choice, categories: [8, 16]}", "{space: grid_search, values: [8, 16]}")
    text = text.replace("{space: choice, categories: [adam, sgd]}", "{space: grid_search, values: [adam, sgd]}")
    (tmp_path / "s.yaml").write_text(text)
    from ludwig_hpo.config.describe import search_line

    cfg = load_sweep(tmp_path / "s.yaml").config
    assert algorithm_text(cfg.hyperopt) == "grid search"
    assert search_line(cfg).startswith("search: 8 trials (every point of the grid once), grid search, scheduler")
    assert "None" not in search_line(cfg) and "seed" not in search_line(cfg)
    out = CliRunner().invoke(app, ["validate", "s.yaml"]).stdout
    assert "search: 8 trials (every point of the grid once); grid search\n" in out
    assert "None" not in out


def test_validate_says_when_max_concurrent_trials_is_lowered(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ludwig_hpo.execution.cluster.local_resources", lambda: (2, 0))
    text = (ROOT / "sweeps" / "breast_cancer_tiny.yaml").read_text()
    text = text.replace("executor: {num_samples: 4}", "executor: {num_samples: 4, max_concurrent_trials: 2}")
    (tmp_path / "s.yaml").write_text(text)
    out = CliRunner().invoke(app, ["validate", "s.yaml"]).stdout.splitlines()
    assert "resources: 2 worker(s) x 1 CPU per trial; cluster 2 CPU / 0 GPU -> 1 trial(s) at once" in out
    note = next(line for line in out if line.startswith("note: max_concurrent_trials"))
    assert "2 worker(s) x 1 CPU" in note  # why: how much one trial takes


def test_a_model_config_validates_for_hpo_train(tmp_path, monkeypatch):
    from ludwig_hpo.driver.validate import TRAIN_ONLY

    monkeypatch.chdir(tmp_path)
    text = (ROOT / "tests" / "fixtures" / "ludwig" / "fixed_split.yaml").read_text().split("\nhyperopt:")[0]
    (tmp_path / "model.yaml").write_text(text)
    data = ROOT / "tests" / "fixtures" / "ludwig" / "data.csv"
    result = CliRunner().invoke(app, ["validate", "model.yaml", "--dataset", str(data)])
    assert result.exit_code == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0] == f"model.yaml: {TRAIN_ONLY}" == "model.yaml: valid for hpo train; a sweep needs a hyperopt section"
    assert "data: 180 rows (train 120, validation 30, test 30); features read and preprocessed without error" in out
    assert "results: hpo_results/model-train" in out and not any(line.startswith("search") for line in out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.yaml"]
