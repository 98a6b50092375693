"""User mistakes through the real CLI (no Ray starts: each fails before): one line on stderr,
exit 2, the key path kept intact (even with brackets), nothing created."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from ludwig_hpo.cli import app
from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import prepare
from ludwig_hpo.errors import ConfigError, DataError, TrackingError

WINE_LIKE = """\
name: csv-sweep
dataset: {{source: {source}}}
input_features:
  - {{name: alcohol, type: number}}
  - {{name: ash, type: number}}
output_features:
  - {{name: kind, type: category}}
trainer: {{epochs: 1}}
hyperopt:
  goal: minimize
  metric: loss
  output_feature: kind
  parameters:
    trainer.learning_rate: {{space: loguniform, lower: 1.0e-4, upper: 1.0e-2}}
{extra}"""


def _csv(tmp_path, rows: int, columns=("alcohol", "ash", "kind"), value="1.5"):
    df = pd.DataFrame({c: ([f"k{i % 3}" for i in range(rows)] if c == "kind" else [value] * rows) for c in columns})
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    return path


def _sweep(tmp_path, source, extra=""):
    path = tmp_path / "sweep.yaml"
    path.write_text(WINE_LIKE.format(source=source, extra=extra))
    return path


def _run(*args):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr if hasattr(result, "stderr") else result.output


def test_a_missing_column_names_the_feature_in_brackets(tmp_path):
    sweep = _sweep(tmp_path, _csv(tmp_path, 60, columns=("alcohol", "kind")))
    code, err = _run("validate", str(sweep))
    assert code == 2
    assert "input_features[ash]: column 'ash' is not in the dataset" in err
    assert len(err.strip().splitlines()) == 1


def test_markup_like_text_in_user_values_is_printed_verbatim(tmp_path):
    sweep = _sweep(tmp_path, _csv(tmp_path, 60, value="[/oops]"))
    code, err = _run("validate", str(sweep))
    assert code == 2 and "[/oops]" in err and "Traceback" not in err


def test_too_few_rows_for_the_classes_is_a_data_error(tmp_path):
    sweep = _sweep(tmp_path, _csv(tmp_path, 9))
    with pytest.raises(DataError, match="too few for 3 classes"):
        loaded = load_sweep(sweep)
        prepare(pd.read_csv(tmp_path / "data.csv"), loaded.config)


def test_too_many_folds_for_the_rows_is_a_data_error(tmp_path):
    sweep = _sweep(tmp_path, _csv(tmp_path, 40), extra="kfold: {k: 20, top_k: 1}\n")
    loaded = load_sweep(sweep)
    with pytest.raises(DataError) as info:
        prepare(pd.read_csv(tmp_path / "data.csv"), loaded.config)
    assert info.value.key == "kfold.k" and info.value.fix == "lower kfold.k"


def test_a_yaml_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="YAML aliases"):
        load_sweep(path)


def test_an_sqlite_store_in_a_missing_folder_is_refused(tmp_path):
    from ludwig_hpo.tracking.mlflow_store import MlflowStore

    with pytest.raises(TrackingError, match="does not exist"):
        MlflowStore(f"sqlite:///{tmp_path}/nope/mlflow.db", "x")
    assert not (tmp_path / "nope").exists()


def test_an_output_folder_that_cannot_be_created_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    sweep = _sweep(tmp_path, _csv(tmp_path, 60))
    code, err = _run("sweep", str(sweep), "--output", str(blocker / "sub"))
    assert code == 2 and "cannot create the output folder" in err
    assert blocker.read_text() == "not a folder"


def test_a_sweep_where_every_trial_failed_summarizes_the_distinct_errors():
    from ludwig_hpo.driver.summary import failure_summary
    from ludwig_hpo.results import TrialRecord

    def failed(i, error):
        return TrialRecord(f"t{i}", "FAILED", {}, None, None, error=error)

    trials = [
        failed(0, "FloatingPointError: training loss is nan at epoch 1"),
        failed(1, "BatchSizeError: no batch size fits"),
        failed(2, "FloatingPointError: training loss is nan at epoch 1"),
    ]
    assert failure_summary(trials) == (
        "3 of 3 trial(s) failed: 2x FloatingPointError: training loss is nan at "
        "epoch 1; 1x BatchSizeError: no batch size fits"
    )


def test_hpo_ui_without_a_store_is_one_line_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["ui"])
    assert res.exit_code == 2
    assert "no mlflow.db here" in res.output and "hpo ui DIR" in res.output and len(res.output.splitlines()) == 1


def test_hpo_ui_on_a_taken_port_is_one_line_exit_2(tmp_path):
    import socket

    (tmp_path / "mlflow.db").touch()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = CliRunner().invoke(app, ["ui", str(tmp_path), "--port", str(port)])
    assert res.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in res.output and "--port" in res.output


# ---------------------------------------------------------------------------- Ludwig model configs
MODEL = """\
input_features:
  - {name: alcohol, type: number}
output_features:
  - {name: kind, type: category}
"""


def test_a_sweep_of_a_model_config_says_in_one_line_what_to_add(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.yaml").write_text(MODEL)
    code, err = _run("sweep", "model.yaml", "--dataset", str(_csv(tmp_path, 60)))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "hyperopt: a sweep needs a hyperopt section" in err
    assert "hyperopt: {parameters: {trainer.learning_rate: {space: loguniform" in err and "hpo train model.yaml" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "model.yaml"]


def test_hpo_train_takes_dataset_and_names_a_missing_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.yaml").write_text(MODEL)
    code, err = _run("train", "model.yaml")
    assert code == 2 and "dataset: required key is missing" in err and "--dataset data.csv" in err
    code, err = _run("train", "model.yaml", "--dataset", "nope.csv")
    assert code == 2 and "nope.csv" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["sweep", "train", "validate"])
@pytest.mark.parametrize("flag", ["--training_set", "--validation-set", "--test_set"])
def test_ludwigs_separate_split_files_are_one_line_not_supported_yet(tmp_path, command, flag):
    (tmp_path / "model.yaml").write_text(MODEL)
    code, err = _run(command, str(tmp_path / "model.yaml"), flag, "x.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "separate split files are not supported yet" in err and "--dataset" in err


def test_hpo_train_of_an_llm_config_names_its_non_text_feature_first(tmp_path):
    text = "model_type: llm\nbase_model: some/model\nadapter: {type: lora}\n" + MODEL.replace("number", "text")
    (tmp_path / "llm.yaml").write_text(text)
    code, err = _run("train", str(tmp_path / "llm.yaml"), "--dataset", "x.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "output_features[kind].type: an llm's output feature is type text, not category" in err
