"""Provenance the parent run records: the git commit of the working directory, and the rungs
at which ASHA stops trials (to tag a stopped trial's rung)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ludwig_hpo.driver.provenance import git_commit
from ludwig_hpo.results.ranking import asha_rungs


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_commit_of_the_working_tree_marks_uncommitted_changes(tmp_path):
    assert git_commit(tmp_path) is None  # not a work tree
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "sweep.yaml").write_text("name: a\n")
    subprocess.run([*git, "add", "sweep.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "sub").mkdir()
    assert git_commit(tmp_path / "sub") == head  # any folder inside the work tree
    (tmp_path / "sweep.yaml").write_text("name: b\n")
    assert git_commit(tmp_path) == head + "+dirty"


@pytest.mark.parametrize(
    ("grace", "rf", "max_t", "rungs"),
    [(1, 3, 2, (1,)), (1, 3, 9, (1, 3, 9)), (3, 3, 12, (3, 9)), (2, 2, 16, (2, 4, 8, 16))],
)
def test_asha_rungs(grace, rf, max_t, rungs):
    assert asha_rungs(grace, rf, max_t) == rungs
