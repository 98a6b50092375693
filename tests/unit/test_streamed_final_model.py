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
