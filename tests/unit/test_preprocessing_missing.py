"""Ludwig's ``missing_value_strategy`` per type: what a missing cell becomes in the prepared
arrays, with Ludwig's defaults (number 0.0, category ``<UNK>``, binary false, targets'
rows dropped), ``drop_row`` removing a row from every feature and split, and
``PreparedData.filled`` saying what was done."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.errors import DataError

N = 40
BINARY_Y = [{"name": "y", "type": "binary"}]


def _frame(**cols) -> pd.DataFrame:
    base = {"rid": np.arange(N, dtype=float), "y": [0, 1] * (N // 2)}
    return pd.DataFrame({**base, **cols})


def _number(strategy: str | None = None, **prep) -> dict:
    p = {"normalization": None, **prep}
    if strategy is not None:
        p["missing_value_strategy"] = strategy
    return {"name": "x", "type": "number", "preprocessing": p}


def _x_with_gaps() -> list[float]:
    x = [float(i % 5) for i in range(N)]
    for i in (3, 10, 39):
        x[i] = np.nan
    return x


def _prepared(inputs: list[dict], df: pd.DataFrame, make_config, outputs=BINARY_Y):
    return prepare(df, make_config(inputs, outputs))


@pytest.mark.parametrize(
    ("strategy", "prep", "expect"),
    [
        (None, {}, {3: 0.0, 10: 0.0, 39: 0.0}),  # Ludwig's default: fill_with_const, fill_value 0.0
        ("fill_with_const", {"fill_value": 7.5}, {3: 7.5, 10: 7.5, 39: 7.5}),
        ("bfill", {}, {3: 4.0, 10: 1.0, 39: 3.0}),  # the last row has no next value: the previous one
        ("ffill", {}, {3: 2.0, 10: 4.0, 39: 3.0}),
    ],
)
def test_number_strategies_reach_the_arrays(make_config, strategy, prep, expect):
    data = _prepared([_number(strategy, **prep)], _frame(x=_x_with_gaps()), make_config)
    x = data.inputs["x"][:, 0]
    assert {i: float(x[i]) for i in expect} == expect
    present = [i for i in range(N) if i not in expect]
    assert x[present].tolist() == [float(i % 5) for i in present], "present values are untouched"


def test_number_mean_and_mode_come_from_the_training_split(make_config):
    df = _frame(x=_x_with_gaps())
    mean = _prepared([_number("fill_with_mean")], df, make_config)
    train = mean.splits["train"]
    expected = float(np.nanmean(np.asarray(_x_with_gaps())[train]))
    assert mean.inputs["x"][3, 0] == pytest.approx(expected)
    assert mean.filled[0].how == "training mean" and mean.filled[0].value == pytest.approx(expected)
    x = pd.Series(_x_with_gaps())
    x[x.index % 7 == 0] = 4.0  # make 4.0 the most frequent value
    x[[3, 10]] = np.nan
    mode = _prepared([_number("fill_with_mode")], _frame(x=x.to_numpy()), make_config)
    assert (
        mode.inputs["x"][3, 0] == 4.0
        and mode.filled[0].text() == "3 missing values in x filled with the training mode (4)"
    )


def test_zscore_sees_the_filled_values(make_config):
    """Ludwig fills first, then fits the normalization on the filled column."""
    data = _prepared([{"name": "x", "type": "number"}], _frame(x=_x_with_gaps()), make_config)
    train = data.splits["train"]
    raw = np.nan_to_num(np.asarray(_x_with_gaps()), nan=0.0)
    assert data.meta["x"].stats["mean"] == pytest.approx(raw[train].mean())
    assert data.inputs["x"][3, 0] == pytest.approx((0.0 - raw[train].mean()) / raw[train].std(ddof=1), rel=1e-5)


def test_drop_row_drops_the_row_from_every_feature_and_split(make_config):
    df = _frame(x=_x_with_gaps(), c=["red", "blue"] * (N // 2))
    data = _prepared(
        [
            {"name": "rid", "type": "number", "preprocessing": {"normalization": None}},
            _number("drop_row"),
            {"name": "c", "type": "category"},
        ],
        df,
        make_config,
    )
    assert data.num_rows == N - 3
    kept = data.inputs["rid"][:, 0].astype(int).tolist()
    assert kept == [i for i in range(N) if i not in (3, 10, 39)]
    assert all(len(a) == N - 3 for a in (*data.inputs.values(), *data.targets.values()))
    assert data.targets["y"].tolist() == [i % 2 for i in kept], "targets follow the same rows"
    rows = np.concatenate(list(data.splits.values()))
    assert sorted(rows.tolist()) == list(range(N - 3)), "every split indexes the kept rows"
    assert [f.text() for f in data.filled] == ["3 rows dropped: no value in x (drop_row)"]


def test_a_dropped_row_keeps_the_file_line_numbers_in_errors(tmp_path, make_config):
    df = _frame(x=_x_with_gaps()).assign(z=[str(i) for i in range(N)])
    df.loc[20, "z"] = "oops"  # file line 22 (the header is line 1)
    df.to_csv(tmp_path / "data.csv", index=False)
    cfg = make_config([_number("drop_row"), {"name": "z", "type": "number"}], BINARY_Y)
    with pytest.raises(DataError) as info:
        prepare(load_dataframe(str(tmp_path / "data.csv"), tmp_path), cfg)
    assert "(e.g. 'oops'; line 22)" in info.value.message


@pytest.mark.parametrize(
    ("prep", "missing_id", "how"),
    [
        ({}, 0, "unknown category"),
        ({"fill_value": "blue"}, None, "constant"),
        ({"missing_value_strategy": "fill_with_mode"}, None, "training mode"),
    ],
)
def test_category_strategies(make_config, prep, missing_id, how):
    c = ["blue", "blue", "red"] * 13 + ["blue"]
    c[5] = None
    data = _prepared([{"name": "c", "type": "category", "preprocessing": prep}], _frame(c=c), make_config)
    vocab = data.meta["c"].vocab
    want = missing_id if missing_id is not None else vocab.index("blue")
    assert data.inputs["c"][5] == want
    assert data.filled[0].how == how


@pytest.mark.parametrize(
    ("prep", "value"),
    [
        ({}, 0.0),  # Ludwig's default: fill_with_false
        ({"missing_value_strategy": "fill_with_true"}, 1.0),
        ({"missing_value_strategy": "fill_with_const", "fill_value": True}, 1.0),
        ({"missing_value_strategy": "fill_with_const", "fill_value": "no"}, 0.0),
    ],
)
def test_binary_strategies(make_config, prep, value):
    b = ["yes", "no"] * (N // 2)
    b[7] = None
    data = _prepared([{"name": "b", "type": "binary", "preprocessing": prep}], _frame(b=b), make_config)
    assert data.inputs["b"][7, 0] == value
    assert data.inputs["b"][:7, 0].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


def test_binary_fill_with_const_needs_a_value(make_config):
    with pytest.raises(Exception, match="fill_with_const needs fill_value"):
        make_config(
            [{"name": "b", "type": "binary", "preprocessing": {"missing_value_strategy": "fill_with_const"}}], BINARY_Y
        )


def test_a_missing_target_drops_its_row_by_default(make_config):
    df = _frame(x=np.arange(N, dtype=float))
    df["y"] = df["y"].astype(object)
    df.loc[[4, 9], "y"] = None
    data = _prepared([_number()], df, make_config)
    assert data.num_rows == N - 2 and data.filled[0].text() == "2 rows dropped: no value in y (drop_row)"


def test_a_number_target_can_be_filled_instead(make_config):
    df = _frame(x=np.arange(N, dtype=float), t=_x_with_gaps())
    out = [
        {
            "name": "t",
            "type": "number",
            "preprocessing": {"missing_value_strategy": "fill_with_const", "fill_value": -1.0},
        }
    ]
    data = _prepared([_number()], df, make_config, outputs=out)
    assert data.num_rows == N and data.targets["t"][[3, 10, 39]].tolist() == [-1.0, -1.0, -1.0]


def test_fill_with_mean_is_for_numbers_only(make_config):
    with pytest.raises(Exception, match="fill_with_mean"):
        make_config(
            [{"name": "c", "type": "category", "preprocessing": {"missing_value_strategy": "fill_with_mean"}}], BINARY_Y
        )
