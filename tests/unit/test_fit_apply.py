"""Preparation split into fit (training rows -> a JSON record in FeatureMeta) and apply (cells +
record -> arrays): new rows prepared alone get the arrays the sweep's preparation gave them, the
record survives preprocessing.json, and a model of number/binary/category features keeps no
training cells."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.data.numbers import normalize
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FITTED_TYPES, apply_input, apply_target, kept_rows
from ludwig_hpo.model import build_model
from ludwig_hpo.model.pyfunc import ServedModel, meta_from_json
from ludwig_hpo.model.raw_rows import reference_rows
from tests.unit.conftest import _sweep_dict

N = 60

INPUTS = [
    {"name": "mean", "type": "number", "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
    {
        "name": "const",
        "type": "number",
        "preprocessing": {"missing_value_strategy": "fill_with_const", "fill_value": 7},
    },
    {
        "name": "mode",
        "type": "number",
        "preprocessing": {"missing_value_strategy": "fill_with_mode", "normalization": "minmax"},
    },
    {"name": "out", "type": "number", "preprocessing": {"outlier_strategy": "fill_with_mean", "outlier_threshold": 2}},
    {"name": "pets", "type": "binary"},
    {
        "name": "owner",
        "type": "binary",
        "preprocessing": {"missing_value_strategy": "fill_with_true", "fallback_true_label": "dog"},
    },
    {"name": "city", "type": "category", "encoder": {"embedding_size": 3}},
    {
        "name": "town",
        "type": "category",
        "encoder": {"embedding_size": 3},
        "preprocessing": {"missing_value_strategy": "fill_with_mode", "most_common": 2},
    },
]
OUTPUTS = [
    {"name": "kind", "type": "category"},
    {"name": "sold", "type": "binary"},
    {"name": "price", "type": "number", "preprocessing": {"normalization": "zscore"}},
]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)

    def holes(x: np.ndarray, at: list[int]) -> np.ndarray:
        x = x.astype(object)
        x[at] = None
        return x

    out = rng.normal(0, 1, size=N)
    out[[5, 40]] = [25.0, -30.0]  # outliers, in whichever split they fall
    return pd.DataFrame(
        {
            "mean": holes(rng.normal(3, 2, size=N), [1, 17, 33, 50]).astype(float),
            "const": holes(rng.normal(0, 1, size=N), [2, 44]).astype(float),
            "mode": holes(rng.integers(0, 4, size=N).astype(float), [8, 29, 57]).astype(float),
            "out": out,
            "pets": holes(rng.choice(["yes", "no"], size=N), [4, 31]),
            "owner": holes(rng.choice(["cat", "dog"], size=N), [9, 52]),
            "city": holes(rng.choice(["rome", "oslo", "lima"], size=N), [6, 36]),
            "town": holes(rng.choice(["a", "b", "c", "d"], size=N), [12, 48]),
            "kind": rng.choice(["flat", "house", "loft"], size=N),
            "sold": rng.choice(["Sold", "Kept"], size=N),
            "price": rng.normal(100, 10, size=N),
        }
    )


@pytest.fixture(scope="module")
def fitted():
    frame = _frame()
    cfg = SweepConfig.model_validate(_sweep_dict(INPUTS, OUTPUTS))
    return frame, cfg, prepare(frame, cfg), kept_rows(frame, cfg)


def test_every_fitted_input_and_target_applied_to_new_rows_alone_equals_the_sweeps_rows(fitted):
    frame, cfg, data, kept = fitted
    rows = np.concatenate([data.splits["validation"], data.splits["test"]])
    new = kept.df.iloc[rows].reset_index(drop=True)
    assert {f.type for f in cfg.input_features} == FITTED_TYPES
    for feat in cfg.input_features:
        x, _ = apply_input(feat, new[feat.source_column], data.meta[feat.name], feat.name, DataOrigin(), alone=True)
        np.testing.assert_array_equal(x, data.inputs[feat.name][rows], err_msg=feat.name)
        # one row at a time too: a row's array does not depend on the rows sent with it
        one, _ = apply_input(feat, new[feat.source_column].iloc[:1], data.meta[feat.name], feat.name, DataOrigin())
        np.testing.assert_array_equal(one, data.inputs[feat.name][rows[:1]], err_msg=feat.name)
    for out in cfg.output_features:
        y, _ = apply_target(out, new[out.source_column], data.meta[out.name], out.name, DataOrigin(), alone=True)
        np.testing.assert_array_equal(y, data.targets[out.name][rows], err_msg=out.name)


def test_fill_values_are_the_training_splits_and_part_of_the_record(fitted):
    frame, cfg, data, kept = fitted
    train = kept.df.iloc[kept.splits["train"]]
    assert data.meta["mean"].fitted["fill"] == pytest.approx(float(train["mean"].mean()))
    assert data.meta["const"].fitted["fill"] == 7.0
    assert data.meta["town"].fitted["fill"] == train["town"].value_counts().index[0]
    assert data.meta["owner"].fitted["fill"] == "dog" and set(data.meta["owner"].fitted["labels"]) == {"cat", "dog"}
    # a request whose every cell is missing gets the training fill, not a statistic of itself
    feat = next(f for f in cfg.input_features if f.name == "mean")
    x, notes = apply_input(feat, pd.Series([np.nan, np.nan], name="mean"), data.meta["mean"], "k", DataOrigin())
    fill, stats = data.meta["mean"].fitted["fill"], data.meta["mean"].stats
    want = normalize(np.array([fill, fill]), feat.preprocessing.normalization, stats, "k", "mean", DataOrigin())
    np.testing.assert_array_equal(x[:, 0], want.astype(np.float32))
    assert notes[0].count == 2 and notes[0].value == fill


@pytest.mark.parametrize("strategy", ["bfill", "ffill"])
def test_neighbour_fills_of_new_rows_stay_among_them_then_take_the_training_splits_last_value(strategy):
    frame = _frame()
    inputs = [{"name": "mean", "type": "number", "preprocessing": {"missing_value_strategy": strategy}}]
    cfg = SweepConfig.model_validate(_sweep_dict(inputs, OUTPUTS))
    data = prepare(frame, cfg)
    meta, feat = data.meta["mean"], cfg.input_features[0]
    new = pd.Series([np.nan, 4.0, np.nan], name="mean")
    x, _ = apply_input(feat, new, meta, "k", DataOrigin(), alone=True)
    raw = [meta.fitted["last"], 4.0, 4.0] if strategy == "ffill" else [4.0, 4.0, 4.0]
    stats = meta.stats
    np.testing.assert_allclose(x[:, 0], (np.array(raw) - stats["mean"]) / stats["std"], rtol=1e-6)
    alone, _ = apply_input(feat, pd.Series([np.nan], name="mean"), meta, "k", DataOrigin(), alone=True)
    np.testing.assert_allclose(alone[0, 0], (meta.fitted["last"] - stats["mean"]) / stats["std"], rtol=1e-6)


def test_the_record_survives_preprocessing_json_and_the_model_keeps_no_training_cells(fitted, tmp_path):
    frame, cfg, data, kept = fitted
    meta = meta_from_json(json.loads(json.dumps({n: dataclasses.asdict(m) for n, m in data.meta.items()})))
    reference = reference_rows(kept.df.iloc[kept.splits["train"]], cfg)
    assert reference.shape == (0, 0)
    torch.manual_seed(0)
    served = ServedModel(build_model(cfg, data.meta).eval(), cfg, meta, reference)
    rows = data.splits["test"]
    got = served.preparer.prepare(kept.df.iloc[rows], targets=True)
    for name, x in data.inputs.items():
        np.testing.assert_array_equal(got.data.inputs[name], x[rows], err_msg=name)
    for name, y in data.targets.items():
        np.testing.assert_array_equal(got.data.targets[name], y[rows], err_msg=name)
    # (false label, true label): Ludwig's fallback_true_label default is the first in sorted order
    assert served.binary_labels == {"sold": ("Sold", "Kept")}


def test_a_model_saved_without_fitted_records_still_refits_on_its_training_cells(fitted):
    frame, cfg, data, kept = fitted
    train = kept.df.iloc[kept.splits["train"]].reset_index(drop=True)
    older = {n: dataclasses.replace(m, fitted={}) for n, m in data.meta.items()}
    served = ServedModel(
        build_model(cfg, data.meta).eval(), cfg, older, train[[f.source_column for f in cfg.input_features]]
    )
    rows = data.splits["test"]
    got = served.preparer.prepare(kept.df.iloc[rows])
    for name, x in data.inputs.items():
        np.testing.assert_array_equal(got.data.inputs[name], x[rows], err_msg=name)
