"""End-to-end against a real ``mlflow server`` started on a free loopback port (and stopped by
its PID): the tiny sweep lands there completely, through ``MLFLOW_TRACKING_URI``, and an
inherited ``MLFLOW_RUN_ID`` (a sweep launched from inside another MLflow run) changes nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ..conftest import SWEEPS
from ..servers import UI_START_TIMEOUT_S, stop_process_group, wait_until_answering
from .test_sweep_cli import SWEEP_TIMEOUT_S, check_sweep_tree, load_best_model_and_score_test_rows, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + UI_START_TIMEOUT_S + 60)]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """``mlflow server`` (1 worker, no job runner: 2 processes) on 127.0.0.1; yields its URI."""
    from ludwig_hpo.execution.cluster import free_port

    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    mlflow = shutil.which("mlflow") or str(Path(sys.executable).parent / "mlflow")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [
            mlflow,
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{root / 'server.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(f"{uri}/health", proc, output=(root / "server.log").read_text)
        yield uri
    finally:
        stop_process_group(proc)  # its own session: the server and its worker only
        log.close()


def test_the_sweep_lands_completely_on_a_server_and_an_inherited_run_id_changes_nothing(mlflow_server, tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    outer_exp = client.create_experiment("outer")
    outer = client.create_run(outer_exp, run_name="notebook").info.run_id
    proc = run_cli(
        "sweep",
        str(SWEEPS / "breast_cancer_tiny.yaml"),
        "--output",
        "results",
        cwd=tmp_path,
        env_extra={"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_RUN_ID": outer},
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert "from MLFLOW_TRACKING_URI" in proc.stdout and f"MLFLOW_RUN_ID={outer} is ignored" in proc.stdout
    assert not (tmp_path / "results" / "breast-cancer-tiny" / "mlflow.db").exists()

    exp = client.get_experiment_by_name("breast-cancer-tiny")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parent = check_sweep_tree(client, runs)
    assert parent.info.run_id != outer
    # the outer run got nothing: no children, params, metrics, tags of the sweep, artifacts
    after = client.get_run(outer)
    assert after.info.status == "RUNNING" and not after.data.params and not after.data.metrics
    assert not {k for k in after.data.tags if not k.startswith("mlflow.")} and not client.list_artifacts(outer)
    assert not client.search_runs([outer_exp, exp.experiment_id], f"tags.mlflow.parentRunId = '{outer}'")
    assert load_best_model_and_score_test_rows(mlflow_server, parent) > 0.7
    # the sweep's own report links each trial to its run on the server (the server is its UI)
    page = (tmp_path / "results" / "breast-cancer-tiny" / "report.html").read_text()
    hrefs = re.findall(r'<a class="run-link" href="([^"]+)"', page)
    trials = {
        r.data.tags["trial_id"]: r.info.run_id
        for r in runs
        if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id and r.data.tags.get("phase") == "search"
    }
    assert trials and len(hrefs) == len(trials)
    assert set(hrefs) == {f"{mlflow_server}/#/experiments/{exp.experiment_id}/runs/{rid}" for rid in trials.values()}


@pytest.mark.timeout(UI_START_TIMEOUT_S + 60)
def test_hpo_ui_prints_the_run_list_of_the_sweeps_experiment_and_the_server_answers_it(tmp_path):
    """``hpo ui DIR --no-browser`` on 127.0.0.1 (a store with one parent run, no sweep needed):
    the printed URL is :func:`ludwig_hpo.driver.ui.runs_url` of the parent run's experiment, the
    server answers its page, and that experiment, which its UI opens on its runs."""
    import json
    import re

    from ludwig_hpo.driver.ui import runs_url
    from ludwig_hpo.execution.cluster import free_port
    from ludwig_hpo.tracking.mlflow_store import MlflowStore

    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "ui-sweep")
    parent = store.start_run("ui-sweep-20260101-000000", tags={"run_kind": "sweep"})
    state = {"fingerprint": "f", "sweep_file": "s.yaml", "parent_run_id": parent, "tracking_uri": store.uri}
    (tmp_path / "state.json").write_text(json.dumps(state))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ludwig_hpo", "ui", str(tmp_path), "--port", str(port), "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        first = proc.stdout.readline() + proc.stdout.readline()
        url = re.search(r"http://\S+", first).group(0)
        assert url == runs_url("127.0.0.1", port, store.experiment_id)
        page, api = url.split("#")[0], f"http://127.0.0.1:{port}/ajax-api/2.0/mlflow/experiments/get"
        wait_until_answering(page, proc, output=lambda: first + (proc.stdout.read() if proc.poll() is not None else ""))
        with urllib.request.urlopen(page, timeout=10) as r:
            assert r.status == 200 and "<html" in r.read().decode().lower()
        with urllib.request.urlopen(f"{api}?experiment_id={store.experiment_id}", timeout=10) as r:
            experiment = json.loads(r.read())["experiment"]
        assert r.status == 200 and experiment["name"] == "ui-sweep"
        assert {"key": "mlflow.experimentKind", "value": "custom_model_development"} in experiment["tags"]
    finally:
        stop_process_group(proc)
