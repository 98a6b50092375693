"""A text input on a streamed dataset, without Ray: the vocabulary, width and length stats fitted
from batch partials equal the in-memory fit on the same rows (ties of equal counts in first-seen
order, for any batching), applied batches are the in-memory ids of their split, and what the
stream cannot fit is refused in one line naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.streaming.apply import apply_batch
from ludwig_hpo.data.streaming.checks import check_streamable
from ludwig_hpo.data.streaming.fit import FileOrigin, batch_partial, filled_notes, fitted_meta, merge
from ludwig_hpo.data.streaming.record import input_key
from ludwig_hpo.data.streaming.splits import split_rule
from ludwig_hpo.data.streaming.text import TextPartial
from ludwig_hpo.errors import DataError
from tests.unit.conftest import _sweep_dict

N = 300
#: Few words, so counts tie often; capitals that ``lowercase`` merges; punctuation that
#: ``space_punct`` splits off.
WORDS = ["the", "The", "cat", "dog", "Dog", "sat", "ran", "on", "mat", "rug", "a", "fox!", "red,", "<UNK>", "<PAD>"]


def _frame(n: int = N, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    texts: list[Any] = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 9)))) for _ in range(n)]
    for i in rng.choice(n, size=n // 12, replace=False):
        texts[i] = None if i % 3 else "   "  # missing cells and blank ones
    texts[n // 2] = " ".join(rng.choice(WORDS, size=20))  # one long row: the width
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "review": texts,
            "size": rng.normal(size=n),
            "label": rng.choice(["good", "bad"], size=n),
            "split": rng.choice([0, 1, 2], p=[0.7, 0.15, 0.15], size=n),
        }
    )


def _cfg(review: dict[str, Any], split: dict | None = None) -> SweepConfig:
    inputs = [{"name": "review", "type": "text", **review}, {"name": "size", "type": "number"}]
    raw = _sweep_dict(inputs, [{"name": "label", "type": "category"}])
    raw["preprocessing"] = {"split": split or {"type": "fixed"}}
    return SweepConfig.model_validate(raw)


def _batches(df: pd.DataFrame, sizes: list[int]) -> list[pd.DataFrame]:
    cuts = np.cumsum([0, *sizes])
    assert cuts[-1] == len(df)
    return [df.iloc[a:b].reset_index(drop=True) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def _streamed(df: pd.DataFrame, cfg: SweepConfig, sizes: list[int], data_dir: Path | None = None):
    rule = split_rule(cfg)
    check_streamable(cfg)
    total = merge([batch_partial(b, cfg, rule, FileOrigin("f.parquet")) for b in _batches(df, sizes)])
    return total, fitted_meta(cfg, total, "data/", data_dir)


CONFIGS = [
    pytest.param({}, id="defaults"),
    pytest.param({"preprocessing": {"lowercase": False}}, id="lowercase-false"),
    pytest.param({"preprocessing": {"most_common": 4}}, id="most_common-4"),
    pytest.param({"preprocessing": {"max_sequence_length": 7, "padding": "left"}}, id="max_sequence_length-7-left"),
    pytest.param({"preprocessing": {"max_sequence_length": None}}, id="max_sequence_length-null"),
    pytest.param(
        {"preprocessing": {"tokenizer": "space", "fill_value": "Nothing Here", "padding_symbol": "<pad>"}},
        id="space-fill-padding_symbol",
    ),
    pytest.param({"preprocessing": {"tokenizer": "characters", "unknown_symbol": "?"}}, id="characters-unknown"),
    pytest.param({"preprocessing": {"tokenizer": "ngram", "ngram_size": 3, "most_common": 40}}, id="ngram-3"),
    pytest.param({"preprocessing": {"missing_value_strategy": "drop_row"}}, id="drop_row"),
]


def _assert_same(streamed_meta, memory) -> None:
    got, want = streamed_meta["review"], memory.meta["review"]
    assert (got.name, got.type, got.shape, got.fitted) == (want.name, want.type, want.shape, want.fitted)
    assert got.vocab == want.vocab  # the order too: ids are positions
    assert got.stats == want.stats  # equal floats, not close ones
    assert streamed_meta["size"].stats.keys() == memory.meta["size"].stats.keys()


def _assert_same_ids(df: pd.DataFrame, cfg: SweepConfig, meta, memory, sizes: list[int]) -> None:
    rule = split_rule(cfg)
    for code, name in enumerate(("train", "validation", "test")):
        parts = [apply_batch(b, cfg, rule, meta, {code}, DataOrigin()) for b in _batches(df, sizes)]
        x = np.concatenate([p[input_key("review")] for p in parts])
        want = memory.inputs["review"][memory.splits[name]]
        assert x.dtype == want.dtype == np.int64 and x.shape == want.shape, name
        np.testing.assert_array_equal(x, want, err_msg=name)


@pytest.mark.parametrize("review", CONFIGS)
@pytest.mark.parametrize("sizes", [[N], [1, 99, 100, 100], [17] * 17 + [11]])
def test_the_text_fit_from_batch_partials_equals_the_in_memory_fit_and_ids(review, sizes):
    df = _frame()
    cfg = _cfg(review)
    memory = prepare(df, cfg)
    total, meta = _streamed(df, cfg, sizes)
    _assert_same(meta, memory)
    _assert_same_ids(df, cfg, meta, memory, list(reversed(sizes)))
    assert [(n.feature, n.count, n.how) for n in filled_notes(cfg, total, meta)] == [
        (n.feature, n.count, n.how) for n in memory.filled
    ]


def test_a_hash_split_fits_the_in_memory_vocabulary_of_its_training_rows():
    df = _frame()
    cfg = _cfg({"preprocessing": {"most_common": 6}}, {"type": "hash", "column": "id"})
    memory = prepare(df, cfg)
    _, meta = _streamed(df, cfg, [40] * 7 + [20])
    _assert_same(meta, memory)
    _assert_same_ids(df, cfg, meta, memory, [N])


def test_ties_of_equal_counts_keep_the_first_seen_order_across_batches():
    # every word once, in an order that sorting by text or by batch would change
    df = pd.DataFrame(
        {
            "review": ["zeta yak", "xi", "beta alpha", "omega", "yak zeta"] * 4 + ["q"] * 4,
            "size": np.arange(24.0),
            "label": ["a", "b"] * 12,
            "split": [0] * 20 + [1, 1, 2, 2],
        }
    )
    cfg = _cfg({"preprocessing": {"most_common": 4}})
    rule = split_rule(cfg)
    parts = [batch_partial(b, cfg, rule, FileOrigin("f.parquet")) for b in _batches(df, [3, 1, 20])]
    meta = fitted_meta(cfg, merge(parts), "data/")
    assert meta["review"].vocab[4:] == ("zeta", "yak", "xi", "beta")
    assert meta["review"].vocab == prepare(df, cfg).meta["review"].vocab


def test_a_vocab_file_is_the_vocabulary_and_starts_at_the_data_folder(tmp_path):
    (tmp_path / "words.txt").write_text("dog 12\ncat\n\nthe\tx\n")
    df = _frame()
    cfg = _cfg({"preprocessing": {"vocab_file": "words.txt"}})
    memory = prepare(df, cfg, data_dir=tmp_path)
    total, meta = _streamed(df, cfg, [150, 150], data_dir=tmp_path)
    _assert_same(meta, memory)
    assert meta["review"].vocab[4:] == ("dog", "cat", "the")
    part = total.columns["review"]
    assert isinstance(part, TextPartial) and not part.tokens  # nothing counted: the file is the vocabulary
    _assert_same_ids(df, cfg, meta, memory, [N])


def test_a_pretrained_tokenizer_is_applied_batch_by_batch_as_in_memory(tiny_bert_dir: Path):
    df = _frame()
    cfg = _cfg(
        {
            "preprocessing": {
                "tokenizer": "hf_tokenizer",
                "pretrained_model_name_or_path": str(tiny_bert_dir),
                "max_sequence_length": 12,
            }
        }
    )
    memory = prepare(df, cfg)
    _, meta = _streamed(df, cfg, [100, 200])
    _assert_same(meta, memory)
    assert meta["review"].stats["truncated"] > 0  # the cut applies to the streamed rows too
    _assert_same_ids(df, cfg, meta, memory, [7, 293])


def _one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("cells", "review", "what"),
    [
        ([None, "  "] * 10, {}, "the text is missing or blank"),
        (["_", "__"] * 10, {"preprocessing": {"tokenizer": "underscore"}}, "tokenizer underscore finds no token"),
    ],
)
def test_a_text_column_without_tokens_in_its_training_rows_is_the_in_memory_error(cells, review, what):
    df = pd.DataFrame({"review": cells, "size": np.arange(20.0), "label": ["a", "b"] * 10, "split": [0, 1, 2, 0] * 5})
    cfg = _cfg(review)
    with pytest.raises(DataError) as streamed:
        _streamed(df, cfg, [5, 15])
    with pytest.raises(DataError) as memory:
        prepare(df, cfg)
    assert what in _one_line(streamed) and "input_features[review]" in str(streamed.value)
    assert str(streamed.value) == f"data/: {memory.value}"  # the one difference: the dataset is named


def test_a_missing_vocab_file_names_the_key(tmp_path):
    cfg = _cfg({"preprocessing": {"vocab_file": "nowhere.txt"}})
    with pytest.raises(DataError) as e:
        _streamed(_frame(), cfg, [N], data_dir=tmp_path)
    assert "input_features[review].preprocessing.vocab_file" in _one_line(e)


def test_a_text_fill_with_mode_is_refused_before_any_row_is_read():
    cfg = _cfg({"preprocessing": {"missing_value_strategy": "fill_with_mode"}})
    with pytest.raises(DataError) as e:
        check_streamable(cfg)
    text = _one_line(e)
    assert "input_features[review].preprocessing.missing_value_strategy" in text
    assert "dataset.streaming: false" in text
