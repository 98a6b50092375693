"""Resume for real: a sweep's whole process group is killed with SIGKILL after two trials ended
and while another is mid-way; the same command then finishes it. Nothing finished is run
again, the interrupted trial continues from its checkpoint, nothing is duplicated in MLflow,
nothing is left RUNNING, and the report is complete."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ludwig_hpo.execution import ray_temp

from ..conftest import SWEEPS
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2 * SWEEP_TIMEOUT_S + 120)]

TRIAL_END = re.compile(r"trial_\w+ (completed|finished|stopped early|failed)")


def _processes() -> dict[int, tuple[int, bytes]]:
    """Live processes: pid -> (session id, command line); a zombie is already dead."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()  # fields 3 and 6 of /proc/PID/stat: state and session id
            if fields[0] != "Z":
                found[int(entry.name)] = (int(fields[3]), cmdline)
    return found


def _sweep_sessions(sid: int, cluster: Path | None) -> set[int]:
    """The sessions of the sweep started as session ``sid``: its own, and one per daemon of its
    local Ray cluster (GCS, raylet, dashboard, ...: they name the cluster's temp folder
    ``cluster`` on their command lines and lead sessions of their own, which hold their children;
    the raylet's workers and agents rename themselves ``ray::<name>``)."""
    daemons = {
        pid
        for pid, (session, cmdline) in _processes().items()
        if cluster and pid == session and str(cluster).encode() in cmdline
    }
    return {sid} | daemons


def _sweep_pids(sessions: set[int]) -> list[int]:
    """Live processes of the sweep's ``sessions`` (they outlive their leaders)."""
    return [pid for pid, (session, _) in _processes().items() if session in sessions]


def _kill_session(sid: int, *, keep_cluster_folder: bool = False) -> Path | None:
    """SIGKILL the sweep's process group, then anything else left of it, and remove its local
    cluster's temp folder (a driver killed outright cannot; the next sweep's cluster does)
    unless ``keep_cluster_folder``; returns that folder. Ray names the cluster's session
    folder after the driver's PID, here ``sid``."""
    cluster = next((p.parent for p in ray_temp.ROOT.glob(f"{ray_temp.PREFIX}*/session_*_{sid}")), None)
    sessions = _sweep_sessions(sid, cluster)  # before the kill: the daemons die with the driver
    try:
        os.killpg(sid, signal.SIGKILL)
    except ProcessLookupError:  # the sweep already ended
        pass
    deadline = time.time() + 30
    while (left := _sweep_pids(sessions)) and time.time() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
    assert not _sweep_pids(sessions), "processes of the killed sweep survived"
    if cluster is not None and not keep_cluster_folder:
        shutil.rmtree(cluster, ignore_errors=True)
    return cluster


