"""A sweep's state file and what ``hpo sweep`` does with an existing output folder."""

from __future__ import annotations

import pytest
import yaml

from ludwig_hpo.driver.state import SweepState, changed_keys, decide, fingerprint, read_state, write_state
from ludwig_hpo.errors import ConfigError

TEXT = "name: s\ntrainer: {epochs: 3}\ninput_features: [{name: a, type: number}]\n"


def _sweep_dir(tmp_path, text=TEXT, phase="search"):
    root = tmp_path / "s"
    root.mkdir()
    (root / "sweep.yaml").write_text(text)
    write_state(
        root,
        SweepState(
            fingerprint(text, yaml.safe_load(text)), str(tmp_path / "sweep.yaml"), "parent-1", "sqlite:///x", phase
        ),
    )
    return root


def test_state_round_trips_and_moves_through_phases(tmp_path):
    root = _sweep_dir(tmp_path)
    state = read_state(root)
    assert state.parent_run_id == "parent-1" and state.phase == "search"
    write_state(root, state.at("kfold"))
    assert read_state(root).phase == "kfold"
    assert not list(root.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("phase", "text", "restart", "expected"),
    [
        ("search", TEXT, False, "resume"),
        ("kfold", TEXT, False, "resume"),
        ("report", TEXT, False, "resume"),
        ("finished", TEXT, False, "new"),  # a finished sweep is kept; the new one gets name_1
        ("search", TEXT, True, "new"),  # --restart
        ("finished", TEXT.replace("3", "4"), False, "new"),
    ],
)
def test_decide(tmp_path, phase, text, restart, expected):
    root = _sweep_dir(tmp_path, phase=phase)
    decision, state = decide(root, text, yaml.safe_load(text), restart=restart)
    assert decision == expected and (state is not None) == (expected == "resume")


def test_an_unfinished_sweep_of_a_changed_file_names_the_changed_keys(tmp_path):
    root = _sweep_dir(tmp_path)
    text = TEXT.replace("epochs: 3", "epochs: 4").replace("type: number", "type: category")
    with pytest.raises(ConfigError) as info:
        decide(root, text, yaml.safe_load(text), restart=False)
    assert info.value.one_line() == (
        f"{root} holds an unfinished sweep of a different version of this file (changed: "
        "input_features[a].type, trainer.epochs); fix: pass --restart to discard it, "
        f"`hpo resume {root}` to finish it as it was, or change 'name:'"
    )


def test_no_state_is_a_new_sweep(tmp_path):
    assert decide(tmp_path / "nothing", TEXT, {}, restart=False) == ("new", None)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "state.json").write_text("{not json")
    assert decide(tmp_path / "junk", TEXT, {}, restart=False) == ("new", None)


def test_changed_keys_ignore_feature_order():
    a = {"input_features": [{"name": "x", "type": "number"}, {"name": "y", "type": "category"}]}
    b = {"input_features": [{"name": "y", "type": "category"}, {"name": "x", "type": "number"}]}
    assert changed_keys(a, b) == []
    assert changed_keys(a, {"input_features": a["input_features"][:1]}) == ["input_features[y].type"]


@pytest.mark.parametrize("kind", ["sweep", "train"])
def test_the_folder_kind_is_in_state_json_from_its_creation(tmp_path, monkeypatch, kind):
    """An ``hpo train`` run stopped before its end is still no sweep (``hpo ui`` skips it):
    the kind is written with the first ``state.json``, not after the run."""
    import io
    from pathlib import Path

    from rich.console import Console

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.output import create_output
    from ludwig_hpo.driver.ui import is_sweep_folder

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    loaded = load_sweep(Path(__file__).resolve().parents[2] / "sweeps" / "breast_cancer_tiny.yaml")
    output = create_output(loaded, tmp_path, None, Console(file=io.StringIO()), kind=kind)
    try:
        state = read_state(output.paths.root)
        assert state is not None and state.phase == "search" and state.kind == kind
        assert is_sweep_folder(output.paths.root) is (kind == "sweep")
    finally:
        output.store.close()
