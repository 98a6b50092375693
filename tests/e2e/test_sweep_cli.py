"""End-to-end: the real ``hpo`` CLI on a real Ray local cluster with 2-worker gloo DDP trials
and a real embedded MLflow store. One sweep runs per test session (``tiny_sweep`` in
tests/e2e/conftest.py, which test_browser_ui reads too); the tests read what it left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import SWEEPS
from ..servers import UI_START_TIMEOUT_S, stop_process_group, wait_until_answering

SWEEP_TIMEOUT_S = 540


def run_cli(
    *args: str, cwd: Path, timeout: float = SWEEP_TIMEOUT_S, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``hpo ARGS`` in its own process group; on timeout kill that group (and only it).
    The environment is this one without Ray/MLflow targets, plus ``env_extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    env.update(env_extra or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "ludwig_hpo", *args],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"hpo {' '.join(args)} timed out after {timeout}s\n{out[-3000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _trial_runs(out: Path) -> list:
    """A finished sweep's search trials' MLflow runs in start order (Tune's trial ids differ
    between sweeps)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("breast-cancer-tiny")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    return sorted((r for r in runs if r.data.tags.get("run_kind") == "trial"), key=lambda r: r.info.start_time)


@pytest.fixture(scope="module")
def mlflow_runs(tiny_sweep):
    from mlflow.tracking import MlflowClient

    _, out = tiny_sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("breast-cancer-tiny")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    return client, runs


pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]


def test_console_prints_progress_best_and_where_results_are(tiny_sweep):
    proc, out = tiny_sweep
    text = proc.stdout
    assert "started (1/4)" in text and "best trial" in text
    assert f"report:  {Path('results') / 'breast-cancer-tiny' / 'report.html'}" in text
    assert "mlflow:  sqlite:///" in text
    assert "INFO" not in text and "Traceback" not in proc.stderr  # no wall of Ray / MLflow log lines
    assert "\x1b" not in text and "\r" not in text  # piped: plain lines, no colours or cursor moves
    assert re.search(r"^ +0 running, \d+ completed, .* of 4 \| best ", text, re.M)  # the counts after each end


DECLARED = {"trainer.learning_rate", "combiner.output_size", "trainer.optimizer.type"}