def _start_sweep(sweep: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """``hpo sweep SWEEP --output r`` in ``cwd``, in a session of its own (so it can be killed
    whole), its output merged into one text pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "ludwig_hpo", "sweep", str(sweep), "--output", "r"],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _client(out: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")


def _runs(out: Path):
    client = _client(out)
    exp = client.get_experiment_by_name("breast-cancer-tiny")
    return client.search_runs([exp.experiment_id], max_results=1000)


#: The tiny sweep's metric: a trial's run holds its objective under this name.
METRIC = "validation/malignant/roc_auc"
#: Long enough that a poll of the store (a few tenths of a second) finds a trial far from both ends.
EPOCHS = 60


def _mid_trial(out: Path) -> str | None:
    """The trial id of a running trial with 10 to EPOCHS - 10 epochs logged, if any, far from
    both ends (so it is mid-way when the kill lands) and with a checkpoint that Tune's saved
    state names (a trial writes one when it has cost at most 2% of its training time)."""
    try:
        client = _client(out)
        exp = client.get_experiment_by_name("breast-cancer-tiny")
        for r in client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'"):
            if r.data.tags.get("phase") == "search":
                steps = len(client.get_metric_history(r.info.run_id, METRIC))
                if 10 <= steps <= EPOCHS - 10 and _known_checkpoint(out, r.data.tags["trial_id"]):
                    return r.data.tags["trial_id"]
    except Exception:  # the store is being written; try again
        return None
    return None


def _known_checkpoint(out: Path, trial_id: str) -> Path | None:
    """The checkpoint folder that Tune's newest saved state names for search trial ``trial_id``
    while it is running there, if any and still on disk: what a resumed sweep continues it from
    (a checkpoint written but not yet in the saved state is not)."""
    from ludwig_hpo.driver.paths import SEARCH, SweepPaths

    folder = SweepPaths(out).experiment(SEARCH)
    try:
        newest = max(folder.glob("experiment_state-*.json"), key=lambda f: f.stat().st_mtime)
        for trial, runtime in json.loads(newest.read_text())["trial_data"]:
            meta = json.loads(trial)
            if meta["trial_id"] == trial_id and meta["status"] == "RUNNING":
                # the trial's checkpoint manager is a cloudpickle, as hex: the folder name is in its bytes
                pickled = bytes.fromhex(json.loads(runtime)["checkpoint_manager"]["value"])
                names = re.findall(rb"checkpoint_\d{6}", pickled)
                kept = list(folder.glob(f"*_{trial_id}_*/{names[-1].decode()}")) if names else []
                return kept[0] if kept else None
    except (OSError, ValueError, KeyError):  # a state being replaced, a trial not in it yet
        return None
    return None


def test_a_sweep_killed_with_sigkill_resumes_with_nothing_lost(tmp_path):
    # the tiny sweep with longer trials (EPOCHS short epochs), so one is caught mid-way by the kill
    raw = yaml.safe_load((SWEEPS / "breast_cancer_tiny.yaml").read_text())
    raw["trainer"]["epochs"] = EPOCHS
    raw["hyperopt"]["scheduler"] = {"type": "fifo"}  # no trial ends early, at a rung, under the kill
    sweep = tmp_path / "tiny.yaml"
    sweep.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    proc = _start_sweep(sweep, tmp_path, env)
    out = tmp_path / "r" / "breast-cancer-tiny"
    seen, ended, caught = [], 0, None
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout], daemon=True).start()
    try:
        deadline = time.time() + SWEEP_TIMEOUT_S
        while time.time() < deadline and caught is None:
            try:
                line = lines.get(timeout=0.2)
                seen.append(line)
                ended += bool(TRIAL_END.search(line))
            except queue.Empty:
                if proc.poll() is not None:
                    break
            if ended >= 2:
                caught = _mid_trial(out)
    finally:
        cluster = _kill_session(proc.pid, keep_cluster_folder=True)
        proc.wait()
    assert ended >= 2 and caught, "".join(seen)
    assert cluster is not None and cluster.is_dir()  # the killed sweep's temp folder stayed
    assert json.loads((out / "state.json").read_text())["phase"] == "search"

    before = {
        r.data.tags["trial_id"]: r
        for r in _runs(out)
        if r.data.tags.get("phase") == "search" and r.info.status in ("FINISHED", "KILLED", "FAILED")
    }
    assert len(before) >= 2

    again = run_cli("sweep", str(sweep), "--output", "r", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming the unfinished sweep" in again.stdout
    # the continued trials report no step twice to Optuna (it would warn "step=N is already reported")
    assert "already reported" not in again.stdout + again.stderr
    assert not (tmp_path / "r" / "breast-cancer-tiny_1").exists()
    assert not cluster.exists()  # the resumed sweep removed its dead predecessor's temp folder

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
    for r in trials:  # continued or not, no trial logged an epoch twice
        history = client.get_metric_history(r.info.run_id, METRIC)
        assert len({m.step for m in history}) == len(history) == len(result_history(result, r))
    continued = {
        r.data.tags["trial_id"]: int(r.data.tags["resumed_from_epoch"])
        for r in trials
        if "resumed_from_epoch" in r.data.tags
    }
    assert continued.get(caught, 0) >= 1, f"{caught} ran again from epoch 1: {continued}"
    # every trial ends FINISHED, and one that ran every epoch has no tag of an early stop
    for r in trials:
        assert (r.info.status, r.data.tags["status"]) == ("FINISHED", "FINISHED")
        epochs = len(result_history(result, r))
        if epochs == EPOCHS:
            assert not {"stopped_by", "stopped_at_epoch"} & set(r.data.tags), r.data.tags
        else:
            assert r.data.tags["stopped_by"] in ("scheduler", "time budget")
    print(
        f"\nkill-and-resume: {len(before)} trial(s) ended before SIGKILL, {4 - len(before)} ran after "
        f"({len(continued)} continued from a checkpoint: {continued}); {len(ids)} trial runs, "
        f"{len(ids) - len(set(ids))} duplicates"
    )


def result_history(result: dict, run) -> list:
    """The epochs results.json holds for the trial of MLflow run ``run``."""
    return next(t["history"] for t in result["trials"] if t["trial_id"] == run.data.tags["trial_id"])


def test_trials_that_ended_after_tunes_last_save_are_not_run_again(tmp_path):
    # Tune saves its state rarely in large sweeps; a long period here does the same to a small
    # one: the trials that end before the kill are in the journal only.
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    env["TUNE_GLOBAL_CHECKPOINT_S"] = "100000"
    raw = yaml.safe_load((SWEEPS / "breast_cancer_tiny.yaml").read_text())
    raw.pop("kfold")  # the search phase is what this test is about
    raw["report"] = {"enabled": False}
    sweep = tmp_path / "tiny.yaml"
    sweep.write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = _start_sweep(sweep, tmp_path, env)
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
    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    # a run's end is written in the background: a trial the journal holds may still be RUNNING
    before = {
        r.data.tags["trial_id"]: r
        for r in _runs(out)
        if r.data.tags.get("phase") == "search" and r.info.status in ("FINISHED", "KILLED")
    }
    journaled = {e["trial_id"]: e for e in journal}
    assert set(before) <= set(journaled) and len(journaled) >= 2

    again = run_cli(
        "sweep", str(sweep), "--output", "r", cwd=tmp_path, env_extra={"TUNE_GLOBAL_CHECKPOINT_S": "100000"}
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    runs = _runs(out)
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    lost = [r for r in runs if r.data.tags.get("phase") == "search" and "note" in r.data.tags]
    assert all(r.info.status == "KILLED" and r.data.tags["stopped_by"] == "interrupted" for r in lost)
    lost_ids = {r.info.run_id for r in lost}
    kept = {
        r.data.tags["trial_id"]: r
        for r in runs
        if r.data.tags.get("phase") == "search" and r.info.run_id not in lost_ids
    }
    assert len(kept) == 4  # num_samples: the journal's trials count, none ran twice
    for tid, r in before.items():
        assert kept[tid].data.metrics == r.data.metrics
    for tid, e in journaled.items():  # those still RUNNING at the kill are completed as journaled
        assert kept[tid].info.status == e["status"]
        steps = [m.step for m in _client(out).get_metric_history(kept[tid].info.run_id, METRIC)]
        assert sorted(set(steps)) == [r["epoch"] for r in e["results"]]
    result = json.loads((out / "results.json").read_text())
    assert sorted(t["trial_id"] for t in result["trials"]) == sorted(kept)
    print(
        f"\nended after the last saved state: {len(before)} trial(s) kept from the journal; "
        f"{len(kept) - len(before)} ran after the resume; {len(lost)} lost run(s) marked KILLED"
    )
