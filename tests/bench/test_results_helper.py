"""``bench/_results.py``: where a bench's figures go, what the stamp says, what is printed last."""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def results():
    """The helper as the bench scripts import it (``bench/`` is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_results_helper", ROOT / "bench" / "_results.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building the class
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_the_results_folder_is_the_option_then_the_environment_then_bench_results(results, tmp_path, monkeypatch):
    monkeypatch.delenv(results.RESULTS_DIR_ENV, raising=False)
    assert results.results_dir(None) == ROOT / "bench" / "results"
    monkeypatch.setenv(results.RESULTS_DIR_ENV, str(tmp_path / "env"))
    assert results.results_dir(None) == tmp_path / "env"
    assert results.results_dir(tmp_path / "opt") == tmp_path / "opt"


def test_finish_writes_the_file_then_prints_the_figures_line_last(results, tmp_path, capsys):
    args = argparse.Namespace(results_dir=tmp_path, repeats=3, path=Path("/x"))
    run = results.BenchRun("demo", args)
    path = run.finish(
        {"ratio": results.Figure(0.98765, ".3f"), "n": results.Figure(7), "reached": results.Figure(">48")},
        {"nonfinite": float("inf"), "sizes": {1: 2.0}},
    )
    assert path == tmp_path / "demo.json"
    assert capsys.readouterr().out.splitlines()[-1] == "ratio=0.988 n=7 reached=>48"
    doc = json.loads(path.read_text())
    assert doc["figures"] == {"ratio": 0.98765, "n": 7, "reached": ">48"}
    assert doc["details"] == {"nonfinite": "inf", "sizes": {"1": 2.0}}  # JSON has no infinity nor int keys
    assert doc["stamp"]["args"] == {"results_dir": str(tmp_path), "repeats": 3, "path": "/x"}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_commit_is_dirty_when_source_changed_but_not_when_a_figures_file_is_written(results, tmp_path, monkeypatch):
    def git(*a: str) -> None:
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    monkeypatch.setattr(results, "ROOT", tmp_path)

    assert results.commit() == head
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "demo.json").write_text("{}")
    assert results.commit() == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert results.commit() == head + "+dirty"


def test_the_commit_is_unknown_outside_a_checkout(results, tmp_path, monkeypatch):
    monkeypatch.setattr(results, "ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert results.commit() == "unknown"


def test_a_path_argument_inside_the_checkout_is_stamped_relative_to_it(results, tmp_path):
    stamped = results.BenchRun("x", argparse.Namespace(sweep=ROOT / "sweeps" / "digits.yaml", out=tmp_path)).stamp()
    assert stamped.args["sweep"] == "sweeps/digits.yaml"
    assert stamped.args["out"] == str(tmp_path)  # outside the checkout: as given