def check_sweep_tree(client, runs, *, n_trials=4, folds=("0", "1", "test")):
    """The parent -> trials / k-fold runs tree of the tiny sweep, as any store holds it;
    returns the parent run."""
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    ptags = parent.data.tags
    assert ptags["run_kind"] == "sweep" and len(ptags["sweep_file_sha256"]) == 64 and ptags["host"]
    assert {"version.ludwig_hpo", "version.torch", "version.ray", "version.optuna", "version.mlflow"} <= set(ptags)
    trials = [r for r in runs if r.data.tags.get("run_kind") == "trial"]
    assert len(trials) == n_trials
    for r in trials:
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        # a trial the scheduler stopped did nothing wrong: FINISHED, with who stopped it
        assert r.info.status == "FINISHED" and r.data.tags["status"] == r.info.status
        assert set(r.data.params) == DECLARED  # nothing internal leaks into params
        assert (r.data.tags["world_size"], r.data.tags["phase"]) == ("2", "search")
        assert int(r.data.tags["global_batch_size"]) == 2 * int(r.data.tags["batch_size"])
        history = client.get_metric_history(r.info.run_id, "validation/malignant/roc_auc")
        assert [m.step for m in history] == list(range(1, len(history) + 1)) and history
        lr = client.get_metric_history(r.info.run_id, "effective_learning_rate")
        assert lr[0].value == pytest.approx(float(r.data.params["trainer.learning_rate"]))
        t = {k: float(v) for k, v in r.data.tags.items() if k.startswith("time.")}
        parts = sum(t[f"time.{k}_s"] for k in ("setup", "batch_size_tuning", "training", "evaluation"))
        assert parts == pytest.approx(t["time.total_s"], rel=1e-6) and t["time.training_s"] > 0
        # per-step metrics only: no one-point time/* chart, the objective once under its own name
        assert not [k for k in r.data.metrics if k.startswith("time/")]
        assert "objective" not in r.data.metrics and "validation/combined/loss" not in r.data.metrics
        for key in r.data.metrics:
            assert len(client.get_metric_history(r.info.run_id, key)) == len(history), key
        assert {a.path for a in client.list_artifacts(r.info.run_id)} == {"config.yaml"}
        if "stopped_by" in r.data.tags:
            assert r.data.tags["stopped_by"] == "scheduler"
            assert r.data.tags["stopped_at_rung"] == "0" and r.data.tags["stopped_at_epoch"] == "1"
    assert any(r.info.status == "FINISHED" for r in trials)
    assert ptags["best_trial_id"] in {r.data.tags["trial_id"] for r in trials}
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {
        "sweep.yaml",
        "sweep_resolved.yaml",
        "search_space.json",
        "best_trial.json",
        "report.html",
        "hiplot.html",
        "results.json",
        "best_model",
    } <= artifacts
    # the best model is an MLflow logged model of the parent run: MLflow's model views list it
    models = client.search_logged_models(experiment_ids=[parent.info.experiment_id])
    ids = {m.name: m.model_id for m in models if m.source_run_id == parent.info.run_id}
    assert sorted(ids) == ["model", "pytorch_model"] and len(models) == 2  # raw rows in, and the module
    assert (ptags["best_model_uri"], ptags["pytorch_model_uri"]) == (
        f"models:/{ids['model']}",
        f"models:/{ids['pytorch_model']}",
    )
    # the outcome on the parent: the best trial's scores, each top configuration's k-fold and test scores
    pm = parent.data.metrics
    assert {"best/validation/malignant/roc_auc", "kfold/1/mean", "kfold/1/ci95", "kfold/1/test"} <= set(pm)
    assert 0.5 < pm["kfold/1/test"] <= 1.0
    # and the best trial's best weights scored on the test split, as Ludwig scores a trial's model
    assert {"test/malignant/roc_auc", "test/malignant/accuracy", "test/malignant/loss"} <= set(pm)
    assert 0.5 < pm["test/malignant/roc_auc"] <= 1.0
    note = ptags["mlflow.note.content"]
    assert f"`{ptags['best_trial_id']}`" in note and "k-fold mean ± 95 % CI" in note
    kfold = [r for r in runs if r.data.tags.get("phase") == "kfold"]
    assert sorted(r.data.tags["kfold"] for r in kfold) == sorted(folds)
    for r in kfold:
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id and r.info.status == "FINISHED"
        assert r.data.tags["run_kind"] == ("test" if r.data.tags["kfold"] == "test" else "kfold")
        assert r.data.tags["config_rank"] == "1" and set(r.data.params) == DECLARED
    assert len(runs) == 1 + n_trials + len(folds)
    return parent


def load_best_model_and_score_test_rows(tracking_uri: str, parent) -> float:
    """Load the parent's ``pytorch_model_uri`` with ``mlflow.pytorch.load_model`` and return its
    accuracy on the tiny sweep's test rows."""
    import numpy as np
    import torch

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.model.serving import flat_inputs

    uri = parent.data.tags["pytorch_model_uri"]
    assert uri.startswith("models:/")
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    rows = data.splits["test"]
    x = flat_inputs(data.inputs, rows, [f.name for f in loaded.config.input_features], data.meta)
    saved = dict(os.environ)
    os.environ["MLFLOW_TRACKING_URI"] = tracking_uri  # where models:/ URIs resolve
    try:
        import mlflow.pytorch

        model = mlflow.pytorch.load_model(uri)
    finally:  # MLflow's torch import also sets KMP_* variables
        os.environ.clear()
        os.environ.update(saved)
    with torch.no_grad():
        p = model(torch.tensor(x.to_numpy(np.float32))).numpy()[:, 0]
    assert p.shape == (len(rows),) and ((p >= 0) & (p <= 1)).all()
    return float(((p > 0.5) == data.targets["malignant"][rows].astype(bool)).mean())


