"""Raw rows prepared for a served model: the same arrays the sweep's preparation gave the same
rows (number, binary, category, set, sequence, date, text, images from paths; targets), Ludwig's prediction column names, bad rows
with one reason each (refused, or left out and counted), and ``hpo predict`` writing nothing
when it fails."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.data.preprocess import PreparedData, kept_rows
from ludwig_hpo.errors import DataError
from ludwig_hpo.model import build_model
from ludwig_hpo.model.predictions import output_values, prediction_frame
from ludwig_hpo.model.pyfunc import ServedModel
from ludwig_hpo.model.raw_rows import BadRowsError, reference_rows
from tests.unit.conftest import _sweep_dict

N = 48
#: Seconds a thread of MLflow's artifact copy may take to end once its pool is collected.
COPY_THREAD_END_S = 10


@pytest.fixture(autouse=True)
def _mlflow_copy_threads_end():
    """MLflow copies a model's artifacts with a thread pool it drops afterwards; the pool's idle
    threads end once it is collected. Wait for that (before the suite's leaked-thread check,
    which still fails a thread that does not end)."""
    yield
    gc.collect()
    for thread in threading.enumerate():
        if thread.name.startswith("Mlflow") and "ArtifactRepository" in thread.name:
            thread.join(timeout=COPY_THREAD_END_S)


INPUTS = [
    {"name": "rooms", "type": "number", "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
    {"name": "pets", "type": "binary"},
    {"name": "city", "type": "category", "encoder": {"embedding_size": 3}},
    {"name": "tags", "type": "set", "encoder": {"embedding_size": 4}},
    {"name": "review", "type": "sequence", "encoder": {"type": "rnn", "state_size": 4, "embedding_size": 4}},
    {"name": "listed", "type": "date", "encoder": {"embedding_size": 2}},
    {"name": "note", "type": "text", "encoder": {"type": "embed", "embedding_size": 4}},
    {"name": "photo", "type": "image", "encoder": {"type": "stacked_cnn", "conv_layers": [{"out_channels": 2}]}},
]
OUTPUTS = [
    {"name": "kind", "type": "category"},
    {"name": "sold", "type": "binary"},
    {"name": "price", "type": "number", "preprocessing": {"normalization": "zscore"}},
]


@pytest.fixture(scope="module")
def frame(tmp_path_factory) -> pd.DataFrame:
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(5)
    paths = []
    for i in range(N):
        path = folder / f"p{i}.png"
        Image.fromarray(rng.integers(0, 255, size=(8, 8), dtype=np.uint8)).save(path)
        paths.append(str(path))
    tags = ["wifi pool", "wifi", "parking kitchen", "pool parking"]
    rooms = rng.integers(1, 6, size=N).astype(float)
    rooms[[3, 20]] = np.nan  # filled with the training mean, in the sweep and when served
    return pd.DataFrame(
        {
            "rooms": rooms,
            "pets": rng.choice(["yes", "no"], size=N),
            "city": rng.choice(["rome", "oslo", "lima"], size=N),
            "tags": [tags[i % 4] for i in range(N)],
            "review": [["nice flat", "too noisy at night", "great view"][i % 3] for i in range(N)],
            "listed": [f"2021-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(N)],
            "note": [["a quiet room", "big noisy hall", "small cosy flat with a view", None][i % 4] for i in range(N)],
            "photo": paths,
            "kind": rng.choice(["flat", "house", "loft"], size=N),
            "sold": rng.choice([True, False], size=N),
            "price": rng.normal(100, 10, size=N),
        }
    )


@pytest.fixture(scope="module")
def served(frame):
    cfg = SweepConfig.model_validate(_sweep_dict(INPUTS, OUTPUTS))
    data = prepare(frame, cfg)
    kept = kept_rows(frame, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta).eval()
    return ServedModel(model, cfg, data.meta, reference_rows(kept.df.iloc[kept.splits["train"]], cfg)), data, kept


def test_new_rows_get_the_arrays_the_sweep_gave_them(served):
    model, data, kept = served
    rows = np.concatenate([data.splits["test"], data.splits["validation"]])
    got = model.preparer.prepare(kept.df.iloc[rows], targets=True)
    assert not got.bad and list(got.kept) == list(range(len(rows)))
    for name, x in data.inputs.items():
        np.testing.assert_array_equal(got.data.inputs[name], x[rows], err_msg=name)
    for name, y in data.targets.items():
        np.testing.assert_array_equal(got.data.targets[name], y[rows], err_msg=name)


def test_predictions_have_ludwigs_column_names_and_the_models_values(served):
    model, data, kept = served
    rows = data.splits["test"]
    frame = model.predict(kept.df.iloc[rows].drop(columns=["kind", "sold", "price"])).frame
    classes = [str(c) for c in data.meta["kind"].vocab]
    assert list(frame.columns) == [
        "kind_predictions",
        "kind_probabilities",
        "kind_probability",
        *[f"kind_probabilities_{c}" for c in classes],
        "sold_predictions",
        "sold_probabilities",
        "sold_probability",
        "sold_probabilities_False",
        "sold_probabilities_True",
        "price_predictions",
    ]
    direct = output_values(
        model.model, PreparedData({k: v[rows] for k, v in data.inputs.items()}, {}, {}, (), data.meta)
    )
    np.testing.assert_allclose(np.stack(frame["kind_probabilities"]), direct["kind"], rtol=1e-6)
    assert list(frame["kind_predictions"]) == [classes[i] for i in direct["kind"].argmax(axis=1)]
    assert (frame["sold_predictions"] == (direct["sold"] >= 0.5)).all()
    np.testing.assert_allclose(frame["sold_probability"], np.maximum(direct["sold"], 1 - direct["sold"]), rtol=1e-6)
    # a normalized number target comes back in the column's units
    stats = data.meta["price"].stats
    np.testing.assert_allclose(frame["price_predictions"], direct["price"] * stats["std"] + stats["mean"], rtol=1e-6)


def test_set_and_vector_outputs_are_named_as_ludwig_names_them():
    cfg = SweepConfig.model_validate(
        _sweep_dict([{"name": "x", "type": "number"}], [{"name": "s", "type": "set"}, {"name": "v", "type": "vector"}])
    )
    from ludwig_hpo.data.preprocess import FeatureMeta

    meta = {"s": FeatureMeta("s", "set", vocab=("a", "b"), shape=(2,)), "v": FeatureMeta("v", "vector", shape=(2,))}
    data = PreparedData({}, {}, {}, (), meta)
    frame = prediction_frame({"s": np.array([[0.9, 0.2]]), "v": np.array([[1.5, -2.0]])}, cfg, data)
    assert list(frame.columns) == [
        "s_predictions",
        "s_probabilities",
        "s_probabilities_a",
        "s_probabilities_b",
        "v_predictions",
    ]
    assert frame["s_predictions"][0] == ["a"] and frame["v_predictions"][0] == [1.5, -2.0]


def test_each_bad_row_has_a_reason_and_skipping_counts_them(served, tmp_path):
    model, data, kept = served
    rows = kept.df.iloc[data.splits["test"][:6]].reset_index(drop=True).astype({"rooms": object})
    rows.loc[1, "rooms"] = "three"  # not a number
    rows.loc[3, "photo"] = str(tmp_path / "missing.png")  # no such image
    with pytest.raises(BadRowsError) as e:
        model.predict(rows)
    assert [b.row for b in e.value.bad] == [1, 3]
    lines = e.value.lines()
    assert lines[0].startswith("data row 2: ") and "'three'" in lines[0] and "not numbers" in lines[0]
    assert lines[1].startswith("data row 4: ") and "missing.png" in lines[1]
    assert "2 rows cannot be scored" in e.value.one_line() and "--skip-bad-rows" in e.value.one_line()
    scored = model.predict(rows, skip_bad_rows=True)
    assert list(scored.rows.kept) == [0, 2, 4, 5] and len(scored.frame) == 4 and len(scored.rows.bad) == 2
    # the rows left get what they get alone
    alone = model.predict(rows.iloc[[0, 2, 4, 5]]).frame
    pd.testing.assert_frame_equal(scored.frame, alone)


def test_a_label_the_model_never_saw_and_a_missing_target_are_bad_rows(served):
    model, data, kept = served
    rows = kept.df.iloc[data.splits["test"][:4]].reset_index(drop=True)
    rows.loc[0, "kind"] = "castle"
    rows.loc[2, "price"] = np.nan
    with pytest.raises(BadRowsError) as e:
        model.prepare_labelled(rows)
    reasons = dict(zip([b.row for b in e.value.bad], e.value.lines(), strict=True))
    assert set(reasons) == {0, 2}
    assert "'castle' is not one of the model's 3 classes" in reasons[0]
    assert "has no value" in reasons[2] and "drop_row" in reasons[2]
    assert model.predict(rows.drop(columns=["kind", "sold", "price"])).frame.shape[0] == 4  # predicting needs no label


def test_a_missing_column_is_one_line_naming_the_feature(served):
    model, data, kept = served
    with pytest.raises(DataError) as e:
        model.predict(kept.df.drop(columns=["city"]))
    assert not isinstance(e.value, BadRowsError)
    assert "input_features[city]" in e.value.one_line() and "add the column 'city'" in e.value.one_line()
    with pytest.raises(DataError, match="there are no rows to score"):
        model.predict(kept.df.iloc[:0])


def test_hpo_predict_writes_nothing_when_rows_are_bad(served, tmp_path, monkeypatch):
    from rich.console import Console

    from ludwig_hpo.driver import model_source
    from ludwig_hpo.driver.predict import predict_command

    model, data, kept = served
    rows = kept.df.iloc[data.splits["test"][:3]].astype({"rooms": object})
    rows.iloc[0, rows.columns.get_loc("rooms")] = "n/a?"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "MLmodel").write_text("")
    monkeypatch.setattr(model_source.ModelSource, "load", lambda self: model)
    rows.to_csv(tmp_path / "rows.csv", index=False)
    out = tmp_path / "pred.csv"
    console = Console(file=open(tmp_path / "log.txt", "w"))  # noqa: SIM115
    with pytest.raises(BadRowsError):
        predict_command(
            str(tmp_path / "m"),
            tmp_path / "rows.csv",
            out,
            skip_bad_rows=False,
            tracking_uri=None,
            out=console,
            err=console,
        )
    assert not out.exists() and not list(tmp_path.glob(".pred*"))
    predict_command(
        str(tmp_path / "m"), tmp_path / "rows.csv", out, skip_bad_rows=True, tracking_uri=None, out=console, err=console
    )
    console.file.close()
    assert len(pd.read_csv(out)) == 2
    log = (tmp_path / "log.txt").read_text()
    assert "bad row (refused): line 2: " in log and "bad row (left out): line 2: " in log and "2 of 3 rows" in log
    parquet = tmp_path / "pred.parquet"  # Parquet keeps the list cells as lists
    with open(tmp_path / "log.txt", "w") as f:
        console = Console(file=f)
        predict_command(
            str(tmp_path / "m"),
            tmp_path / "rows.csv",
            parquet,
            skip_bad_rows=True,
            tracking_uri=None,
            out=console,
            err=console,
        )
    back = pd.read_parquet(parquet)
    assert len(back) == 2 and len(back["kind_probabilities"][0]) == len(data.meta["kind"].vocab)


def test_the_pyfunc_model_loads_alone_and_takes_raw_rows(served, tmp_path):
    import mlflow.pyfunc
    from mlflow.exceptions import MlflowException

    from ludwig_hpo.model.pyfunc import quiet_artifacts, save_pyfunc

    model, data, kept = served
    test = kept.df.iloc[data.splits["test"]].reset_index(drop=True)
    with quiet_artifacts():
        save_pyfunc(tmp_path / "m", model, test.head(3), _sweep_dict(INPUTS, OUTPUTS), {})
        loaded = mlflow.pyfunc.load_model(str(tmp_path / "m"))
    assert loaded.metadata.get_input_schema().input_names() == [f["name"] for f in INPUTS]
    assert "kind_probabilities_flat" in loaded.metadata.get_output_schema().input_names()
    example = loaded.input_example
    assert list(example.columns) == [f["name"] for f in INPUTS] and len(example) == 3
    rows = test.drop(columns=["kind", "sold", "price"])
    pd.testing.assert_frame_equal(loaded.predict(rows), model.predict(rows).frame)
    bad = rows.astype({"rooms": object})
    bad.loc[0, "photo"] = str(tmp_path / "gone.png")
    with pytest.raises(MlflowException, match="1 row cannot be scored.*data row 1: .*gone.png"):
        loaded.predict(bad)
    assert len(loaded.predict(bad, params={"skip_bad_rows": True})) == len(rows) - 1


def test_evaluate_split_test_scores_the_sweeps_own_test_rows(served):
    from ludwig_hpo.driver.evaluate_cmd import evaluate_rows, split_names
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    model, data, kept = served
    frame = kept.df  # the rows as the sweep read them; --split test cuts the sweep's own test rows
    result = evaluate_rows(model, frame, "test", skip_bad_rows=False, data_dir=None)
    own = evaluate(model.model, model.cfg, DeviceData(data, torch.device("cpu")), data.splits["test"], "test", 512)
    assert result.rows == len(data.splits["test"]) and not result.bad_rows
    assert result.scores == pytest.approx(own, rel=1e-6) and "test/kind/accuracy" in own
    full = evaluate_rows(model, frame, "full", skip_bad_rows=False, data_dir=None)
    assert full.rows == len(frame) and "full/combined/loss" in full.scores
    assert split_names("each") == ["training", "validation", "test"]
    with pytest.raises(
        DataError, match="--split: unknown split 'testing'; fix: use one of full, training, validation, test, each"
    ):
        split_names("testing")


def test_a_model_source_that_is_not_a_model_is_one_line(tmp_path, monkeypatch):
    from ludwig_hpo.driver.model_source import resolve_source

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(DataError, match="no such folder"):
        resolve_source(str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="not a sweep's or hpo train's output folder"):
        resolve_source(str(tmp_path))
    (tmp_path / "best_model").mkdir()
    with pytest.raises(DataError, match=r"holds no raw-row model \(model/\).*rerun the sweep"):
        resolve_source(str(tmp_path))
    with pytest.raises(DataError, match="MLFLOW_TRACKING_URI: an MLflow run or model URI needs its tracking store"):
        resolve_source("runs:/0123/model")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "MLmodel").write_text("")
    assert resolve_source(str(tmp_path)).uri == str(tmp_path / "model")
    store = (tmp_path / "mlruns").as_uri()  # a file store: no database to create
    source = resolve_source("runs:/0123/model", store)
    assert (source.uri, source.tracking_uri) == ("runs:/0123/model", store)
    with pytest.raises(DataError, match="cannot load the model in file:///"):
        source.load()


def test_a_new_image_of_another_size_is_read_at_the_models_size(served, tmp_path):
    model, data, kept = served
    rows = kept.df.iloc[data.splits["test"][:2]].reset_index(drop=True)
    Image.fromarray(np.full((13, 21), 200, dtype=np.uint8)).save(tmp_path / "big.png")
    rows.loc[0, "photo"] = str(tmp_path / "big.png")
    got = model.preparer.prepare(rows)
    assert got.data.inputs["photo"].shape == (2, *data.inputs["photo"].shape[1:])  # not inferred from new rows
    np.testing.assert_array_equal(got.data.inputs["photo"][1], data.inputs["photo"][data.splits["test"][1]])


@pytest.mark.parametrize("command", ["predict", "evaluate", "serve"])
def test_the_commands_refuse_a_folder_without_a_model_in_one_line(command, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ludwig_hpo.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.csv").write_text("a\n1\n")
    args = [command, str(tmp_path)] + (["--dataset", "rows.csv"] if command != "serve" else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "not a sweep's or hpo train's output folder" in lines[0], result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv"]  # nothing written


def test_a_binary_output_of_text_labels_predicts_those_labels():
    cfg = SweepConfig.model_validate(
        _sweep_dict([{"name": "x", "type": "number"}], [{"name": "diag", "type": "binary"}])
    )
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"x": rng.normal(size=40), "diag": rng.choice(["M", "B"], size=40)})
    data, kept = prepare(df, cfg), kept_rows(df, cfg)
    model = build_model(cfg, data.meta).eval()
    served = ServedModel(model, cfg, data.meta, reference_rows(kept.df.iloc[kept.splits["train"]], cfg))
    assert served.binary_labels == {"diag": ("M", "B")}  # Ludwig's fallback: the first label in sorted order is true
    frame = served.predict(df[["x"]]).frame
    assert {"diag_probabilities_M", "diag_probabilities_B"} <= set(frame.columns)
    assert set(frame["diag_predictions"]) <= {"M", "B"}
    assert ((frame["diag_predictions"] == "B") == (frame["diag_probabilities_B"] >= 0.5)).all()


def test_the_exported_model_predicts_a_csvs_rows_as_the_sweep_prepared_them(tmp_path):
    """The export's raw-row model of a CSV sweep (missing cells, labels, a category target) read
    back from its folder through ``hpo predict``'s loader: the sweep's test rows, as the CSV has
    them, give the outputs of the module on the sweep's own prepared rows."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.driver.export import save_raw_row_model
    from ludwig_hpo.driver.model_source import resolve_source
    from ludwig_hpo.results import TrialRecord

    rng = np.random.default_rng(4)
    df = pd.DataFrame(
        {
            "size": np.where(rng.random(60) < 0.1, np.nan, rng.normal(50, 5, size=60)),
            "colour": rng.choice(["red", "green", "blue", None], size=60),
            "kind": rng.choice(["a", "b", "c"], size=60),
        }
    )
    df.to_csv(tmp_path / "rows.csv", index=False)
    (tmp_path / "sweep.yaml").write_text(
        "name: t\ndataset: {source: rows.csv}\ninput_features:\n  - {name: size, type: number}\n"
        "  - {name: colour, type: category}\noutput_features:\n  - {name: kind, type: category}\n"
        "hyperopt:\n  parameters:\n    trainer.learning_rate: {space: choice, categories: [0.01]}\n"
    )
    loaded = load_sweep(tmp_path / "sweep.yaml")
    data = prepare(load_dataframe("rows.csv", tmp_path), loaded.config)
    model = build_model(loaded.config, data.meta).eval()
    best = TrialRecord("t1", "FINISHED", {"trainer.learning_rate": 0.01}, 1.0, 1.0)
    save_raw_row_model(tmp_path / "model", model, best, loaded, data)
    assert not list(tmp_path.glob(".model*"))
    served = resolve_source(str(tmp_path)).load()
    kept = kept_rows(load_dataframe("rows.csv", tmp_path), loaded.config)
    rows = data.splits["test"]
    got = served.predict(kept.df.iloc[rows][["size", "colour"]]).frame
    direct = output_values(model, PreparedData({k: v[rows] for k, v in data.inputs.items()}, {}, {}, (), data.meta))
    np.testing.assert_allclose(np.stack(got["kind_probabilities"]), direct["kind"], rtol=1e-6)


def test_bad_rows_among_many_are_each_found(served):
    model, data, kept = served
    rows = kept.df.iloc[np.resize(data.splits["test"], 40)].reset_index(drop=True).astype({"rooms": object})
    for r in (3, 17, 30, 31):
        rows.loc[r, "rooms"] = f"n{r}"
    with pytest.raises(BadRowsError) as e:
        model.predict(rows)
    assert [b.row for b in e.value.bad] == [3, 17, 30, 31]
    assert all(f"'n{b.row}'" in b.reason for b in e.value.bad)
