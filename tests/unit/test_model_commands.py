"""``hpo predict`` and ``hpo evaluate`` refuse a bad ``--output`` or ``--dataset`` in one line
naming the option, before any model loads, and write nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ludwig_hpo.cli import app
from ludwig_hpo.driver import model_source


@pytest.fixture
def model_folder(tmp_path, monkeypatch):
    """A folder that passes for a model folder; loading it fails the test."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "MLmodel").write_text("")
    (tmp_path / "rows.csv").write_text("a\n1\n")

    def load(self):
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr(model_source.ModelSource, "load", load)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_line(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_an_output_in_a_missing_folder_is_refused_before_the_model_loads(command, model_folder):
    line = _one_line([command, "m", "--dataset", "rows.csv", "-o", "nowhere/out.csv"])
    assert "nowhere: --output: no such folder" in line
    (model_folder / "out").mkdir()
    assert "--output: is a folder" in _one_line([command, "m", "--dataset", "rows.csv", "-o", "out"])
    assert sorted(p.name for p in model_folder.iterdir()) == ["m", "out", "rows.csv"]


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_missing_dataset_names_the_option_and_the_current_folder(command, model_folder):
    line = _one_line([command, "m", "--dataset", "nosuch.csv"])
    assert "--dataset: dataset file not found" in line and "start at the current folder" in line
    assert "sweep file" not in line


def test_skip_bad_rows_when_no_row_can_be_scored_says_so(model_folder, monkeypatch):
    from ludwig_hpo.model.raw_rows import BadRow, BadRowsError

    class EveryRowBad:  # a model refuses only when no row is left, --skip-bad-rows or not
        def predict(self, df, *, skip_bad_rows, data_dir):
            raise BadRowsError((BadRow(0, "line 2", "column 'a': not a number"),), "rows.csv")

    monkeypatch.setattr(model_source.ModelSource, "load", lambda self: EveryRowBad())
    result = CliRunner().invoke(app, ["predict", "m", "--dataset", "rows.csv", "--skip-bad-rows"])
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 2, result.output
    assert lines[0] == "bad row (refused): line 2: column 'a': not a number"
    assert "none of the 1 row can be scored" in lines[1] and "--skip-bad-rows" not in lines[1]
    assert not (model_folder / "predictions.csv").exists()


def test_a_sqlite_store_that_does_not_exist_is_one_line_and_not_created(tmp_path):
    from ludwig_hpo.driver.model_source import resolve_source
    from ludwig_hpo.errors import DataError

    store = f"sqlite:///{tmp_path / 'typo.db'}"
    with pytest.raises(DataError, match=r"MLFLOW_TRACKING_URI: no MLflow store at sqlite:///.*typo\.db"):
        resolve_source("runs:/0123/model", store)
    assert not (tmp_path / "typo.db").exists()
    (tmp_path / "mlflow.db").write_bytes(b"")
    assert resolve_source("runs:/0123/model", f"sqlite:///{tmp_path / 'mlflow.db'}").uri == "runs:/0123/model"


def test_loading_from_a_store_leaves_the_processs_tracking_uri_unpinned(tmp_path, monkeypatch):
    import mlflow

    from ludwig_hpo.driver.model_source import ModelSource
    from ludwig_hpo.errors import DataError

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    source = ModelSource(uri="runs:/0123/model", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(DataError, match="cannot load the model"):
        source.load()
    # the environment still decides, as before the load (a pinned URI would ignore it)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'later.db'}")
    assert mlflow.get_tracking_uri() == f"sqlite:///{tmp_path / 'later.db'}"