def test_trials_are_child_runs_of_one_parent_with_epoch_metrics(mlflow_runs):
    client, runs = mlflow_runs
    check_sweep_tree(client, runs)


def test_best_model_loads_with_mlflow_pytorch_and_predicts_test_rows(mlflow_runs, tiny_sweep):
    client, runs = mlflow_runs
    parent = next(r for r in runs if r.data.tags.get("run_kind") == "sweep")
    accuracy = load_best_model_and_score_test_rows(client.tracking_uri, parent)
    assert accuracy > 0.7  # trained, not fresh
    # the sweep's test score is this model's: results.json, the parent run and the console agree
    proc, out = tiny_sweep
    scores = json.loads((out / "results.json").read_text())["test_scores"]
    assert scores["test/malignant/accuracy"] == pytest.approx(accuracy)
    assert parent.data.metrics["test/malignant/accuracy"] == pytest.approx(accuracy)
    best = parent.data.tags["best_trial_id"]
    shown = (
        f"test split (final model: config #1 (trial {best}) retrained on train+validation): test/malignant/roc_auc = "
    )
    assert shown in proc.stdout and f"  test/malignant/accuracy: {accuracy:.6g}" in proc.stdout


def test_the_final_model_is_the_kfold_choice_retrained_on_train_and_validation(mlflow_runs, tiny_sweep):
    """``kfold.select: cv`` (the default): best_model/ and the logged model are the chosen
    configuration's k-fold test run, trained on train+validation for its best epoch count."""
    import torch

    client, runs = mlflow_runs
    proc, out = tiny_sweep
    parent = next(r for r in runs if r.data.tags.get("run_kind") == "sweep")
    result = json.loads((out / "results.json").read_text())
    sel = result["selection"]
    assert (sel["select"], sel["config_rank"], sel["trial_id"]) == ("cv", 1, result["best_trial_id"])
    assert sel["chosen_by"] == "cv_mean" and sel["retrained"] and len(sel["cv_means"]) == 1
    # it trained on every train and validation row: the count its own run wrote into model.pt
    rows = re.search(r"\(train (\d+), validation (\d+), test \d+\)", proc.stdout)
    assert rows is not None
    saved = torch.load(out / "best_model" / "model.pt", map_location="cpu", weights_only=True)
    assert saved["train_rows"] == int(rows[1]) + int(rows[2]) == sel["train_rows"]
    best = next(t for t in result["trials"] if t["trial_id"] == result["best_trial_id"])
    best_epoch = next(h["epoch"] for h in best["history"] if h["objective"] == best["objective_best"])
    assert saved["epoch"] == best_epoch == sel["epochs"]
    # the exported weights are that run's: scored in the driver they give its own test score
    test_run = next(r for r in runs if r.data.tags.get("kfold") == "test")
    assert result["test_scores"]["test/malignant/roc_auc"] == pytest.approx(
        test_run.data.metrics["test/malignant/roc_auc"], rel=1e-6
    )
    # the search's best trial's own weights are scored too, for comparison
    assert {"test/malignant/roc_auc", "test/malignant/loss"} <= set(sel["search_test_scores"])
    tags = parent.data.tags
    assert (tags["final_model.select"], tags["final_model.config_rank"], tags["final_model.retrained"]) == (
        "cv",
        "1",
        "true",
    )
    assert tags["final_model.source_trial_id"] == result["best_trial_id"]
    assert tags["final_model.train_rows"] == str(sel["train_rows"]) and tags["final_model.reason"] == sel["reason"]
    assert f"final model: config #1 (trial {result['best_trial_id']}), retrained on train+validation" in proc.stdout
    html = (out / "report.html").read_text()
    assert 'id="final-model"' in html and "retrained on train+validation" in html and "kfold.select: cv" in html


