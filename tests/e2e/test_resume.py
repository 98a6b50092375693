"""Resume for real: a sweep's whole process group is killed with SIGKILL after two trials ended;
the same command then finishes it. Nothing finished is run again, nothing is duplicated in
MLflow, nothing is left RUNNING, and the report is complete."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import SWEEPS
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2 * SWEEP_TIMEOUT_S + 120)]

TRIAL_END = re.compile(r"trial_\w+ (finished|stopped early|failed)")


def _session_pids(sid: int) -> list[int]:
    """Processes of session ``sid`` (Ray workers put themselves in their own process groups,
    but stay in the session the test created)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            # fields 3 and 6 of /proc/PID/stat: state and session id; a zombie is already dead
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def _kill_session(sid: int) -> None:
    """SIGKILL the sweep's process group, then anything else left in its session."""
    os.killpg(sid, signal.SIGKILL)
    deadline = time.time() + 30
    while (left := _session_pids(sid)) and time.time() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
    assert not _session_pids(sid), "processes of the killed sweep survived"


def _client(out: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")


def _runs(out: Path):
    client = _client(out)
    exp = client.get_experiment_by_name("breast-cancer-tiny")
    return client.search_runs([exp.experiment_id], max_results=1000)


def test_a_sweep_killed_with_sigkill_resumes_with_nothing_lost(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    proc = subprocess.Popen([sys.executable, "-m", "ludwig_hpo", "sweep", str(SWEEPS / "breast_cancer_tiny.yaml"),
                             "--output", "r"], cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    seen, ended = [], 0
    try:
        deadline = time.time() + SWEEP_TIMEOUT_S
        while ended < 2 and time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            ended += bool(TRIAL_END.search(line))
    finally:
        _kill_session(proc.pid)
        proc.wait()
    assert ended >= 2, "".join(seen)
    out = tmp_path / "r" / "breast-cancer-tiny"
    assert json.loads((out / "state.json").read_text())["phase"] == "search"

    before = {r.data.tags["trial_id"]: r for r in _runs(out)
              if r.data.tags.get("phase") == "search" and r.info.status in ("FINISHED", "KILLED", "FAILED")}
    assert len(before) >= 2

    again = run_cli("sweep", str(SWEEPS / "breast_cancer_tiny.yaml"), "--output", "r", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming the unfinished sweep" in again.stdout
    assert not (tmp_path / "r" / "breast-cancer-tiny_1").exists()

    runs, client = _runs(out), _client(out)
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    assert len([r for r in runs if "mlflow.parentRunId" not in r.data.tags]) == 1
    trials = [r for r in runs if r.data.tags.get("phase") == "search"]
    ids = [r.data.tags["trial_id"] for r in trials]
    assert len(ids) == 4 and len(set(ids)) == 4  # num_samples in all, no duplicate runs
    after = {r.data.tags["trial_id"]: r for r in trials}
    for tid, r in before.items():  # trials that ended before the kill kept their results
        assert after[tid].info.status == r.info.status
        assert after[tid].data.metrics == r.data.metrics
        history = client.get_metric_history(after[tid].info.run_id, "validation/malignant/roc_auc")
        assert len({m.step for m in history}) == len(history)  # no epoch logged twice
    result = json.loads((out / "results.json").read_text())
    assert sorted(t["trial_id"] for t in result["trials"]) == sorted(ids)
    assert len(result["kfold"]) == 1 and (out / "report.html").is_file()
    assert json.loads((out / "state.json").read_text())["phase"] == "finished"
    print(f"\nkill-and-resume: {len(before)} trial(s) ended before SIGKILL, {4 - len(before)} ran after; "
          f"{len(ids)} trial runs, {len(ids) - len(set(ids))} duplicates")
