"""The worker entry on local processes without Ray (``ludwig_hpo.execution.local``): 2 gloo
ranks spawned by torch.multiprocessing, as a sweep's ranks run it, and its command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.errors import TrialError
from ludwig_hpo.execution.local import run_local
from ludwig_hpo.execution.spec import TrialSpec

from ..conftest import ROOT, SWEEPS

pytestmark = pytest.mark.timeout(300)

#: Keys that are per-rank measurements or rank 0's alone; every other reported key is the same on each rank.
PER_RANK = ("_time_s", "_tuning_s", "samples_per_s", "checkpoint_")


def _trial(backend=None, **trainer):
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    raw = {**loaded.raw, "trainer": {**loaded.raw["trainer"], "epochs": 2, **trainer}}
    if backend is not None:
        raw["backend"] = {**loaded.raw.get("backend", {}), **backend}
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    return TrialSpec(raw=raw, params={"combiner.output_size": 8}), data


def _no_ray(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import ray`` fails (in the process and the ranks it spawns)."""
    fake = tmp_path / "no_ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('Ray is not installed here')\n")
    path = os.pathsep.join([str(fake.parent), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def test_two_gloo_ranks_report_the_same_metrics_and_rank_0s_epochs_arrive():
    spec, data = _trial()
    arrived: list[dict] = []
    run = run_local(spec, data, workers=2, device="cpu", on_report=arrived.append)
    r0, r1 = run.reports
    assert [m["epoch"] for m in r0] == [m["epoch"] for m in r1] == [1, 2]
    assert arrived == list(r0)  # each of rank 0's reports reached the caller, in order
    for a, b in zip(r0, r1, strict=True):
        shared = {k for k in a if not any(p in k for p in PER_RANK)}
        assert {k for k in b if not any(p in k for p in PER_RANK)} == shared
        assert {k: a[k] for k in shared} == {k: b[k] for k in shared}
    assert r0[0]["world_size"] == 2 and r0[0]["global_batch_size"] == 2 * r0[0]["batch_size"]
    assert "batch_size_tried" in r0[0]  # batch_size: auto was searched inside the group


def test_fsdp_ranks_end_cleanly_once_every_report_is_sent():
    # FSDP2 keeps the process group alive past destroy_process_group: the ranks must end
    # without the interpreter teardown that races its gloo threads, and lose no report.
    spec, data = _trial(backend={"num_workers": 2, "strategy": "fsdp"})
    r0, r1 = run_local(spec, data, workers=2, device="cpu").reports
    assert [m["epoch"] for m in r0] == [m["epoch"] for m in r1] == [1, 2]
    assert r0[-1]["objective"] == r1[-1]["objective"]


def test_a_spawned_rank_ends_with_code_0_its_output_flushed_and_no_teardown():
    code = (
        "import atexit, sys\n"
        "from ludwig_hpo.execution.local import end_spawned_rank\n"
        "atexit.register(lambda: print('teardown ran'))\n"
        "sys.stdout.write('rank output, no newline')\n"
        "sys.stderr.write('rank warning, no newline')\n"
        "end_spawned_rank()\n"
        "raise SystemExit(3)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout, out.stderr) == (0, "rank output, no newline", "rank warning, no newline")


def test_a_rank_that_raises_fails_the_run_with_its_error():
    # SGD at lr 1e6 diverges: every rank raises FloatingPointError in the first epoch
    spec, data = _trial(optimizer={"type": "sgd"}, learning_rate=1e6, batch_size=16)
    with pytest.raises(TrialError, match="FloatingPointError"):
        run_local(spec, data, workers=2, device="cpu")


def test_the_command_line_trains_the_files_values_without_ray(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ludwig_hpo.execution.local",
            str(SWEEPS / "breast_cancer_tiny.yaml"),
            "--workers",
            "2",
            "--epochs",
            "1",
        ],
        capture_output=True,
        text=True,
        env=_no_ray(tmp_path),
        cwd=tmp_path,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "2 worker(s) on cpu" in lines[0]
    assert [ln.split(":")[0] for ln in lines if ln.startswith("epoch ")] == ["epoch 1"]
    assert "objective 0." in out.stdout


def test_the_command_line_names_a_bad_file_in_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntrainer: {epochs: 0}\n")
    out = subprocess.run(
        [sys.executable, "-m", "ludwig_hpo.execution.local", str(bad)],
        capture_output=True,
        text=True,
        env=_no_ray(tmp_path),
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1
