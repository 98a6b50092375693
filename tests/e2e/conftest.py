"""Fixtures the end-to-end modules share: the tiny sweep, run once per test session."""

from __future__ import annotations

import pytest

from ..conftest import SWEEPS
from .test_sweep_cli import run_cli


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory):
    """``hpo sweep sweeps/breast_cancer_tiny.yaml`` run once per session, with an empty user
    cache of tuned batch sizes (``<cwd>/cache``); returns (process, output folder). The modules
    that read it (test_sweep_cli, test_browser_ui) only read the folder, but for one test that
    adds an ``hpo train`` run under the sweep's parent run, which every reader allows for."""
    cwd = tmp_path_factory.mktemp("sweep")
    proc = run_cli(
        "sweep",
        str(SWEEPS / "breast_cancer_tiny.yaml"),
        "--output",
        "results",
        cwd=cwd,
        env_extra={"LUDWIG_HPO_CACHE_DIR": str(cwd / "cache")},
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd / "results" / "breast-cancer-tiny"
