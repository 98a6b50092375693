"""Ludwig's ``preprocessing.split`` types: the rows each split gets, cut as Ludwig cuts them
(the same seed and rows give Ludwig's split), and their one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from ludwig_hpo.data import prepare
from ludwig_hpo.data.ludwig_split import hash_code, random_divisions, random_split
from ludwig_hpo.errors import DataError

N = 100
INPUTS = [{"name": "rid", "type": "number", "preprocessing": {"normalization": None}}]
BINARY_Y = [{"name": "y", "type": "binary"}]


def _frame(n: int = N, **cols) -> pd.DataFrame:
    return pd.DataFrame({"rid": np.arange(n, dtype=float), "y": [0, 1] * (n // 2), **cols})


def _splits(df: pd.DataFrame, make_config, split: dict | None = None, **sections) -> dict[str, list[int]]:
    if split is not None:
        sections["preprocessing"] = {"split": split}
    data = prepare(df, make_config(INPUTS, BINARY_Y, **sections))
    rid = data.inputs["rid"][:, 0].astype(int)
    return {name: sorted(rid[idx].tolist()) for name, idx in data.splits.items()}


def _ludwig_random(n: int, probabilities: tuple[float, float, float], seed: int) -> dict[str, list[int]]:
    """Ludwig's RandomSplitter on a frame of ``n`` rows, written out from its source."""
    shuffled = pd.DataFrame({"rid": range(n)}).sample(frac=1, random_state=seed)["rid"].to_numpy()
    d1 = math.ceil(probabilities[0] * n)
    d2 = d1 + int(probabilities[1] * n)
    return {
        "train": sorted(shuffled[:d1].tolist()),
        "validation": sorted(shuffled[d1:d2].tolist()),
        "test": sorted(shuffled[d2:].tolist()),
    }


def test_a_file_without_a_split_is_split_as_ludwig_splits_it(make_config):
    got = _splits(_frame(), make_config)
    assert {k: len(v) for k, v in got.items()} == {"train": 70, "validation": 10, "test": 20}
    assert got == _ludwig_random(N, (0.7, 0.1, 0.2), 42), "Ludwig's default random_seed 42"


def test_random_probabilities_and_seed(make_config):
    got = _splits(
        _frame(),
        make_config,
        {"type": "random", "probabilities": [0.6, 0.2, 0.2]},
        dataset={"source": "x.csv", "split": {"seed": 7}},
    )
    assert got == _ludwig_random(N, (0.6, 0.2, 0.2), 7)


def test_dataset_split_keeps_this_platforms_stratified_split(make_config):
    got = _splits(
        _frame(), make_config, dataset={"source": "x.csv", "split": {"train": 0.7, "validation": 0.15, "test": 0.15}}
    )
    assert {k: len(v) for k, v in got.items()} == {"train": 70, "validation": 15, "test": 15}


def test_random_divisions_give_small_splits_ludwigs_three_rows():
    assert random_divisions(20, (0.8, 0.1, 0.1)) == (14, 17)  # 16 / 2 / 2 -> 14 / 3 / 3
    assert random_divisions(1000, (0.7, 0.1, 0.2)) == (700, 800)
    parts = random_split(20, (0.8, 0.1, 0.1), 42)
    assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(20))


@pytest.mark.parametrize(
    "codes",
    [
        [0] * 60 + [1] * 20 + [2] * 20,
        [0.0] * 60 + [1.0] * 20 + [2.0] * 20,
        ["0"] * 60 + ["1"] * 20 + ["2"] * 20,
        ["train"] * 60 + ["validation"] * 20 + ["test"] * 20,
    ],
)
def test_fixed_reads_the_split_column_by_default(make_config, codes):
    got = _splits(_frame(split=codes), make_config, {"type": "fixed"})
    assert got == {"train": list(range(60)), "validation": list(range(60, 80)), "test": list(range(80, 100))}


