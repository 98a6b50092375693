"""An LLM's best model as an MLflow pyfunc that loads and generates: the adapter in peft's
format over the base (a local base folder's files go with it), or the merged model on request;
``mlflow.pyfunc.load_model(uri).predict(rows)`` answers each row as the trained model does.

The tiny random Llama of ``tests/hf_models.py`` with a LoRA adapter whose weights are not the
identity (so a lost adapter changes the answers), a real MLflow store (temporary SQLite), no Ray.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.data import prepare
from ludwig_hpo.tracking.mlflow_store import MlflowStore
from ludwig_hpo.tracking.models import log_saved_model
from tests.llm_configs import POS_TEMPLATE, llm_raw

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

ROWS = pd.DataFrame(
    {
        "lemma": ["dog", "cat", "river", "stone", "cloud", "bread"],
        "pos": ["noun"] * 6,
        "gloss": ["a domestic animal", "a small feline", "a stream of water", "a hard rock", "water vapour", "a food"],
    }
)


def _trained(cfg, data):
    """The llm model of ``cfg`` with an adapter that is not the identity (LoRA starts as one),
    as if trained: a lost adapter changes the answers."""
    from ludwig_hpo.model import build_model

    torch.manual_seed(3)
    model = build_model(cfg, data.meta)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.5)
    return model.eval()


def _raw(base: Path, **extra) -> dict:
    return llm_raw(
        base,
        name="llm-logging",
        template=POS_TEMPLATE,
        lr_range=(1.0e-4, 1.0e-3),
        **{
            "adapter": {"type": "lora", "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
            "generation": {"max_new_tokens": 6, "do_sample": False},
            "trainer": {"type": "finetune", "epochs": 1},
            **extra,
        },
    )


def _direct_answers(model, served) -> list[str]:
    """What the in-memory model generates for the rows' prompts, one at a time (no padding),
    decoded as served."""
    tok = served.tokenizer
    out = []
    for ids in served.prompt_ids(served.prompts(ROWS)):
        prompt = torch.tensor([ids])
        new = model.generate(prompt, torch.ones_like(prompt))[0, len(ids) :].tolist()
        cut = next((i for i, v in enumerate(new) if v in (tok.eos_token_id, tok.pad_token_id)), len(new))
        out.append(tok.decode(new[:cut], skip_special_tokens=True))
    return out


@pytest.fixture
def base_copy(tiny_llama_dir, tmp_path) -> Path:
    """A base folder of this test's own: removing it proves the logged model carries the base."""
    return Path(shutil.copytree(tiny_llama_dir, tmp_path / "base"))


def _saved(tmp_path, raw: dict):
    """(the pyfunc folder saved from a "trained" model of ``raw``, that model)."""
    from ludwig_hpo.model.llm_pyfunc import save_llm_pyfunc

    cfg = resolve_trial_config(raw, {})
    data = prepare(ROWS, cfg)
    model = _trained(cfg, data)
    path = tmp_path / "model"
    save_llm_pyfunc(path, model, cfg, data.meta, ROWS.head(2), raw, {})
    return path, model


def test_the_logged_adapter_model_loads_from_mlflow_and_generates_as_the_trained_model(base_copy, tmp_path):
    import mlflow.pyfunc

    from ludwig_hpo.model.llm_pyfunc import ADAPTER_DIR, BASE_DIR, LLM_ARTIFACT, ServedLLM, response_column

    path, model = _saved(tmp_path, _raw(base_copy))
    folder = path / "artifacts" / LLM_ARTIFACT
    assert (folder / ADAPTER_DIR / "adapter_config.json").is_file()
    adapter_files = list((folder / ADAPTER_DIR).glob("adapter_model.*"))
    assert adapter_files and all("lora" in k for k in _safetensor_keys(adapter_files[0]))
    assert (folder / BASE_DIR / "config.json").is_file()  # a local base goes with the model
    expected = _direct_answers(model, ServedLLM.load(folder))

    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "llm", artifact_location=tmp_path / "art")
    try:
        run = store.start_run("sweep")
        logged = log_saved_model(store, run, path, "model")
        uri = store.uri
    finally:
        store.close()
    shutil.rmtree(base_copy)  # the logged model needs neither the base folder nor the saved one
    shutil.rmtree(path)
    mlflow.set_tracking_uri(uri)
    try:
        loaded = mlflow.pyfunc.load_model(logged.uri)
        frame = loaded.predict(ROWS[["lemma", "pos"]])
    finally:
        mlflow.set_tracking_uri(None)
    assert list(frame.columns) == [response_column("gloss")]
    assert frame[response_column("gloss")].tolist() == expected
    assert any(expected)  # the tiny model answers something: the comparison is not of empty strings


