"""Preparation of set, bag, sequence, timeseries, vector, date and h3 inputs and of set and
vector targets (data/feature_types.py) on a small listings-like frame: the prepared arrays,
vocabularies and lengths from the training split only, Ludwig's missing-value defaults, and
one-line errors for cells that do not read as their type."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.data import prepare
from ludwig_hpo.data.components import h3_components, to_h3
from ludwig_hpo.errors import DataError

N = 40
TAGS = ["wifi pool", "wifi parking", "pool", "kitchen wifi parking", "parking"]
WORDS = ["sunny flat near the beach", "quiet room quiet street", "big house big garden", "flat in the centre"]


@pytest.fixture(scope="module")
def listings() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    days = pd.date_range("2021-01-01", periods=N, freq="37h")
    return pd.DataFrame(
        {
            "tags": [TAGS[i % len(TAGS)] for i in range(N)],
            "words": [WORDS[i % len(WORDS)] for i in range(N)],
            "review": [WORDS[(i * 3) % len(WORDS)] for i in range(N)],
            "temps": [" ".join(f"{t:.1f}" for t in rng.normal(20, 3, size=3 + i % 4)) for i in range(N)],
            "embedding": [" ".join(f"{v:.3f}" for v in rng.normal(size=4)) for _ in range(N)],
            "listed": [d.strftime("%Y-%m-%d %H:%M:%S") for d in days],
            "cell": [622236723497533439 + (i % 3) * (1 << 30) for i in range(N)],
            "price": rng.normal(100, 20, size=N),
            "amenities": [TAGS[(i + 1) % len(TAGS)] for i in range(N)],
            "target_vec": [" ".join(f"{v:.2f}" for v in rng.normal(size=3)) for _ in range(N)],
        }
    )


def _prepared(make_config, frame, inputs, outputs=None):
    cfg = make_config(inputs, outputs or [{"name": "price", "type": "number"}])
    return prepare(frame, cfg)


def test_set_is_multi_hot_over_the_training_vocabulary_with_unknown_at_0(listings, make_config):
    frame = listings.copy()
    data = _prepared(make_config, frame, [{"name": "tags", "type": "set"}])
    held_out = data.splits["test"][0]
    frame.loc[held_out, "tags"] = "sauna wifi"  # sauna is in no training row
    frame.loc[data.splits["train"][0], "tags"] = None  # missing: Ludwig's fill_with_const <UNK>
    data = _prepared(make_config, frame, [{"name": "tags", "type": "set"}])
    x, meta = data.inputs["tags"], data.meta["tags"]
    assert x.dtype == np.float32 and x.shape == (N, len(meta.vocab)) and meta.shape == (len(meta.vocab),)
    assert meta.vocab[0] == "<UNK>" and set(meta.vocab[1:]) == {"wifi", "pool", "parking", "kitchen"}
    col = {t: i for i, t in enumerate(meta.vocab)}
    assert x[held_out].tolist() == [1.0 if t in ("<UNK>", "wifi") else 0.0 for t in meta.vocab]
    assert x[data.splits["train"][0]].tolist() == [1.0] + [0.0] * (len(meta.vocab) - 1)
    row = data.splits["train"][1]
    assert x[row, [col[t] for t in frame.loc[row, "tags"].split()]].tolist() == [1.0] * len(
        frame.loc[row, "tags"].split()
    )
    assert x[row].sum() == len(frame.loc[row, "tags"].split())


def test_set_most_common_keeps_the_most_frequent_training_tokens(listings, make_config):
    data = _prepared(make_config, listings, [{"name": "tags", "type": "set", "preprocessing": {"most_common": 2}}])
    vocab = data.meta["tags"].vocab
    assert vocab[0] == "<UNK>" and set(vocab[1:]) == {"wifi", "parking"}  # pool and kitchen become unknown
    assert data.inputs["tags"].shape == (N, 3)


def test_bag_counts_tokens_and_a_comma_tokenizer_splits_on_commas(listings, make_config):
    frame = listings.assign(words=["quiet, quiet, room"] * N)
    data = _prepared(make_config, frame, [{"name": "words", "type": "bag", "preprocessing": {"tokenizer": "comma"}}])
    meta, x = data.meta["words"], data.inputs["words"]
    assert meta.vocab == ("<UNK>", "quiet", "room")
    assert x[0].tolist() == [0.0, 2.0, 1.0]


def test_sequence_ids_are_ludwigs_between_start_and_stop_padded_to_the_longest_training_row(listings, make_config):
    frame = listings.copy()
    data = _prepared(make_config, frame, [{"name": "review", "type": "sequence"}])
    x, meta = data.inputs["review"], data.meta["review"]
    assert x.dtype == np.int64 and meta.vocab[:4] == ("<PAD>", "<UNK>", "<SOS>", "<EOS>")
    longest = max(len(frame.loc[i, "review"].split()) for i in data.splits["train"]) + 2  # with <SOS>, <EOS>
    assert meta.shape == (longest,) and x.shape == (N, longest)
    ids = {t: i for i, t in enumerate(meta.vocab)}
    row = 0
    tokens = frame.loc[row, "review"].split()
    assert x[row].tolist() == [2] + [ids[t] for t in tokens] + [3] + [0] * (longest - len(tokens) - 2)


def test_sequence_padding_left_max_length_and_unknown_tokens(listings, make_config):
    frame = listings.copy()
    probe = _prepared(make_config, frame, [{"name": "review", "type": "sequence"}]).splits["test"][0]
    frame.loc[probe, "review"] = "Zebra FLAT"  # zebra: in no training row, so unknown
    prep = {"padding": "left", "max_sequence_length": 5, "lowercase": True}
    data = _prepared(make_config, frame, [{"name": "review", "type": "sequence", "preprocessing": prep}])
    x, meta = data.inputs["review"], data.meta["review"]
    assert meta.shape == (5,)
    assert x[probe].tolist() == [0, 2, 1, meta.vocab.index("flat"), 3]
    cut = _prepared(
        make_config, frame, [{"name": "review", "type": "sequence", "preprocessing": {"max_sequence_length": 2}}]
    )
    assert cut.inputs["review"][probe].tolist() == [2, 1]  # cut as Ludwig cuts: the stop symbol goes first


def test_timeseries_is_padded_with_padding_value_and_cut_at_the_limit(listings, make_config):
    frame = listings.copy()
    frame.loc[0, "temps"] = "1.5 nan 2.5"  # NaN inside a series: padding_value, as Ludwig
    prep = {"padding_value": -1.0, "padding": "left"}
    data = _prepared(make_config, frame, [{"name": "temps", "type": "timeseries", "preprocessing": prep}])
    x, meta = data.inputs["temps"], data.meta["temps"]
    longest = max(len(frame.loc[i, "temps"].split()) for i in data.splits["train"])
    assert x.dtype == np.float32 and meta.shape == (longest,) == x.shape[1:]
    assert x[0].tolist() == [-1.0] * (longest - 3) + [1.5, -1.0, 2.5]
    cut = _prepared(
        make_config, frame, [{"name": "temps", "type": "timeseries", "preprocessing": {"timeseries_length_limit": 2}}]
    )
    assert cut.inputs["temps"].shape == (N, 2) and cut.inputs["temps"][0].tolist() == [1.5, 0.0]


def test_vector_rows_become_float_columns(listings, make_config):
    data = _prepared(make_config, listings, [{"name": "embedding", "type": "vector"}])
    x = data.inputs["embedding"]
    assert x.dtype == np.float32 and x.shape == (N, 4) and data.meta["embedding"].shape == (4,)
    assert np.allclose(x[3], [float(v) for v in listings.loc[3, "embedding"].split()])


def test_a_vector_of_the_wrong_length_is_one_line_naming_the_column_the_rows_and_the_fix(listings, make_config):
    frame = listings.copy()
    frame.loc[[6, 9], "embedding"] = "0.1 0.2"
    with pytest.raises(DataError) as err:
        _prepared(make_config, frame, [{"name": "embedding", "type": "vector"}])
    text = str(err.value)
    assert "\n" not in text and "'embedding'" in text and "2 rows do not hold 4 numbers" in text
    assert "data rows 7, 10" in text and "vector_size" in text
    with pytest.raises(DataError, match="preprocessing.vector_size holds 3"):
        _prepared(make_config, listings, [{"name": "embedding", "type": "vector", "preprocessing": {"vector_size": 3}}])


def test_a_missing_vector_is_refused_without_a_fill_value_and_filled_with_one(listings, make_config):
    frame = listings.copy()
    frame.loc[2, "embedding"] = None
    with pytest.raises(DataError, match="rows have no value.*fill_value"):
        _prepared(make_config, frame, [{"name": "embedding", "type": "vector"}])
    prep = {"fill_value": "0 0 0 1"}
    data = _prepared(make_config, frame, [{"name": "embedding", "type": "vector", "preprocessing": prep}])
    assert data.inputs["embedding"][2].tolist() == [0.0, 0.0, 0.0, 1.0]


def test_date_becomes_ludwigs_nine_components(listings, make_config):
    frame = listings.copy()
    frame.loc[0, "listed"] = "2024-02-29 13:45:10"
    data = _prepared(make_config, frame, [{"name": "listed", "type": "date"}])
    x = data.inputs["listed"]
    assert x.dtype == np.int64 and x.shape == (N, 9) and data.meta["listed"].shape == (9,)
    # year, month, day, weekday (Thursday = 3), day of the year, hour, minute, second, second of the day
    assert x[0].tolist() == [2024, 2, 29, 3, 60, 13, 45, 10, 13 * 3600 + 45 * 60 + 10]


def test_datetime_format_reads_the_column_and_an_unparsable_date_is_one_line(listings, make_config):
    frame = listings.assign(listed=["03/04/2021"] * N)
    feat = {"name": "listed", "type": "date", "preprocessing": {"datetime_format": "%d/%m/%Y"}}
    assert _prepared(make_config, frame, [feat]).inputs["listed"][0, :3].tolist() == [2021, 4, 3]
    frame.loc[4, "listed"] = "not a date"
    with pytest.raises(DataError) as err:
        _prepared(make_config, frame, [feat])
    text = str(err.value)
    assert "\n" not in text and "'listed'" in text and "'not a date'" in text and "data row 5" in text
    assert "datetime_format" in text


def test_missing_date_takes_fill_value(listings, make_config):
    frame = listings.copy()
    frame.loc[1, "listed"] = None
    feat = {"name": "listed", "type": "date", "preprocessing": {"fill_value": "2000-01-01"}}
    assert _prepared(make_config, frame, [feat]).inputs["listed"][1, :3].tolist() == [2000, 1, 1]


def test_h3_becomes_ludwigs_nineteen_components(listings, make_config):
    data = _prepared(make_config, listings, [{"name": "cell", "type": "h3"}])
    x = data.inputs["cell"]
    assert x.dtype == np.int64 and x.shape == (N, 19) and data.meta["cell"].shape == (19,)
    # 622236723497533439 = 0x8a2a100d645ffff: mode 1, edge 0, resolution 10, base cell 21, 10 digits, 5 unused (7)
    assert x[0, :4].tolist() == [1, 0, 10, 21] and x[0, 14:].tolist() == [7] * 5
    assert h3_components(to_h3("8a2a100d645ffff")) == x[0].tolist()


def test_a_bad_h3_cell_is_one_line(listings, make_config):
    frame = listings.astype({"cell": object})
    frame.loc[3, "cell"] = "somewhere"
    with pytest.raises(DataError, match=r"'cell': 1 values are not h3 indexes .*data row 4"):
        _prepared(make_config, frame, [{"name": "cell", "type": "h3"}])


def test_set_and_vector_targets(listings, make_config):
    data = _prepared(
        make_config,
        listings,
        [{"name": "tags", "type": "set"}],
        [{"name": "amenities", "type": "set"}, {"name": "target_vec", "type": "vector"}],
    )
    y, meta = data.targets["amenities"], data.meta["amenities"]
    assert y.dtype == np.float32 and y.shape == (N, len(meta.vocab)) and "<UNK>" not in meta.vocab
    cols = {t: i for i, t in enumerate(meta.vocab)}
    assert {meta.vocab[j] for j in np.flatnonzero(y[0])} == set(listings.loc[0, "amenities"].split())
    assert set(cols) == {"wifi", "pool", "parking", "kitchen"}
    v = data.targets["target_vec"]
    assert v.dtype == np.float32 and v.shape == (N, 3) and data.meta["target_vec"].shape == (3,)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("bfill", "pool"), ("ffill", "wifi parking"), ("fill_with_mode", None)],
)
def test_missing_strategies_of_token_features(listings, make_config, strategy, expected):
    frame = listings.copy()
    frame.loc[2, "tags"] = None  # between 'wifi parking' (row 1) and 'kitchen wifi parking' (row 3)
    frame.loc[3, "tags"] = "pool"
    feat = {"name": "tags", "type": "set", "preprocessing": {"missing_value_strategy": strategy}}
    data = _prepared(make_config, frame, [feat])
    x, vocab = data.inputs["tags"], data.meta["tags"].vocab
    got = {vocab[j] for j in np.flatnonzero(x[2])}
    if expected is None:  # the training split's most frequent cell
        train = frame.loc[data.splits["train"], "tags"].dropna()
        expected = train.value_counts().index[0]
    assert got == set(expected.split())


def test_drop_row_drops_the_rows_with_a_missing_cell(listings, make_config):
    frame = listings.copy()
    frame.loc[[4, 8], "temps"] = None
    feat = {"name": "temps", "type": "timeseries", "preprocessing": {"missing_value_strategy": "drop_row"}}
    data = _prepared(make_config, frame, [feat])
    assert data.inputs["temps"].shape[0] == N - 2 and data.num_rows == N - 2