def test_stratify_keeps_each_value_in_proportion(make_config):
    color = np.resize(["red", "red", "red", "blue"], N)
    got = _splits(_frame(color=color), make_config, {"type": "stratify", "column": "color"})
    for name, rows in got.items():
        share = np.mean(color[rows] == "blue")
        assert share == pytest.approx(0.25, abs=0.05), name
    # Ludwig's two train_test_split calls, seeded with random_state 42
    y = pd.DataFrame({"color": color})
    train, rest = train_test_split(np.arange(N), test_size=1.0 - 0.7, random_state=42, stratify=y)
    assert got["train"] == sorted(train.tolist())


def test_datetime_orders_rows_by_time(make_config):
    rng = np.random.default_rng(0)
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.permutation(N), unit="D")
    df = _frame(when=[d.strftime("%d/%m/%Y") for d in days])
    got = _splits(df, make_config, {"type": "datetime", "column": "when", "datetime_format": "%d/%m/%Y"})
    assert {k: len(v) for k, v in got.items()} == {"train": 70, "validation": 10, "test": 20}
    latest_train = max(days[got["train"]])
    assert latest_train < min(days[got["validation"]]) and max(days[got["validation"]]) < min(days[got["test"]])


def test_datetime_names_an_unreadable_date(make_config):
    df = _frame(when=["2024-01-01"] * N)
    df.loc[5, "when"] = "someday"
    with pytest.raises(DataError) as info:
        _splits(df, make_config, {"type": "datetime", "column": "when"})
    assert "dates that cannot be read (e.g. 'someday') (data row 6)" in info.value.message


def test_hash_keeps_an_id_in_its_split_as_rows_are_added(make_config):
    ids = [f"user{i}" for i in range(N)]
    first = _splits(_frame(uid=ids), make_config, {"type": "hash", "column": "uid"})
    more = ids + [f"user{i}" for i in range(N, 2 * N)]
    second = _splits(_frame(2 * N, uid=more), make_config, {"type": "hash", "column": "uid"})
    for name in first:
        assert set(first[name]) <= set(second[name]), name
    assert all(hash_code(v, (0.7, 0.1, 0.2)) == hash_code(v, (0.7, 0.1, 0.2)) for v in ids)
    assert len(second["train"]) / (2 * N) == pytest.approx(0.7, abs=0.12)


@pytest.mark.parametrize(
    ("split", "message"),
    [
        ({"type": "stratify"}, "split type 'stratify' needs column"),
        ({"type": "random", "column": "rid"}, "column does not apply to a random split"),
        ({"type": "fixed", "probabilities": [0.5, 0.3, 0.2]}, "probabilities do not apply to a fixed split"),
        ({"type": "random", "datetime_format": "%Y"}, "datetime_format applies to a datetime split only"),
        ({"type": "random", "probabilities": [0.8, 0.2, 0.0]}, "an empty split is not supported yet"),
        ({"type": "random", "probabilities": [0.8, 0.3, 0.2]}, "three positive fractions summing to 1"),
    ],
)
def test_split_mistakes_are_config_errors(make_config, split, message):
    with pytest.raises(Exception, match=message):
        make_config(INPUTS, BINARY_Y, preprocessing={"split": split})


def test_a_missing_split_column_is_one_line(make_config):
    with pytest.raises(DataError) as info:
        _splits(_frame(), make_config, {"type": "hash", "column": "uid"})
    assert info.value.key == "preprocessing.split.column" and "hash split column 'uid'" in info.value.message


def test_a_stratify_column_that_is_a_number_feature_is_refused(make_config):
    cfg = make_config(INPUTS, BINARY_Y, preprocessing={"split": {"type": "stratify", "column": "rid"}})
    with pytest.raises(DataError) as info:
        prepare(_frame(), cfg)
    assert info.value.key == "preprocessing.split.column"
    assert "the stratify split column 'rid' is the number feature 'rid'" in info.value.message


def test_datetime_fill_value_dates_a_row_without_one(make_config):
    df = _frame(when=[f"2024-01-{1 + i % 28:02d}" for i in range(N)])
    df.loc[0, "when"] = None
    got = _splits(df, make_config, {"type": "datetime", "column": "when", "fill_value": "2030-01-01"})
    assert 0 in got["test"], "the filled date is the latest"
    with pytest.raises(DataError, match="1 missing dates"):
        _splits(df, make_config, {"type": "datetime", "column": "when"})
