"""Every bench script runs against the current package at tiny sizes.

Each script runs as a subprocess of its own (as a developer runs it: ``python bench/<name>.py``)
with sizes that make it take seconds. The test checks the mechanism only: the script ends with
its ``name=value`` line, writes ``<bench>.json`` with the same figures and its stamp, and leaves
no process behind. It never checks a figure's value: these sizes measure nothing.
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: Set in a bench's environment and inherited by every process it starts (Ray's daemons and
#: workers too), so the test finds exactly what one run left behind.
TOKEN_ENV = "HPO_BENCH_SMOKE_TOKEN"
#: Upper bounds that catch a hung bench, not speed figures: each run takes seconds to tens of seconds.
RUN_TIMEOUT_S = 240
RAY_RUN_TIMEOUT_S = 360
#: How long Ray's processes may take to exit after the bench's process ended.
EXIT_GRACE_S = 20
COMMIT = re.compile(r"^[0-9a-f]{40}(\+dirty)?$")
STAMP_KEYS = {
    "commit",
    "started_utc",
    "finished_utc",
    "wall_s",
    "cpu_count",
    "nproc",
    "loadavg_start",
    "loadavg_end",
    "python",
    "torch",
    "ray",
    "platform",
    "argv",
    "args",
}


@dataclass(frozen=True)
class Case:
    """One bench script, the tiny arguments it runs with, and the names of its last line."""

    bench: str
    args: tuple[str, ...]
    figures: tuple[str, ...]
    timeout_s: int = RUN_TIMEOUT_S
    #: the results folder comes from ``HPO_BENCH_RESULTS_DIR`` instead of ``--results-dir``
    via_env: bool = False


CASES = [
    Case("train_loop", ("--repeats", "1", "--epochs", "3"), ("ratio_vs_plain",)),
    Case(
        "text_throughput", ("--repeats", "1", "--epochs", "1", "--rows", "120", "--length", "16"), ("ratio_vs_plain",)
    ),
    Case(
        "llm_throughput",
        ("--repeats", "1", "--rows", "60", "--layers", "2", "--hidden", "32"),
        ("tokens_per_s", "plain_tokens_per_s", "ratio_vs_plain"),
    ),
    Case(
        "batch_size",
        ("--epochs", "1", "--steps", "2", "--repeats", "1", "--cache-trials", "2"),
        ("throughput_ratio", "tuning_fraction", "cache_hit_rate"),
    ),
    Case(
        "search_efficiency",
        ("--seeds", "1", "--random-trials", "4", "--tpe-trials", "4", "--epochs", "3"),
        ("tpe_trials_to_random_best4",),
    ),
    Case(
        "report_build",
        ("12",),
        ("trials", "build_s", "report_mb", "hiplot_mb", "importance_s"),
        via_env=True,
    ),
    Case(
        "serving",
        ("--train-rows", "100", "--repeats", "1", "--numbers", "2"),
        ("request_ms", "forward_ms", "prepare_share"),
    ),
    Case(
        "final_model",
        ("--seeds", "1", "--trials", "2"),
        ("test_delta_cv_vs_search", "other_config_chosen", "roc_auc_delta_cv_vs_search"),
    ),
]
RAY_CASES = [
    Case(
        "bookkeeping",
        ("--trials", "4", "--concurrency", "2", "--epochs", "3", "--output-dir", "{tmp}/sweep"),
        ("driver_s_per_trial", "peak_rss_mb"),
        timeout_s=RAY_RUN_TIMEOUT_S,
    ),
    Case(
        "trial_overhead",
        ("--num-samples", "1", "--executors", "pooled", "--epochs", "3"),
        ("overhead_s_per_trial", "train_s_per_trial", "sweep_efficiency"),
        timeout_s=RAY_RUN_TIMEOUT_S,
    ),
    Case(
        "footprint",
        ("sweeps/breast_cancer_tiny.yaml", "--repeats", "1", "--num-samples", "1", "--epochs", "1", "--no-kfold"),
        (
            "peak_rss_gb",
            "peak_pss_gb",
            "first_trial_s",
            "first_epoch_s",
            "wall_s",
            "validate_s",
            "validate_mb",
            "schema_s",
        ),
        timeout_s=RAY_RUN_TIMEOUT_S,
    ),
    Case(
        "data_scale",
        ("--base-rows", "3000", "--scales", "1", "--trials", "1", "--epochs", "1", "--object-store-mb", "100"),
        ("pss_1x_gb", "pss_growth_16x", "stream_ratio", "rows_seen_once"),
        timeout_s=RAY_RUN_TIMEOUT_S,
    ),
]


def _processes_with(token: str) -> list[int]:
    """Live processes (not zombies) whose environment holds ``TOKEN_ENV=token`` (Linux; elsewhere none)."""
    wanted = f"{TOKEN_ENV}={token}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if wanted in environ.split(b"\0") and stat.rsplit(")", 1)[1].split()[0] != "Z":
            found.append(int(entry.name))
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _args(case: Case, tmp: Path) -> list[str]:
    """The case's arguments, ``{tmp}`` replaced by the test's temp folder."""
    return [a.replace("{tmp}", str(tmp)) for a in case.args]


def _run(case: Case, results_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the bench in a session of its own; afterwards nothing it started may still run.

    A bench that outlives its timeout, or leaves processes behind, has them killed and fails.
    """
    token = uuid.uuid4().hex
    env = {**os.environ, TOKEN_ENV: token}
    argv = [sys.executable, str(ROOT / "bench" / f"{case.bench}.py"), *_args(case, results_dir)]
    if case.via_env:
        env["HPO_BENCH_RESULTS_DIR"] = str(results_dir)
    else:
        argv += ["--results-dir", str(results_dir)]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=case.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        _kill(_processes_with(token))
        pytest.fail(f"{case.bench} ran past {case.timeout_s}s\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}")
    deadline = time.monotonic() + EXIT_GRACE_S
    while (left := _processes_with(token)) and time.monotonic() < deadline:
        time.sleep(0.5)
    _kill(left)
    assert not left, f"{case.bench} left processes running: {left}"
    # a local Ray cluster names its session folder after the driver's pid; its temp folder goes with it
    assert not list(Path(tempfile.gettempdir()).glob(f"hpo-ray-*/session_*_{proc.pid}")), "Ray's temp folder was left"
    assert proc.returncode == 0, (
        f"{case.bench} exited {proc.returncode}\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-5000:]}"
    )
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _last_line(stdout: str) -> dict[str, str]:
    """The ``name=value`` pairs of the last non-empty line; each value a number or ``>N``."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines, "the bench printed nothing"
    pairs = dict(token.split("=", 1) for token in lines[-1].split())
    for name, value in pairs.items():
        float(value.removeprefix(">"))  # raises on a value that is not a figure
        assert name, lines[-1]
    return pairs


def _check(case: Case, results_dir: Path, done: subprocess.CompletedProcess[str]) -> dict:
    printed = _last_line(done.stdout)
    assert tuple(printed) == case.figures
    doc = json.loads((results_dir / f"{case.bench}.json").read_text())
    assert doc["bench"] == case.bench
    assert tuple(doc["figures"]) == case.figures
    for name, value in doc["figures"].items():
        if isinstance(value, str):
            assert value == printed[name]
        else:  # the line holds the file's value, rounded
            assert float(printed[name]) == pytest.approx(value, rel=0.05, abs=0.01)
    stamp = doc["stamp"]
    assert set(stamp) == STAMP_KEYS
    assert COMMIT.match(stamp["commit"]), stamp["commit"]
    started = datetime.fromisoformat(stamp["started_utc"])
    assert started.utcoffset() is not None and started.utcoffset().total_seconds() == 0
    assert datetime.fromisoformat(stamp["finished_utc"]) >= started
    assert stamp["cpu_count"] == os.cpu_count()
    assert stamp["nproc"] >= 1
    for load in (stamp["loadavg_start"], stamp["loadavg_end"]):
        assert len(load) == 3 and all(v >= 0 for v in load)
    assert stamp["python"] == platform.python_version()
    assert stamp["torch"] == metadata.version("torch")
    assert stamp["ray"] == metadata.version("ray")
    assert stamp["argv"][1 : len(case.args) + 1] == _args(case, results_dir)
    assert stamp["args"]["results_dir"] == (None if case.via_env else str(results_dir))
    return doc


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("case", CASES, ids=[c.bench for c in CASES])
def test_bench_runs_and_writes_stamped_figures(case: Case, tmp_path: Path) -> None:
    done = _run(case, tmp_path)
    _check(case, tmp_path, done)


@pytest.mark.e2e
@pytest.mark.timeout(RAY_RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("case", RAY_CASES, ids=[c.bench for c in RAY_CASES])
def test_ray_bench_runs_stops_its_cluster_and_writes_stamped_figures(case: Case, tmp_path: Path) -> None:
    done = _run(case, tmp_path)
    _check(case, tmp_path, done)