def test_kfold_and_test_runs_are_tagged_under_the_parent(mlflow_runs):
    _, runs = mlflow_runs
    kfold = [r for r in runs if r.data.tags.get("phase") == "kfold"]
    # top_k = 1 configuration x k = 2 folds + 1 test run
    assert sorted(r.data.tags["kfold"] for r in kfold) == ["0", "1", "test"]
    assert {r.data.tags["config_rank"] for r in kfold} == {"1"}
    test_run = next(r for r in kfold if r.data.tags["kfold"] == "test")
    assert 0.5 < test_run.data.metrics["test/malignant/roc_auc"] <= 1.0


def test_report_has_parallel_coordinates_and_kfold_figures_offline(tiny_sweep):
    _, out = tiny_sweep
    html = (out / "report.html").read_text()
    assert 'id="parallel-coordinates"' in html and 'id="kfold-vs-test"' in html
    assert html.count("* plotly.js v") == 1  # embedded once, no CDN
    assert 'http-equiv="refresh"' not in html  # the live page reloaded itself; the final report does not
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", html)  # nothing loaded from the network
    assert (out / "hiplot.html").stat().st_size > 100_000
    result = json.loads((out / "results.json").read_text())
    assert len(result["trials"]) == 4 and len(result["kfold"]) == 1
    # ASHA stopped a trial that was not the last one: its Train workers and CPUs were released
    # (a leaked reservation would have left the next trial pending until the timeout).
    statuses = [t["status"] for t in result["trials"]]
    assert all(s == "FINISHED" for s in statuses)  # stopped early is no failure
    assert "scheduler" in [t.get("stopped_by") for t in result["trials"][:-1]]
    assert len(result["kfold"][0]["fold_scores"]) == 2
    assert (out / "best_model" / "model.pt").is_file()


def test_a_wrong_sweep_file_is_one_line_exit_2_and_creates_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((SWEEPS / "breast_cancer_tiny.yaml").read_text().replace("goal: maximize", "goal: maximise"))
    proc = run_cli("sweep", str(bad), "--output", "results", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "hyperopt.goal" in lines[0] and "bad.yaml:" in lines[0]
    assert not (tmp_path / "results").exists()


def test_a_failing_trial_is_failed_in_mlflow_and_the_sweep_goes_on(tmp_path):
    from mlflow.tracking import MlflowClient

    from ..conftest import ROOT

    proc = run_cli("sweep", str(ROOT / "tests" / "fixtures" / "failing_trial.yaml"), "--output", "r", cwd=tmp_path)
    out = tmp_path / "r" / "failing-trial"
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("failing-trial")
    trials = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("phase") == "search"]
    by_lr = {float(r.data.params["trainer.learning_rate"]): r for r in trials}
    assert set(by_lr) == {1e-2, 1e6}  # RandomSampler(seed=0) draws 1e6 first, then 1e-2
    bad, good = by_lr[1e6], by_lr[1e-2]
    assert bad.info.status == "FAILED"
    assert "training loss is" in bad.data.tags["error"] and "Traceback" not in bad.data.tags["error"]
    traceback = open(client.download_artifacts(bad.info.run_id, "error.txt")).read()
    assert 'ludwig_hpo/train/loop.py", line' in traceback and "FloatingPointError" in traceback  # the worker's frames
    assert "\x1b[" not in traceback
    assert good.info.status == "FINISHED"
    assert proc.returncode == 0, proc.stderr
    assert "failed" in proc.stdout