def _safetensor_keys(path: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return list(f.keys())


def test_merge_adapter_into_base_model_logs_the_merged_model(base_copy, tmp_path):
    import mlflow.pyfunc

    from ludwig_hpo.model.llm_pyfunc import ADAPTER_DIR, BASE_DIR, LLM_ARTIFACT, MODEL_DIR, response_column

    raw = _raw(base_copy)
    raw["adapter"] = {**raw["adapter"], "postprocessor": {"merge_adapter_into_base_model": True}}
    path, reference = _saved(tmp_path, raw)
    folder = path / "artifacts" / LLM_ARTIFACT
    assert (folder / MODEL_DIR / "config.json").is_file()
    assert not (folder / ADAPTER_DIR).exists() and not (folder / BASE_DIR).exists()
    merged = transformers.AutoModelForCausalLM.from_pretrained(folder / MODEL_DIR)
    assert not any("lora" in n for n, _ in merged.named_parameters())
    ids = torch.tensor([[2, 40, 41, 42, 43]])
    with torch.no_grad():
        torch.testing.assert_close(
            merged(input_ids=ids).logits, reference.model(input_ids=ids).logits, atol=1e-4, rtol=1e-4
        )
    frame = mlflow.pyfunc.load_model(str(path)).predict(ROWS[["lemma", "pos"]])
    assert len(frame) == len(ROWS) and list(frame.columns) == [response_column("gloss")]


def test_a_row_without_a_column_the_prompt_reads_is_a_bad_request(base_copy, tmp_path):
    import mlflow.pyfunc
    from mlflow.exceptions import MlflowException

    path, _ = _saved(tmp_path, _raw(base_copy))
    model = mlflow.pyfunc.load_model(str(path))
    with pytest.raises(MlflowException, match="pos"):
        model.predict(ROWS[["lemma"]])


def test_hpo_predict_generates_and_hpo_evaluate_scores_the_llm_metrics(base_copy, tmp_path):
    import io
    import json

    from rich.console import Console

    from ludwig_hpo.driver.evaluate_cmd import evaluate_command
    from ludwig_hpo.driver.predict import predict_command
    from ludwig_hpo.model.llm_pyfunc import LLM_ARTIFACT, ServedLLM, response_column

    path, model = _saved(tmp_path, _raw(base_copy))
    expected = _direct_answers(model, ServedLLM.load(path / "artifacts" / LLM_ARTIFACT))
    rows = tmp_path / "rows.csv"
    ROWS.to_csv(rows, index=False)
    console = Console(file=io.StringIO())
    out = predict_command(
        str(path), rows, tmp_path / "pred.csv", skip_bad_rows=False, tracking_uri=None, out=console, err=console
    )
    assert pd.read_csv(out, keep_default_na=False)[response_column("gloss")].tolist() == expected
    scores = evaluate_command(
        str(path),
        rows,
        tmp_path / "metrics.json",
        split="full",
        skip_bad_rows=False,
        tracking_uri=None,
        out=console,
        err=console,
    )
    assert json.loads((tmp_path / "metrics.json").read_text()) == pytest.approx(scores)
    for metric in ("loss", "perplexity", "token_accuracy", "exact_match", "rouge_l"):
        assert f"full/gloss/{metric}" in scores, sorted(scores)
    assert scores["full/gloss/perplexity"] == pytest.approx(math.exp(scores["full/gloss/loss"]), rel=1e-4)


def test_the_sweeps_best_llm_trial_is_exported_logged_and_scored_on_the_test_split(base_copy, tmp_path):
    """The driver's export of an llm sweep's best trial: ``best_model/model.pt`` is the adapter,
    the parent run's ``model`` a pyfunc that generates, the test split scored with the llm metrics."""
    import io

    import mlflow.pyfunc
    import yaml
    from rich.console import Console

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.driver.export import export_best
    from ludwig_hpo.driver.holdout import score_best_on_test
    from ludwig_hpo.driver.paths import SweepPaths
    from ludwig_hpo.model.llm_pyfunc import response_column
    from ludwig_hpo.results import EpochRecord, TrialRecord
    from ludwig_hpo.tracking import layout
    from ludwig_hpo.train.loop import Job, train_loop

    rows = pd.concat([ROWS] * 2, ignore_index=True)
    rows.to_csv(tmp_path / "rows.csv", index=False)
    raw = _raw(base_copy, trainer={"type": "finetune", "epochs": 1, "batch_size": 4, "eval_generation_samples": 2})
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    loaded = load_sweep(tmp_path / "sweep.yaml")
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    kept: dict[str, str] = {}

    def report(metrics, ckpt):
        if ckpt is not None:
            kept["folder"] = str(shutil.copytree(ckpt, tmp_path / "ckpt"))

    params = {"trainer.learning_rate": 5e-4}
    train_loop(resolve_trial_config(loaded.raw, params), data, Job(checkpoint_every=1), report)
    best = TrialRecord("t1", "FINISHED", params, 1.0, 1.0, (EpochRecord(1, 1.0),))
    paths = SweepPaths(tmp_path / "out")
    paths.root.mkdir()
    console = Console(file=io.StringIO())
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "llm", artifact_location=tmp_path / "art")
    try:
        parent = store.start_run("sweep")
        export_best(
            best, kept["folder"], loaded=loaded, data=data, paths=paths, store=store, parent=parent, console=console
        )
        scores = score_best_on_test(best, loaded, data, paths, console)
        tags = store.client.get_run(parent).data.tags
        uri = store.uri
    finally:
        store.close()
    assert "warning" not in console.file.getvalue(), console.file.getvalue()
    weights = torch.load(paths.best_weights, weights_only=True)["state_dict"]
    assert weights and all("lora_" in k for k in weights)
    assert layout.PYTORCH_MODEL_URI_TAG not in tags  # token ids in, no caller has them
    assert {"test/gloss/loss", "test/gloss/rouge_l"} <= set(scores), sorted(scores)
    mlflow.set_tracking_uri(uri)
    try:
        frame = mlflow.pyfunc.load_model(tags[layout.BEST_MODEL_URI_TAG]).predict(ROWS[["lemma", "pos"]])
    finally:
        mlflow.set_tracking_uri(None)
    assert len(frame) == len(ROWS) and list(frame.columns) == [response_column("gloss")]


