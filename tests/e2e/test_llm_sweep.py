"""End-to-end: ``sweeps/llm_lora.yaml`` cut to a slice (LoRA on a tiny random Llama given by its
folder, 2 trials of 2 epochs, 2-worker gloo DDP trials, a few dozen rows) run by the real
``hpo sweep`` (Ray Tune, MLflow) with the hub off: every trial's MLflow child run holds the
teacher-forced and the generated-output metrics and its generated sample, the report shows the
generated-output table, the checkpoints hold the adapter only, and the best model logged to
MLflow loads in a fresh process's MLflow and generates text for raw rows."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
import torch
import yaml

from ..conftest import SWEEPS
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]

#: Rows of the slice: about 32 training, 8 validation and 8 test rows.
ROWS = 48
#: Validation rows generated per evaluation (all of them).
GENERATED = 8
OFFLINE = {"HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def llm_sweep(tmp_path_factory, tiny_llama_dir):
    """The shipped LLM sweep on the tiny model and a slice of its rows; returns (process, folder,
    output folder, the sweep file's mapping)."""
    cwd = tmp_path_factory.mktemp("llm")
    pd.read_csv(SWEEPS / "data" / "wordnet_definitions.csv").head(ROWS).to_csv(cwd / "definitions.csv", index=False)
    raw = yaml.safe_load((SWEEPS / "llm_lora.yaml").read_text())
    raw["base_model"] = str(tiny_llama_dir)
    raw["dataset"] = {
        "source": "definitions.csv",
        "split": {"train": 0.66, "validation": 0.17, "test": 0.17, "seed": 1},
    }
    raw["generation"] = {"max_new_tokens": 8, "do_sample": False}
    raw["trainer"].update(epochs=2, batch_size=8, eval_generation_samples=GENERATED)
    raw["hyperopt"]["executor"]["num_samples"] = 1
    raw["hyperopt"]["parameters"] = {"adapter.r": {"space": "grid_search", "values": [2, 4]}}
    (cwd / "llm.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    proc = run_cli(
        "sweep",
        "llm.yaml",
        "--output",
        "results",
        cwd=cwd,
        env_extra={**OFFLINE, "LUDWIG_HPO_CACHE_DIR": str(cwd / "cache")},
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd, cwd / "results" / raw["name"], raw


def _client(out):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")


def test_each_trial_run_holds_the_llm_metrics_and_its_generated_sample(llm_sweep):
    from ludwig_hpo.tracking import layout

    _, _, out, raw = llm_sweep
    result = json.loads((out / "results.json").read_text())
    assert sorted(t["params"]["adapter.r"] for t in result["trials"]) == [2, 4]
    assert all(t["status"] == "FINISHED" for t in result["trials"]), result["trials"]
    client = _client(out)
    experiment = client.get_experiment_by_name(raw["tracking"]["experiment"])
    (parent,) = client.search_runs([experiment.experiment_id], "tags.run_kind = 'sweep'")
    children = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    trials = [r for r in children if r.data.tags.get("run_kind") == "trial"]
    assert len(trials) == 2
    for run in trials:
        metrics = run.data.metrics
        for name in ("loss", "perplexity", "token_accuracy", "sequence_accuracy", "exact_match", "rouge_l"):
            assert f"validation/gloss/{name}" in metrics, (name, sorted(metrics))
        assert 0.0 <= metrics["validation/gloss/rouge_l"] <= 1.0
        assert metrics["validation/gloss/perplexity"] >= 1.0
        history = client.get_metric_history(run.info.run_id, "validation/gloss/loss")
        assert len(history) == 2  # one per epoch
        artifacts = [a.path for a in client.list_artifacts(run.info.run_id)]
        assert layout.GENERATED_SAMPLE_ARTIFACT in artifacts, artifacts
        sample = json.loads(
            open(client.download_artifacts(run.info.run_id, layout.GENERATED_SAMPLE_ARTIFACT), encoding="utf-8").read()
        )
        assert sample and all(set(row) >= {"prompt", "reference", "generated"} for row in sample)
        # the rendered template (lower-cased: a text input's preprocessing.lowercase defaults to true)
        assert all(row["prompt"].lower().startswith("define the noun '") for row in sample), sample[0]


def test_the_report_shows_generated_outputs_next_to_their_references(llm_sweep):
    import html as html_lib

    _, cwd, out, _ = llm_sweep
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('<table class="generated">') == 2  # one table per trial (the best 3 of 2)
    references = pd.read_csv(cwd / "definitions.csv")["gloss"]
    # the reference as the target was prepared (lower-cased: the output's lowercase defaults to true)
    shown = [ref for ref in references if f'<td class="text">{html_lib.escape(ref.lower())}</td>' in page]
    assert shown, "no reference gloss in the report's generated-output tables"


def test_checkpoints_hold_the_adapter_weights_only(llm_sweep):
    _, _, out, _ = llm_sweep
    checkpoints = sorted((out / "ray").rglob("model.pt"))
    assert checkpoints, f"no trial checkpoint under {out / 'ray'}"
    for path in [*checkpoints, out / "best_model" / "model.pt"]:
        state = torch.load(path, map_location="cpu", weights_only=False)
        sd = state.get("state_dict", state)
        assert sd and all("lora_" in k for k in sd), (path, sorted(sd)[:5])


def test_the_best_model_loads_from_mlflow_and_generates(llm_sweep):
    import mlflow.pyfunc

    from ludwig_hpo.tracking import layout

    _, cwd, out, raw = llm_sweep
    client = _client(out)
    experiment = client.get_experiment_by_name(raw["tracking"]["experiment"])
    (parent,) = client.search_runs([experiment.experiment_id], "tags.run_kind = 'sweep'")
    rows = pd.read_csv(cwd / "definitions.csv").head(3)[["lemma", "pos"]]
    saved = dict(os.environ)
    os.environ.update(MLFLOW_TRACKING_URI=client.tracking_uri, **OFFLINE)  # where models:/ URIs resolve
    try:
        model = mlflow.pyfunc.load_model(parent.data.tags[layout.BEST_MODEL_URI_TAG])
        predicted = model.predict(rows)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert list(predicted.columns) == ["gloss_response"] and len(predicted) == 3  # Ludwig's column
    assert all(isinstance(text, str) for text in predicted["gloss_response"]), predicted