def test_a_time_budget_that_ends_the_search_says_so_and_no_missing_report_is_named(tmp_path):
    # far more trials than any machine runs in the budget: the budget, not the trial count, ends it
    text = (SWEEPS / "breast_cancer_tiny.yaml").read_text()
    text = text.replace("executor: {num_samples: 4}", "executor: {num_samples: 500, time_budget_s: 15}")
    text = text.replace("kfold: {k: 2, top_k: 1}", "report: {enabled: false}")
    (tmp_path / "budget.yaml").write_text(text)
    proc = run_cli("sweep", "budget.yaml", "--output", "r", cwd=tmp_path)
    out = tmp_path / "r" / "breast-cancer-tiny"
    result = json.loads((out / "results.json").read_text())
    started = len(result["trials"])
    reason = f"time budget reached after {started} of 500 trials"
    assert result["stop_reason"].startswith(reason)
    if proc.returncode == 1:  # a machine too slow to end one trial in the budget
        assert "no trial produced a result" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
    done = next(line for line in proc.stdout.splitlines() if line.startswith("done in "))
    assert f"; {reason}" in done
    # the parent run holds it too: `hpo report` rebuilt from MLflow says why the search ended
    from dashboards.mlflow_source import load_sweep_result

    uri = f"sqlite:///{(out / 'mlflow.db').resolve()}"
    assert load_sweep_result(uri, experiment="breast-cancer-tiny").stop_reason == result["stop_reason"]
    assert not (out / "report.html").exists() and "report:" not in proc.stdout
    for line in proc.stdout.splitlines():  # every path the console names exists
        if line.startswith(("output: ", "results: ")):
            assert Path(tmp_path, line.split(": ", 1)[1].strip()).exists(), line


