"""``hpo ui``: the URL of a sweep's run list in MLflow's machine-learning view, and which folder
plain ``hpo ui`` serves (the newest sweep, never an ``hpo train`` run's folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ludwig_hpo.driver.ui import _ui_warnings, choose_folder, runs_url
from ludwig_hpo.errors import DataError


def test_the_url_opens_the_experiments_run_list_in_the_machine_learning_view():
    assert (
        runs_url("127.0.0.1", 5000, "3") == "http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning"
    )
    assert runs_url("::1", 5001, "3") == "http://[::1]:5001/#/experiments/3/runs?workflowType=machine_learning"
    assert runs_url("127.0.0.1", 5000, None) == "http://127.0.0.1:5000/#/experiments?workflowType=machine_learning"


def _folder(root: Path, name: str, mtime: float, kind: str | None = "sweep") -> Path:
    folder = root / "hpo_results" / name
    folder.mkdir(parents=True)
    (folder / "mlflow.db").write_bytes(b"")
    if kind is not None:
        state = {"fingerprint": "f", "sweep_file": "s.yaml", "parent_run_id": "p", "tracking_uri": "sqlite:///x"}
        if kind != "sweep":
            state["kind"] = kind
        (folder / "state.json").write_text(json.dumps(state))
    os.utime(folder / "mlflow.db", (mtime, mtime))
    return folder


def test_plain_hpo_ui_serves_the_newest_sweep_and_says_how_to_choose_another(tmp_path):
    _folder(tmp_path, "old-sweep", 1000.0)
    newest = _folder(tmp_path, "digits", 2000.0, kind=None)  # a state.json without kind: a sweep's
    _folder(tmp_path, "digits-train", 3000.0, kind="train")  # newer, but an `hpo train` run
    folder, line = choose_folder(None, here=tmp_path)
    assert folder == newest
    assert line == "newest sweep in hpo_results/: digits (1 other sweep(s) there); another one: hpo ui DIR"


def test_a_named_folder_or_a_store_here_is_served_as_it_is(tmp_path):
    named = _folder(tmp_path, "a", 1000.0)
    assert choose_folder(named, here=tmp_path) == (named, None)
    assert choose_folder(None, here=named) == (named, None)


def test_no_sweep_anywhere_is_one_line_naming_the_fix(tmp_path):
    _folder(tmp_path, "only-train", 1000.0, kind="train")
    with pytest.raises(DataError) as e:
        choose_folder(None, here=tmp_path)
    assert "hpo ui DIR" in str(e.value) and len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("own", ["", "error::RuntimeWarning"])
def test_the_ui_process_hides_mlflows_starlette_import_warning_and_keeps_the_users_filters(monkeypatch, own):
    monkeypatch.setenv("PYTHONWARNINGS", own)
    code = (
        "import warnings\n"
        "warnings.warn('starlette.middleware.wsgi is deprecated and will be removed', UserWarning)\n"
        "warnings.warn('another warning', UserWarning)\n"
        "try:\n    warnings.warn('runtime', RuntimeWarning)\nexcept RuntimeWarning:\n    print('raised')\n"
    )
    env = {**os.environ, "PYTHONWARNINGS": _ui_warnings()}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "starlette" not in proc.stderr and "another warning" in proc.stderr
    assert ("raised" in proc.stdout) == bool(own)
