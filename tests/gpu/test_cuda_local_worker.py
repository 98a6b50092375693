"""On CUDA: the worker entry through ``ludwig_hpo.execution.local`` (no Ray): one GPU rank in
the calling process, 2 NCCL ranks (needs 2 GPUs), and the command line. Needs only torch,
pandas, scikit-learn, pydantic and PyYAML: ``python -m pytest tests/gpu`` on a bare GPU machine."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ..conftest import ROOT, SWEEPS

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]


def _trial():
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.execution.spec import TrialSpec

    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    raw = {**loaded.raw, "trainer": {**loaded.raw["trainer"], "epochs": 3}}
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    return TrialSpec(raw=raw), data


def test_one_cuda_rank_searches_its_batch_size_and_trains():
    from ludwig_hpo.execution.local import run_local

    spec, data = _trial()
    (reports,) = run_local(spec, data, workers=1, device="cuda").reports
    assert [m["epoch"] for m in reports] == [1, 2, 3]
    assert reports[0]["world_size"] == 1 and "batch_size_tried" in reports[0]
    assert all(math.isfinite(m["objective"]) for m in reports)


def test_two_nccl_ranks_report_the_same_metrics():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs for 2 NCCL ranks")
    from ludwig_hpo.execution.local import run_local

    spec, data = _trial()
    r0, r1 = run_local(spec, data, workers=2, device="cuda").reports
    assert [m["epoch"] for m in r0] == [1, 2, 3]
    for a, b in zip(r0, r1, strict=True):
        for key in ("objective", "validation/malignant/loss", "train/combined/running_loss", "batch_size"):
            assert a[key] == b[key], key


def test_the_command_line_trains_on_cuda_without_ray(tmp_path: Path):
    fake = tmp_path / "no_ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('Ray is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "ludwig_hpo.execution.local", str(SWEEPS / "breast_cancer_tiny.yaml")]
    workers = min(torch.cuda.device_count(), 2)
    out = subprocess.run(
        [*cmd, "--device", "cuda", "--workers", str(workers), "--epochs", "2"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert f"{workers} worker(s) on cuda" in out.stdout
    assert [ln.split(":")[0] for ln in out.stdout.splitlines() if ln.startswith("epoch ")] == ["epoch 1", "epoch 2"]