def test_more_workers_than_cpus_is_an_error_before_any_trial(tmp_path):
    bad = tmp_path / "big.yaml"
    bad.write_text((SWEEPS / "breast_cancer_tiny.yaml").read_text().replace("num_workers: 2", "num_workers: 64"))
    proc = run_cli("sweep", str(bad), "--output", "results", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert "backend.num_workers" in proc.stderr and "64 workers" in proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.timeout(UI_START_TIMEOUT_S + 60)
def test_hpo_ui_serves_the_sweep_store_on_loopback(tiny_sweep):
    from ludwig_hpo.execution.cluster import free_port

    _, out = tiny_sweep
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ludwig_hpo", "ui", str(out), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        # its output once it ended (reading a running server's pipe would block)
        output = lambda: proc.stdout.read() if proc.poll() is not None else ""  # noqa: E731
        wait_until_answering(f"http://127.0.0.1:{port}/health", proc, output=output)
    finally:
        stop_process_group(proc)


@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["SIGINT", "SIGTERM", "SIGTERM-to-the-process-group"],
)
def test_ctrl_c_stops_the_sweep_and_marks_its_runs_killed(tmp_path, sig, group):
    """A signal to the driver, or to its whole process group (``timeout``, a terminal's
    Ctrl-C), which reaches the MLflow store's process too, but not the local Ray cluster's
    daemons (in a session of their own: the driver stops them after marking its runs)."""
    import time

    from mlflow.tracking import MlflowClient

    proc = subprocess.Popen(
        [sys.executable, "-m", "ludwig_hpo", "sweep", str(SWEEPS / "breast_cancer_tiny.yaml"), "--output", "r"],
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        # the budget of a sweep: its start and its stop may take most of it under load
        seen, deadline = "", time.time() + SWEEP_TIMEOUT_S / 2
        while "started (1/4)" not in seen and time.time() < deadline:
            seen += proc.stdout.readline()
        assert "started (1/4)" in seen, seen
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=SWEEP_TIMEOUT_S / 2 - 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, " | ".join(err.strip().splitlines()[-6:])  # Ray's log lines come first
    assert "interrupted" in out + err and "SIGTERM received" not in err
    out_dir = tmp_path / "r" / "breast-cancer-tiny"
    client = MlflowClient(tracking_uri=f"sqlite:///{(out_dir / 'mlflow.db').resolve()}")
    runs = client.search_runs([client.get_experiment_by_name("breast-cancer-tiny").experiment_id])
    assert runs and all(r.info.status == "KILLED" for r in runs), [(r.info.run_name, r.info.status) for r in runs]


def test_hpo_report_rebuilds_the_same_sweep_from_mlflow_alone(tiny_sweep, tmp_path):
    from dashboards.mlflow_source import load_sweep_result
    from ludwig_hpo.results.io import read_result

    _, out = tiny_sweep
    uri = f"sqlite:///{(out / 'mlflow.db').resolve()}"
    proc = run_cli(
        "report",
        "--experiment",
        "breast-cancer-tiny",
        "--tracking-uri",
        uri,
        "-o",
        "rebuilt",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "rebuilt" / "report.html").read_text()
    assert 'id="kfold-vs-test"' in page and 'id="parameter-importance"' in page
    from_mlflow, saved = load_sweep_result(uri, experiment="breast-cancer-tiny"), read_result(out / "results.json")
    assert [
        (t.trial_id, t.status, t.params, t.objective_best, t.objective_last, t.batch_size) for t in from_mlflow.trials
    ] == [(t.trial_id, t.status, t.params, t.objective_best, t.objective_last, t.batch_size) for t in saved.trials]
    assert [[h.metrics for h in t.history] for t in from_mlflow.trials] == [
        [h.metrics for h in t.history] for t in saved.trials
    ]
    assert from_mlflow.kfold == saved.kfold and from_mlflow.parameters == saved.parameters
    assert from_mlflow.best_trial_id == saved.best_trial_id
    assert from_mlflow.wall_time_s == saved.wall_time_s  # one wall time: the sweep's own, logged on the parent run


def test_a_second_sweep_reuses_the_persisted_batch_sizes_and_trains_the_same(tiny_sweep):
    """The same search and seed into another output folder, with the user cache the first run
    filled: no trial probes, every size and every metric is the first run's (CPU). The k-fold
    phase and the report, which come after the search and do not change it, are left out."""
    _, first = tiny_sweep
    cwd = first.parents[1]
    assert (first / "batch_sizes.json").is_file() and (cwd / "cache" / "batch_sizes.json").is_file()
    text = (SWEEPS / "breast_cancer_tiny.yaml").read_text()
    assert "kfold: {k: 2, top_k: 1}" in text
    (cwd / "search_only.yaml").write_text(text.replace("kfold: {k: 2, top_k: 1}", "report: {enabled: false}"))
    proc = run_cli(
        "sweep",
        "search_only.yaml",
        "--output",
        "again",
        cwd=cwd,
        env_extra={"LUDWIG_HPO_CACHE_DIR": str(cwd / "cache")},
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    before, after = _trial_runs(first), _trial_runs(cwd / "again" / "breast-cancer-tiny")
    assert len(before) == len(after) == 4
    assert before[0].data.tags["batch_size_source"] == "probe"  # the first trial of the first run
    assert {r.data.tags["batch_size_source"] for r in after} == {"persisted cache"}

    def scores(run) -> dict[str, float]:
        return {k: v for k, v in run.data.metrics.items() if k == "objective" or ("/" in k and "time/" not in k)}

    for n, (old, run) in enumerate(zip(before, after, strict=True)):
        assert run.data.params == old.data.params and run.info.status == old.info.status
        assert run.data.tags["batch_size"] == old.data.tags["batch_size"]
        assert scores(run) == scores(old) and scores(run), n
    assert "from earlier sweeps" in proc.stdout


def test_hpo_train_from_a_sweep_logs_into_the_sweeps_store_under_its_parent(tiny_sweep, tmp_path):
    """Last in this module: it adds runs to the sweep's store (which the report source skips)."""
    from mlflow.tracking import MlflowClient

    from dashboards.mlflow_source import load_sweep_result

    _, out = tiny_sweep
    proc = run_cli(
        "train", str(SWEEPS / "breast_cancer_tiny.yaml"), "--from-sweep", str(out), "--output", "t", cwd=tmp_path
    )
    assert proc.returncode == 0, f"train failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    uri = f"sqlite:///{(out / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("breast-cancer-tiny")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    sweep = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    (train,) = [r for r in runs if r.info.run_name.startswith("breast-cancer-tiny-train-")]
    assert train.data.tags["mlflow.parentRunId"] == sweep.info.run_id and train.info.status == "FINISHED"
    (trial,) = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == train.info.run_id]
    assert trial.info.status == "FINISHED" and trial.data.tags["run_kind"] == "trial"
    assert [m.source_run_id for m in client.search_logged_models(experiment_ids=[exp.experiment_id])].count(
        train.info.run_id
    ) == 2  # the raw-row model and the PyTorch one
    assert not (tmp_path / "t" / "breast-cancer-tiny-train" / "mlflow.db").exists()  # no store of its own
    assert len(load_sweep_result(uri, experiment="breast-cancer-tiny").trials) == 4  # the sweep's own trials


def test_the_best_model_scores_raw_rows_the_same_everywhere(mlflow_runs, tiny_sweep, tmp_path):
    """The logged raw-row model (``runs:/<parent>/model``) on the sweep's own test rows as a
    user has them (a CSV of the dataset's columns): ``hpo evaluate --split test`` gives
    results.json's test scores, and ``hpo predict``, the pyfunc model in Python and ``hpo
    serve`` over HTTP on 127.0.0.1 give the same predictions, whose accuracy is the test score."""
    import urllib.request

    import pandas as pd

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.data.preprocess import kept_rows
    from ludwig_hpo.execution.cluster import free_port

    client, runs = mlflow_runs
    _, out = tiny_sweep
    parent = next(r for r in runs if r.data.tags.get("run_kind") == "sweep")
    expected = json.loads((out / "results.json").read_text())["test_scores"]
    cfg = load_sweep(SWEEPS / "breast_cancer_tiny.yaml").config
    df = load_dataframe(cfg.dataset.source, SWEEPS)
    df.to_csv(tmp_path / "rows.csv", index=False)
    ev = run_cli("evaluate", str(out), "--dataset", "rows.csv", "--split", "test", "-o", "ev.json", cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr[-3000:]
    scores = json.loads((tmp_path / "ev.json").read_text())
    assert expected and {k: pytest.approx(v, rel=1e-6) for k, v in expected.items()} == {k: scores[k] for k in expected}

    kept = kept_rows(df, cfg)
    test = kept.df.iloc[kept.splits["test"]].reset_index(drop=True)
    features = test.drop(columns=["malignant"])
    features.to_csv(tmp_path / "test.csv", index=False)
    pr = run_cli("predict", str(out), "--dataset", "test.csv", "-o", "pred.csv", cwd=tmp_path)
    assert pr.returncode == 0 and f"predictions: {len(test)} of {len(test)} rows" in pr.stdout, pr.stderr[-3000:]
    predicted = pd.read_csv(tmp_path / "pred.csv")
    accuracy = (predicted["malignant_predictions"] == test["malignant"].astype(bool)).mean()
    assert accuracy == pytest.approx(expected["test/malignant/accuracy"])

    saved = dict(os.environ)
    try:
        os.environ["MLFLOW_TRACKING_URI"] = client.tracking_uri  # where runs:/ URIs resolve
        import mlflow.pyfunc

        model = mlflow.pyfunc.load_model(f"runs:/{parent.info.run_id}/model")
        in_python = model.predict(features)
    finally:  # MLflow's torch import also sets KMP_* variables
        os.environ.clear()
        os.environ.update(saved)
    true = "malignant_probabilities_True"
    assert in_python[true].to_numpy() == pytest.approx(predicted[true].to_numpy(), rel=1e-6)

    port = free_port()  # mlflow models serve -m runs:/<parent>/model, in the sweep's store
    log = tmp_path / "serve.log"  # a file, not a pipe nobody reads while it serves
    with open(log, "w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "ludwig_hpo", "serve", f"runs:/{parent.info.run_id}/model", "--port", str(port)],
            cwd=tmp_path,
            env={**os.environ, "MLFLOW_TRACKING_URI": client.tracking_uri},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_answering(f"http://127.0.0.1:{port}/ping", server, output=log.read_text)
        body = json.dumps({"dataframe_records": features.head(10).to_dict(orient="records")}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/invocations", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            served = pd.DataFrame(json.loads(reply.read())["predictions"])
    finally:
        stop_process_group(server)
    assert list(served.columns) == list(predicted.columns)
    assert served[true].to_numpy() == pytest.approx(predicted[true].head(10).to_numpy(), rel=1e-6)
    assert (served["malignant_predictions"] == predicted["malignant_predictions"].head(10)).all()
