"""A streamed sweep's final model in the driver, without Ray: the best weights scored on the
streamed test split (read from the files a batch at a time, calibrated on the streamed
validation split) give the in-memory scores of the same rows, and its raw-row MLflow model,
built from the fitted preprocessing alone, predicts what the in-memory sweep's model predicts.
The fit is the streamed one (batch partials per file), the rows those of a folder of Parquet
files and of the same rows in one file."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from rich.console import Console

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.data.preprocess import kept_rows
from ludwig_hpo.data.streaming.record import SPLITS, StreamedData
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import DataError
from ludwig_hpo.model import build_model
from ludwig_hpo.results import TrialRecord
from tests.unit.conftest import _sweep_dict
from tests.unit.test_raw_rows import _mlflow_copy_threads_end  # noqa: F401 - autouse: MLflow's copy threads end
from tests.unit.test_streaming_data import INPUTS, OUTPUTS, _assert_same_meta, _frame, _streamed_meta

#: Rows per file of the folder: a file's batch is cut across scoring batches of 32 rows.
FILES = (130, 150, 120)
#: the calibrated outputs (Ludwig's temperature scaling, fitted on the validation split)
CALIBRATED = ("kind", "sold")
PARAMS = {"trainer.learning_rate": 0.01}


def _sweep(tmp_path, source: str, streaming: bool):
    outputs = [{**o, "calibration": True} if o["name"] in CALIBRATED else o for o in OUTPUTS]
    raw = _sweep_dict(INPUTS, outputs, preprocessing={"split": {"type": "fixed"}})
    raw["dataset"] = {"source": source, "streaming": streaming}
    raw["trainer"] = {"eval_batch_size": 32}
    name = "streamed.yaml" if streaming else "memory.yaml"
    (tmp_path / name).write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_sweep(tmp_path / name)


@pytest.fixture
def sweeps(tmp_path):
    """(in-memory loaded sweep, its PreparedData, streamed loaded sweep, its StreamedData, the
    rows), the same rows as one Parquet file and as a folder of three."""
    df = _frame(sum(FILES))
    (tmp_path / "rows").mkdir()
    cuts = np.cumsum([0, *FILES])
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        df.iloc[a:b].to_parquet(tmp_path / "rows" / f"part-{i}.parquet", index=False)
    df.to_parquet(tmp_path / "rows.parquet", index=False)
    memory_sweep = _sweep(tmp_path, "rows.parquet", streaming=False)
    memory = prepare(load_dataframe("rows.parquet", tmp_path), memory_sweep.config)
    streamed_sweep = _sweep(tmp_path, "rows", streaming=True)
    total, meta, filled = _streamed_meta(df, streamed_sweep.config, list(FILES))
    _assert_same_meta(meta, memory.meta)
    streamed = StreamedData(
        datasets={},  # read again from the files in the driver: no Ray dataset is used
        meta=meta,
        rows=dict(zip(SPLITS, total.split_rows, strict=True)),
        filled=filled,
        sources=tuple(str(tmp_path / "rows" / f"part-{i}.parquet") for i in range(len(FILES))),
    )
    assert streamed.rows == {s: len(memory.splits[s]) for s in SPLITS}
    return memory_sweep, memory, streamed_sweep, streamed, df


def _weights(loaded, meta, paths: SweepPaths):
    cfg = resolve_trial_config(loaded.raw, PARAMS)
    torch.manual_seed(0)
    model = build_model(cfg, meta)
    paths.best_model.mkdir(parents=True)
    torch.save({"state_dict": model.state_dict(), "epoch": 1}, paths.best_weights)
    return cfg, model


def test_the_streamed_test_split_scores_the_best_weights_as_the_same_rows_in_memory(sweeps, tmp_path):
    from ludwig_hpo.driver.holdout import score_best_on_test

    memory_sweep, memory, streamed_sweep, streamed, _ = sweeps
    best = TrialRecord("t1", "FINISHED", PARAMS, 0.9, 0.9)
    paths = SweepPaths(tmp_path / "out")
    _weights(memory_sweep, memory.meta, paths)
    consoles = Console(file=io.StringIO()), Console(file=io.StringIO())
    want = score_best_on_test(best, memory_sweep, memory, paths, consoles[0])
    got = score_best_on_test(best, streamed_sweep, streamed, paths, consoles[1])
    assert "test/kind/roc_auc" in want and "test/price/mean_absolute_error" in want and "test/combined/loss" in want
    assert got.keys() == want.keys()
    assert got == pytest.approx(want, rel=1e-5, abs=1e-7)
    # the same temperatures, fitted on the streamed validation split
    lines = [[ln for ln in c.file.getvalue().splitlines() if ln.startswith("calibration:")] for c in consoles]
    assert len(lines[0]) == len(CALIBRATED) and lines[1] == lines[0]


def test_a_file_added_since_the_fit_is_one_warning_and_no_score(sweeps, tmp_path):
    from ludwig_hpo.driver.holdout import score_best_on_test
    from ludwig_hpo.execution.streaming.local import LocalSplits

    memory_sweep, memory, streamed_sweep, streamed, df = sweeps
    paths = SweepPaths(tmp_path / "out")
    _weights(memory_sweep, memory.meta, paths)
    df.iloc[:5].to_parquet(tmp_path / "rows" / "part-9.parquet", index=False)
    with pytest.raises(DataError, match=r"holds 4 file\(s\) now, not the 3"):
        LocalSplits(streamed_sweep.config, streamed_sweep.base_dir, streamed)
    console = Console(file=io.StringIO())
    assert (
        score_best_on_test(TrialRecord("t1", "FINISHED", PARAMS, 0.9, 0.9), streamed_sweep, streamed, paths, console)
        == {}
    )
    assert "warning: the best trial could not be scored on the test split: " in console.file.getvalue()


def test_the_streamed_raw_row_model_predicts_what_the_in_memory_one_predicts(sweeps, tmp_path):
    from ludwig_hpo.driver.export import save_raw_row_model, save_streamed_raw_row_model
    from ludwig_hpo.driver.holdout import calibrate_best
    from ludwig_hpo.execution.streaming.local import LocalSplits
    from ludwig_hpo.model.pyfunc import REFERENCE_FILE, SERVING_ARTIFACT
    from ludwig_hpo.model.pyfunc import ServedModel as Served

    memory_sweep, memory, streamed_sweep, streamed, df = sweeps
    best = TrialRecord("t1", "FINISHED", PARAMS, 0.9, 0.9)
    cfg, model = _weights(memory_sweep, memory.meta, SweepPaths(tmp_path / "out"))
    local = LocalSplits(streamed_sweep.config, streamed_sweep.base_dir, streamed)
    streamed_model = build_model(cfg, streamed.meta)
    streamed_model.load_state_dict(model.state_dict())
    assert calibrate_best(model, cfg, memory) == pytest.approx(calibrate_best(streamed_model, cfg, local), rel=1e-5)
    save_raw_row_model(tmp_path / "memory_model", model.eval(), best, memory_sweep, memory)
    save_streamed_raw_row_model(tmp_path / "streamed_model", streamed_model.eval(), best, streamed_sweep, local)
    folder = tmp_path / "streamed_model" / "artifacts" / SERVING_ARTIFACT
    assert pd.read_pickle(folder / REFERENCE_FILE).shape == (0, 0)  # no training row is kept
    assert json.loads((folder / "preprocessing.json").read_text()).keys() == streamed.meta.keys()
    # the input example: the first test rows as the files hold them, drop_row rows left out
    kept = kept_rows(df, memory_sweep.config)
    test = kept.df.iloc[kept.splits["test"]].reset_index(drop=True)
    example = pd.read_json(tmp_path / "streamed_model" / "input_example.json", orient="split")
    assert example["mean"].tolist() == pytest.approx(test["mean"].iloc[:5].tolist(), nan_ok=True)

    import mlflow.pyfunc

    served = [
        mlflow.pyfunc.load_model(str(tmp_path / name)).unwrap_python_model().served
        for name in ("memory_model", "streamed_model")
    ]
    assert all(isinstance(s, Served) for s in served)
    rows = kept.df.iloc[np.concatenate([kept.splits["test"], kept.splits["train"][:40]])]
    want, got = (s.predict(rows[s.input_columns()]).frame for s in served)
    assert list(got.columns) == list(want.columns) and len(got) == len(rows)
    for col in want.columns:
        a, b = np.stack(want[col].to_numpy()), np.stack(got[col].to_numpy())
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=col)
        else:
            assert (a == b).all(), col


# ---------------------------------------------------------------- text inputs
#: the text configs the streamed raw-row model is compared on, built-in tokenizers and a
#: Hugging Face one (``hf``: the tiny BERT tokenizer saved to a temp folder)
TEXT_CONFIGS = [
    pytest.param({}, id="defaults"),
    pytest.param(
        {"tokenizer": "characters", "max_sequence_length": 7, "padding": "left", "unknown_symbol": "?"},
        id="characters-7-left",
    ),
    pytest.param({"tokenizer": "ngram", "ngram_size": 3, "most_common": 40}, id="ngram-3"),
    pytest.param({"tokenizer": "space", "lowercase": False, "fill_value": "Nothing Here"}, id="space-fill"),
    pytest.param({"vocab_file": "words.txt"}, id="vocab_file"),
    pytest.param({"missing_value_strategy": "drop_row"}, id="drop_row"),
    pytest.param({"tokenizer": "hf_tokenizer", "max_sequence_length": 12}, id="hf"),
]
TEXT_FILES = (110, 130, 60)
#: rows neither split holds: unseen words, capitals, a missing and a blank cell, a row longer
#: than any training row (cut at the fitted width)
NEW_TEXT = ["zebra quantum the", "THE DOG SAT", None, "   ", " ".join(["cat", "mat", "fox!"] * 12)]


def _text_sweep(tmp_path, source: str, streaming: bool, review: dict):
    inputs = [
        {"name": "review", "type": "text", "encoder": {"type": "embed", "embedding_size": 4}, "preprocessing": review},
        {"name": "size", "type": "number"},
    ]
    outputs = [{"name": "label", "type": "category", "calibration": True}]
    raw = _sweep_dict(inputs, outputs, preprocessing={"split": {"type": "fixed"}})
    raw["dataset"] = {"source": source, "streaming": streaming}
    raw["trainer"] = {"eval_batch_size": 32}
    name = "streamed.yaml" if streaming else "memory.yaml"
    (tmp_path / name).write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_sweep(tmp_path / name)


def _text_models(tmp_path, review: dict):
    """The in-memory and the streamed raw-row model folders of a text sweep on the same rows,
    with equal weights and equal fitted metadata (the streamed fit from per-file partials);
    returns them and the rows."""
    from ludwig_hpo.data.streaming.fit import FileOrigin, batch_partial, filled_notes, fitted_meta, merge
    from ludwig_hpo.data.streaming.splits import split_rule
    from ludwig_hpo.driver.export import save_raw_row_model, save_streamed_raw_row_model
    from ludwig_hpo.execution.streaming.local import LocalSplits
    from tests.unit.test_streaming_text import _frame as _text_frame

    df = _text_frame(sum(TEXT_FILES))
    (tmp_path / "words.txt").write_text("dog\ncat\nthe\nsat\n")  # the sweep file's and the dataset's folder
    (tmp_path / "rows").mkdir()
    cuts = np.cumsum([0, *TEXT_FILES])
    parts = [df.iloc[a:b].reset_index(drop=True) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    for i, part in enumerate(parts):
        part.to_parquet(tmp_path / "rows" / f"part-{i}.parquet", index=False)
    df.to_parquet(tmp_path / "rows.parquet", index=False)
    memory_sweep = _text_sweep(tmp_path, "rows.parquet", False, review)
    memory = prepare(load_dataframe("rows.parquet", tmp_path), memory_sweep.config, data_dir=tmp_path)
    streamed_sweep = _text_sweep(tmp_path, "rows", True, review)
    cfg = streamed_sweep.config
    rule = split_rule(cfg)
    total = merge(batch_partial(p, cfg, rule, FileOrigin(f"part-{i}")) for i, p in enumerate(parts))
    meta = fitted_meta(cfg, total, cfg.dataset.source, tmp_path)
    _assert_same_meta(meta, memory.meta)
    assert meta["review"].stats == memory.meta["review"].stats  # equal floats: the width and length stats
    streamed = StreamedData(
        datasets={},
        meta=meta,
        rows=dict(zip(SPLITS, total.split_rows, strict=True)),
        filled=filled_notes(cfg, total, meta),
        sources=tuple(str(tmp_path / "rows" / f"part-{i}.parquet") for i in range(len(TEXT_FILES))),
    )
    best = TrialRecord("t1", "FINISHED", PARAMS, 0.9, 0.9)
    _, model = _weights(memory_sweep, memory.meta, SweepPaths(tmp_path / "out"))
    local = LocalSplits(cfg, streamed_sweep.base_dir, streamed)
    streamed_model = build_model(resolve_trial_config(streamed_sweep.raw, PARAMS), meta)
    streamed_model.load_state_dict(model.state_dict())
    from ludwig_hpo.driver.holdout import calibrate_best

    calibrate_best(model, resolve_trial_config(memory_sweep.raw, PARAMS), memory)
    calibrate_best(streamed_model, resolve_trial_config(streamed_sweep.raw, PARAMS), local)
    save_raw_row_model(tmp_path / "memory_model", model.eval(), best, memory_sweep, memory)
    save_streamed_raw_row_model(tmp_path / "streamed_model", streamed_model.eval(), best, streamed_sweep, local)
    return tmp_path / "memory_model", tmp_path / "streamed_model", df


def _assert_equal_frames(want: pd.DataFrame, got: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns) and len(got) == len(want)
    for col in want.columns:
        a, b = np.stack(want[col].to_numpy()), np.stack(got[col].to_numpy())
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=col)
        else:
            assert (a == b).all(), col


@pytest.mark.parametrize("review", TEXT_CONFIGS)
def test_the_streamed_raw_row_model_of_a_text_input_predicts_what_the_in_memory_one_predicts(
    review, tmp_path, tiny_bert_dir, monkeypatch
):
    import mlflow.pyfunc

    from ludwig_hpo.model.pyfunc import REFERENCE_FILE, SERVING_ARTIFACT

    if review.get("tokenizer") == "hf_tokenizer":
        review = {**review, "pretrained_model_name_or_path": str(tiny_bert_dir)}
    memory_folder, streamed_folder, df = _text_models(tmp_path, review)
    # the streamed model keeps no training cell; the in-memory one refits text on its training cells
    assert pd.read_pickle(streamed_folder / "artifacts" / SERVING_ARTIFACT / REFERENCE_FILE).shape == (0, 0)
    assert list(pd.read_pickle(memory_folder / "artifacts" / SERVING_ARTIFACT / REFERENCE_FILE).columns) == ["review"]
    # the in-memory model refits a relative vocab_file from the rows' folder (here the current one)
    monkeypatch.chdir(tmp_path)
    served = [mlflow.pyfunc.load_model(str(f)).unwrap_python_model().served for f in (memory_folder, streamed_folder)]
    new = pd.DataFrame({"review": NEW_TEXT, "size": np.arange(len(NEW_TEXT), dtype=float)})
    rows = pd.concat([df[["review", "size"]], new], ignore_index=True)
    want, got = (s.predict(rows, skip_bad_rows=True) for s in served)
    assert got.rows.bad == want.rows.bad and (got.rows.kept == want.rows.kept).all()
    assert len(want.rows.kept) == len(rows) - (
        df["review"].isna().sum() + 1 if "missing_value_strategy" in review else 0
    )
    # the same ids, row for row: the long row is cut at the width the training rows fitted
    ids = [s.preparer.prepare(rows, skip_bad_rows=True).data.inputs["review"] for s in served]
    assert ids[1].dtype == np.int64 and ids[1].shape[1] == served[1].meta["review"].shape[0]
    np.testing.assert_array_equal(ids[1], ids[0])
    _assert_equal_frames(want.frame, got.frame)
    # hpo serve's scoring server calls the pyfunc's predict: the same frames
    loaded = [mlflow.pyfunc.load_model(str(f)) for f in (memory_folder, streamed_folder)]
    _assert_equal_frames(*(m.predict(new.iloc[[0, 1, 4]]) for m in loaded))


def test_hpo_predict_and_evaluate_take_a_streamed_text_model_as_an_in_memory_one(tmp_path, tiny_bert_dir, monkeypatch):
    from typer.testing import CliRunner

    from ludwig_hpo.cli import app

    review = {
        "tokenizer": "hf_tokenizer",
        "pretrained_model_name_or_path": str(tiny_bert_dir),
        "max_sequence_length": 9,
    }
    memory_folder, streamed_folder, df = _text_models(tmp_path, review)
    df.iloc[::3].to_csv(tmp_path / "labelled.csv", index=False)
    monkeypatch.chdir(tmp_path)
    out: dict[str, list] = {}
    for name, folder in (("memory", memory_folder), ("streamed", streamed_folder)):
        runner = CliRunner()
        result = runner.invoke(app, ["predict", str(folder), "--dataset", "labelled.csv", "-o", f"{name}.csv"])
        assert result.exit_code == 0, result.output
        result = runner.invoke(
            app, ["evaluate", str(folder), "--dataset", "labelled.csv", "--split", "each", "-o", f"{name}.json"]
        )
        assert result.exit_code == 0, result.output
        out[name] = [pd.read_csv(tmp_path / f"{name}.csv"), json.loads((tmp_path / f"{name}.json").read_text())]
    assert len(out["streamed"][0]) == len(df.iloc[::3])
    pd.testing.assert_frame_equal(out["streamed"][0], out["memory"][0], rtol=1e-5)
    metrics = out["memory"][1]
    assert {"train/combined/loss", "validation/label/accuracy", "test/label/roc_auc"} <= metrics.keys()
    assert out["streamed"][1] == pytest.approx(metrics, rel=1e-5, abs=1e-7)