def test_an_llm_sweeps_kfold_runs_score_and_its_retrained_adapter_becomes_the_final_model(base_copy, tmp_path):
    """k-fold of an llm config as of any model: a fold run scores its held-out fold, the test run
    of ``kfold.select: cv`` keeps its final weights (the adapter), which the driver exports,
    logs as the generating pyfunc and scores on the test split."""
    import io

    import yaml
    from rich.console import Console

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.driver.final_model import FinalModel
    from ludwig_hpo.driver.paths import SweepPaths
    from ludwig_hpo.driver.state import SweepState
    from ludwig_hpo.driver.sweep_run import SweepOutput
    from ludwig_hpo.results import EpochRecord, KFoldRecord, TrialRecord
    from ludwig_hpo.tracking import layout
    from ludwig_hpo.train.loop import Job, train_loop
    from ludwig_hpo.train.report_keys import MODEL_FILE

    rows = pd.concat([ROWS] * 2, ignore_index=True)
    rows.to_csv(tmp_path / "rows.csv", index=False)
    trainer = {"type": "finetune", "epochs": 1, "batch_size": 4, "eval_generation_samples": 2}
    raw = _raw(base_copy, trainer=trainer, kfold={"k": 2, "top_k": 1, "select": "cv"})
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    loaded = load_sweep(tmp_path / "sweep.yaml")
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    assert len(data.folds) == 2
    params = {"trainer.learning_rate": 5e-4}
    cfg = resolve_trial_config(loaded.raw, params)
    fold_reports: list[dict] = []
    train_loop(cfg, data, Job("fold", fold=0, epochs=1), lambda m, c: fold_reports.append(dict(m)))
    assert "validation/gloss/loss" in fold_reports[-1]
    kept: dict[str, str] = {}

    def keep(metrics, ckpt):
        if ckpt is not None:
            kept["folder"] = str(shutil.copytree(ckpt, tmp_path / "retrained"))

    train_loop(cfg, data, Job("test", epochs=1), keep)
    assert all("lora_" in k for k in torch.load(Path(kept["folder"]) / MODEL_FILE, weights_only=True)["state_dict"])
    top = [TrialRecord("t1", "FINISHED", params, 1.0, 1.0, (EpochRecord(1, 1.0),))]
    folds = (KFoldRecord(1, "t1", params, (1.0, 1.1), 1.0, "gloss/loss"),)
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "llm", artifact_location=tmp_path / "art")
    try:
        parent = store.start_run("sweep")
        paths = SweepPaths(tmp_path / "out")
        paths.root.mkdir()
        state = SweepState("f", str(loaded.path), parent, store.uri, phase="kfold")
        output = SweepOutput(paths, store, parent, state, resumed=False)
        console = Console(file=io.StringIO())
        final = FinalModel(top[0], {}, loaded=loaded, data=data, output=output, console=console)
        final.after_search()
        final.after_kfold(top, folds, {1: kept["folder"]})
        tags = store.client.get_run(parent).data.tags
    finally:
        store.close()
    assert final.selection is not None and final.selection.retrained
    assert "test/gloss/loss" in final.test_scores, final.test_scores
    assert layout.BEST_MODEL_URI_TAG in tags and (paths.served_model / "MLmodel").is_file()
    assert "warning" not in console.file.getvalue(), console.file.getvalue()


@pytest.mark.timeout(300)
def test_hpo_serve_answers_an_llms_rows_over_http_as_predict_does(base_copy, tmp_path):
    import json
    import os
    import subprocess
    import sys
    import urllib.request

    from ludwig_hpo.execution.cluster import free_port
    from ludwig_hpo.model.llm_pyfunc import LLM_ARTIFACT, ServedLLM, response_column

    from ..servers import stop_process_group, wait_until_answering

    path, _ = _saved(tmp_path, _raw(base_copy))
    expected = ServedLLM.load(path / "artifacts" / LLM_ARTIFACT).predict(ROWS).frame
    port = free_port()
    log = tmp_path / "serve.log"  # a file, not a pipe nobody reads while it serves
    with open(log, "w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "ludwig_hpo", "serve", str(path), "--port", str(port)],
            cwd=tmp_path,
            env=dict(os.environ),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_answering(f"http://127.0.0.1:{port}/ping", server, output=log.read_text)
        body = json.dumps({"dataframe_records": ROWS[["lemma", "pos"]].to_dict(orient="records")}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/invocations", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as reply:
            served = pd.DataFrame(json.loads(reply.read())["predictions"])
    finally:
        stop_process_group(server)
    column = response_column("gloss")
    assert served[column].tolist() == expected[column].tolist()


def test_an_adapter_over_a_hub_base_model_not_in_the_cache_is_one_line_without_a_network(
    base_copy, tmp_path, monkeypatch
):
    import json

    from ludwig_hpo.errors import DataError
    from ludwig_hpo.model.llm_pyfunc import BASE_DIR, LLM_ARTIFACT, SPEC_FILE, ServedLLM

    path, _ = _saved(tmp_path, _raw(base_copy))
    folder = path / "artifacts" / LLM_ARTIFACT
    spec = json.loads((folder / SPEC_FILE).read_text())
    # as a sweep on a hub id leaves it: the base is a reference, not files
    (folder / SPEC_FILE).write_text(json.dumps({**spec, "base_model": "nobody/no-such-model", "base_files": False}))
    shutil.rmtree(folder / BASE_DIR)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="no-such-model") as e:
        ServedLLM.load(folder)
    assert "\n" not in e.value.one_line()
