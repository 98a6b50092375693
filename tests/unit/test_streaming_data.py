"""A streamed dataset's data side, without Ray: rows split by a hash (deterministic, in the
fractions asked, the same for any batching), preprocessing fitted from batch partials equal to
the in-memory fit on the same rows, batches applied as in memory, and bad input refused in one
line naming the file and the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.data.ludwig_split import hash_split
from ludwig_hpo.data.numbers import statistics
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.streaming.apply import apply_batch
from ludwig_hpo.data.streaming.checks import check_streamable
from ludwig_hpo.data.streaming.fit import FileOrigin, batch_partial, filled_notes, fitted_meta, merge
from ludwig_hpo.data.streaming.number_counts import NumberCounts
from ludwig_hpo.data.streaming.outliers import last_kept_of_batch, with_last_kept
from ludwig_hpo.data.streaming.record import FOLD_KEY, input_key, split_batch, target_key
from ludwig_hpo.data.streaming.splits import split_codes, split_rule
from ludwig_hpo.errors import DataError
from tests.unit.conftest import _sweep_dict

N = 400

INPUTS = [
    {"name": "mean", "type": "number", "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
    {"name": "const", "type": "number", "preprocessing": {"fill_value": 7, "normalization": "iq"}},
    {
        "name": "mode",
        "type": "number",
        "preprocessing": {"missing_value_strategy": "fill_with_mode", "normalization": "minmax"},
    },
    {"name": "pets", "type": "binary"},
    {
        "name": "owner",
        "type": "binary",
        "preprocessing": {"missing_value_strategy": "fill_with_true", "fallback_true_label": "dog"},
    },
    {"name": "flag", "type": "binary"},
    {"name": "city", "type": "category", "encoder": {"embedding_size": 3}},
    {
        "name": "town",
        "type": "category",
        "encoder": {"embedding_size": 3},
        "preprocessing": {"missing_value_strategy": "fill_with_mode", "most_common": 3, "lowercase": True},
    },
    {"name": "gone", "type": "number", "preprocessing": {"missing_value_strategy": "drop_row"}},
    {"name": "out", "type": "number", "preprocessing": {"outlier_strategy": "fill_with_mean", "outlier_threshold": 2}},
    {
        "name": "out_const",
        "type": "number",
        "preprocessing": {"outlier_strategy": "fill_with_const", "fill_value": 1.5, "outlier_threshold": 1},
    },
]
OUTPUTS = [
    {"name": "kind", "type": "category"},
    {"name": "sold", "type": "binary"},
    {"name": "price", "type": "number", "preprocessing": {"normalization": "zscore"}},
]


def _frame(n: int = N, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)

    def holes(x: np.ndarray, share: float = 0.05) -> np.ndarray:
        x = x.astype(object)
        x[rng.random(len(x)) < share] = None
        return x

    return pd.DataFrame(
        {
            "id": np.arange(n),
            "mean": holes(rng.normal(3, 2, size=n)).astype(float),
            "const": holes(rng.normal(0, 1, size=n)).astype(float),
            "mode": holes(rng.integers(0, 4, size=n).astype(float)).astype(float),
            "pets": holes(rng.choice(["yes", "no"], size=n)),
            "owner": holes(rng.choice(["cat", "dog"], size=n)),
            "flag": rng.integers(0, 2, size=n),
            "city": holes(rng.choice(["rome", "oslo", "lima", "bern"], size=n)),
            # ties in counts and a case that lowercase merges
            "town": holes(rng.choice(["a", "A", "b", "c", "d", "e"], size=n)),
            "gone": holes(rng.normal(size=n), 0.02).astype(float),
            "out": holes(np.where(rng.random(n) < 0.05, 40.0, rng.normal(size=n))).astype(float),
            "out_const": holes(rng.normal(size=n)).astype(float),
            "kind": rng.choice(["flat", "house", "loft"], size=n),
            "sold": rng.choice(["Sold", "Kept"], size=n),
            "price": rng.normal(100, 10, size=n),
            "split": rng.choice([0, 1, 2], p=[0.7, 0.15, 0.15], size=n),
        }
    )


def _cfg(split: dict, **sections) -> SweepConfig:
    return SweepConfig.model_validate(_sweep_dict(INPUTS, OUTPUTS, preprocessing={"split": split}, **sections))


def _batches(df: pd.DataFrame, sizes: list[int]) -> list[pd.DataFrame]:
    cuts = np.cumsum([0, *sizes])
    assert cuts[-1] == len(df)
    return [df.iloc[a:b].reset_index(drop=True) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def _streamed_meta(df: pd.DataFrame, cfg: SweepConfig, sizes: list[int]):
    rule = split_rule(cfg)
    total = merge([batch_partial(b, cfg, rule, FileOrigin("f.parquet")) for b in _batches(df, sizes)])
    meta = fitted_meta(cfg, total, "data/")
    # the outliers' second pass, batch by batch
    lasts = [last_kept_of_batch(b, cfg, rule, meta, DataOrigin()) for b in _batches(df, sizes)]
    meta, outliers = with_last_kept(meta, lasts)
    return total, meta, filled_notes(cfg, total, meta, outliers)


def _assert_same_meta(streamed, memory):
    assert streamed.keys() == memory.keys()
    for name, want in memory.items():
        got = streamed[name]
        assert (got.name, got.type, got.vocab, got.shape) == (want.name, want.type, want.vocab, want.shape), name
        assert got.fitted.keys() == want.fitted.keys(), name
        for k, v in want.fitted.items():
            assert got.fitted[k] == pytest.approx(v, rel=1e-12) if isinstance(v, float) else got.fitted[k] == v, (
                name,
                k,
            )
        assert got.stats.keys() == want.stats.keys(), name
        for k, v in want.stats.items():
            # the mean and std are sums taken in another order (so is a fill_with_mean value, which
            # may be a quartile); without a mean fill the quartiles are equal (test below)
            tol = 1e-12 if k in ("mean", "std") or name == "mean" else 0
            assert got.stats[k] == pytest.approx(v, rel=tol, abs=0), (name, k)


@pytest.mark.parametrize("split", [{"type": "fixed"}, {"type": "hash", "column": "id"}])
@pytest.mark.parametrize("sizes", [[N], [1, 99, 150, 150], [37] * 10 + [30]])
def test_the_fit_from_batch_partials_equals_the_in_memory_fit_on_the_same_rows(split, sizes):
    df = _frame()
    cfg = _cfg(split)
    memory = prepare(df, cfg)
    total, meta, notes = _streamed_meta(df, cfg, sizes)
    _assert_same_meta(meta, memory.meta)
    assert [(n.feature, n.count, n.how, n.what) for n in notes] == [
        (n.feature, n.count, n.how, n.what) for n in memory.filled
    ]
    assert [n.value for n in notes] == [
        pytest.approx(n.value, rel=1e-12) if isinstance(n.value, float) else n.value for n in memory.filled
    ]
    assert total.split_rows == [len(memory.splits[s]) for s in ("train", "validation", "test")]
    assert total.dropped["gone"] > 0


def test_applied_batches_are_the_in_memory_arrays_of_their_split():
    df = _frame()
    cfg = _cfg({"type": "fixed"})
    memory = prepare(df, cfg)
    rule = split_rule(cfg)
    _, meta, _ = _streamed_meta(df, cfg, [N])
    for code, name in enumerate(("train", "validation", "test")):
        parts = [apply_batch(b, cfg, rule, meta, {code}, DataOrigin()) for b in _batches(df, [123, 277])]
        inputs, targets = split_batch({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
        rows = memory.splits[name]
        for feat, x in inputs.items():
            np.testing.assert_allclose(x, memory.inputs[feat][rows], rtol=1e-6, err_msg=feat)
            assert x.dtype == memory.inputs[feat].dtype and x.shape[1:] == memory.inputs[feat].shape[1:]
        for feat, y in targets.items():
            np.testing.assert_allclose(y, memory.targets[feat][rows], rtol=1e-6, err_msg=feat)
        assert (np.concatenate([p[FOLD_KEY] for p in parts]) == -1).all()  # no k-fold


def test_the_quartiles_of_counted_values_are_numpys_for_any_count():
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 5, 7, 10, 101, 1000):
        x = np.round(rng.normal(size=n), 1)  # repeated values
        # counted in two halves, as two batches
        t = NumberCounts.of(x[: n // 2], np.arange(n // 2))
        t.merge(NumberCounts.of(x[n // 2 :], np.arange(n - n // 2)), n // 2)
        got, want = t.statistics(), statistics(x)
        for k in ("min", "max", "q1", "q2", "q3"):
            assert got[k] == want[k], (n, k)


def test_a_row_hash_split_is_deterministic_in_its_fractions_and_independent_of_batching_and_column_order():
    df = _frame(4000, seed=1).drop(columns=["split"])
    cfg = SweepConfig.model_validate(
        _sweep_dict(INPUTS, OUTPUTS, dataset={"source": "d/", "split": {"train": 0.6, "validation": 0.2, "test": 0.2}})
    )
    rule = split_rule(cfg)
    assert rule.kind == "hash_row"
    whole = split_codes(df, rule, DataOrigin())
    parts = np.concatenate([split_codes(b, rule, DataOrigin()) for b in _batches(df, [1, 999, 3000])])
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_array_equal(whole, split_codes(df[df.columns[::-1]], rule, DataOrigin()))
    shares = np.bincount(whole, minlength=3) / len(df)
    np.testing.assert_allclose(shares, [0.6, 0.2, 0.2], atol=0.03)
    # another seed draws another split
    other = SweepConfig.model_validate(
        _sweep_dict(
            INPUTS,
            OUTPUTS,
            dataset={"source": "d/", "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 7}},
        )
    )
    assert (split_codes(df, split_rule(other), DataOrigin()) != whole).mean() > 0.3


def test_a_hash_split_of_an_id_column_is_ludwigs():
    df = _frame()
    cfg = _cfg({"type": "hash", "column": "id"})
    codes = split_codes(df, split_rule(cfg), DataOrigin())
    want = hash_split(df["id"], (0.7, 0.1, 0.2))
    for code, name in enumerate(("train", "validation", "test")):
        np.testing.assert_array_equal(np.flatnonzero(codes == code), want[name])


def test_kfold_folds_partition_train_and_validation_rows_by_a_seeded_hash():
    df = _frame(2000)
    cfg = _cfg({"type": "fixed"}, kfold={"k": 4})
    rule = split_rule(cfg)
    total = merge([batch_partial(b, cfg, rule, DataOrigin()) for b in _batches(df, [700, 1300])])
    assert len(total.fold_rows) == 4 and sum(total.fold_rows) == total.split_rows[0] + total.split_rows[1]
    assert min(total.fold_rows) > 0.2 * sum(total.fold_rows)
    _, meta, _ = _streamed_meta(df, cfg, [2000])
    batch = apply_batch(df, cfg, rule, meta, {0, 1, 2}, DataOrigin())
    again = apply_batch(df, cfg, rule, meta, {0, 1, 2}, DataOrigin())
    np.testing.assert_array_equal(batch[FOLD_KEY], again[FOLD_KEY])
    kept = df[df["gone"].notna()].reset_index(drop=True)
    assert ((batch[FOLD_KEY] == -1) == (kept["split"].to_numpy() == 2)).all()
    assert input_key("mean") in batch and target_key("kind") in batch


def _one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def test_a_split_column_with_other_values_names_the_file_and_the_column():
    df = _frame(50)
    df.loc[7, "split"] = 3
    cfg = _cfg({"type": "fixed"})
    with pytest.raises(DataError) as e:
        batch_partial(df, cfg, split_rule(cfg), FileOrigin("part-3.parquet"))
    assert "part-3.parquet" in _one_line(e) and "'split'" in str(e.value) and "3" in str(e.value)


def test_a_column_missing_from_one_file_names_the_file_and_the_column():
    df = _frame(50).drop(columns=["city"])
    cfg = _cfg({"type": "fixed"})
    with pytest.raises(DataError) as e:
        batch_partial(df, cfg, split_rule(cfg), FileOrigin("part-1.parquet"))
    assert "part-1.parquet" in _one_line(e) and "'city'" in str(e.value)


def test_text_in_a_number_column_names_the_file_and_the_column():
    df = _frame(50)
    df["const"] = df["const"].astype(object)
    df.loc[3, "const"] = "n/a"
    cfg = _cfg({"type": "fixed"})
    with pytest.raises(DataError) as e:
        batch_partial(df, cfg, split_rule(cfg), FileOrigin("part-2.csv"))
    assert "part-2.csv" in _one_line(e) and "'const'" in str(e.value) and "1 row of this file" in str(e.value)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"preprocessing": {"split": {"type": "stratify", "column": "kind"}}}, "preprocessing.split.type"),
        ({"preprocessing": {"sample_ratio": 0.5}}, "preprocessing.sample_ratio"),
    ],
)
def test_what_needs_the_whole_dataset_is_refused_in_one_line(change, key):
    cfg = SweepConfig.model_validate(_sweep_dict(INPUTS, OUTPUTS, **change))
    with pytest.raises(DataError) as e:
        check_streamable(cfg)
        split_rule(cfg)
    assert key in _one_line(e)


@pytest.mark.parametrize(
    ("feature", "key"),
    [
        ({"name": "s", "type": "set"}, "input_features[s]"),
        (
            {"name": "t", "type": "text", "preprocessing": {"missing_value_strategy": "fill_with_mode"}},
            "input_features[t].preprocessing.missing_value_strategy",
        ),
        (
            {"name": "b", "type": "number", "preprocessing": {"missing_value_strategy": "bfill"}},
            "input_features[b].preprocessing.missing_value_strategy",
        ),
        (
            {"name": "o", "type": "number", "preprocessing": {"outlier_strategy": "drop_row"}},
            "input_features[o].preprocessing.outlier_strategy",
        ),
    ],
)
def test_features_a_stream_cannot_prepare_are_refused_naming_the_key(feature, key):
    cfg = SweepConfig.model_validate(_sweep_dict([*INPUTS, feature], OUTPUTS))
    with pytest.raises(DataError) as e:
        check_streamable(cfg)
    assert key in _one_line(e) and "dataset.streaming: false" in str(e.value)


# ---------------------------------------------------------------------------- files
def _parquet_folder(tmp_path, frames: dict[str, pd.DataFrame]):
    folder = tmp_path / "rows"
    folder.mkdir()
    for name, df in frames.items():
        df.to_parquet(folder / name, index=False)
    return folder


def test_a_folder_lists_its_files_sorted_with_their_columns_and_size(tmp_path):
    from ludwig_hpo.data.streaming.sources import stream_files

    df = _frame(30)
    folder = _parquet_folder(tmp_path, {"b.parquet": df, "a.parquet": df})
    (folder / "_SUCCESS").write_text("")  # a writer's marker file is not data
    files = stream_files("rows", tmp_path, ["city", "kind"])
    assert [p.rsplit("/", 1)[1] for p in files.paths] == ["a.parquet", "b.parquet"]
    assert files.format == "parquet" and files.columns == tuple(df.columns) and files.bytes > 0
    assert stream_files(str(folder / "*.parquet"), None, ["city"]).paths == files.paths


def test_an_unreadable_file_in_the_folder_is_refused_naming_it(tmp_path):
    from ludwig_hpo.data.streaming.sources import stream_files

    folder = _parquet_folder(tmp_path, {"a.parquet": _frame(30)})
    (folder / "b.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError) as e:
        stream_files(str(folder), None, ["city"])
    assert "b.parquet" in _one_line(e) and "cannot read" in str(e.value)


def test_a_schema_that_differs_between_files_names_the_file_and_the_column(tmp_path):
    from ludwig_hpo.data.streaming.sources import stream_files

    df = _frame(30)
    other = df.assign(mean=df["mean"].astype(str))
    folder = _parquet_folder(tmp_path, {"a.parquet": df, "b.parquet": other})
    with pytest.raises(DataError) as e:
        stream_files(str(folder), None, ["city"])
    assert "b.parquet" in _one_line(e) and "'mean'" in str(e.value)


def test_a_column_missing_from_one_file_is_refused_before_any_row_is_read(tmp_path):
    from ludwig_hpo.data.streaming.sources import stream_files

    df = _frame(30)
    folder = _parquet_folder(tmp_path, {"a.parquet": df, "b.parquet": df.drop(columns=["town"])})
    with pytest.raises(DataError) as e:
        stream_files(str(folder), None, ["city", "town"])
    assert "b.parquet" in _one_line(e) and "'town'" in str(e.value)


def test_csv_files_compare_their_headers_and_mixed_formats_are_refused(tmp_path):
    from ludwig_hpo.data.streaming.sources import stream_files

    folder = tmp_path / "rows"
    folder.mkdir()
    _frame(20).to_csv(folder / "a.csv", index=False)
    _frame(20).drop(columns=["city"]).to_csv(folder / "b.csv", index=False)
    with pytest.raises(DataError) as e:
        stream_files(str(folder), None, ["kind"])
    assert "b.csv" in _one_line(e) and "'city'" in str(e.value)
    (folder / "b.csv").unlink()
    _frame(20).to_parquet(folder / "c.parquet", index=False)
    with pytest.raises(DataError) as e:
        stream_files(str(folder), None, ["kind"])
    assert "c.parquet" in _one_line(e) and "mixes" in str(e.value)


def test_no_file_found_is_one_line(tmp_path):
    from ludwig_hpo.data.streaming.sources import stream_files

    with pytest.raises(DataError) as e:
        stream_files(str(tmp_path / "nothing" / "*.parquet"), None, ["kind"])
    assert "dataset.source" in _one_line(e)


@pytest.mark.parametrize(
    ("streaming", "source", "want"),
    [("auto", "one.parquet", False), ("auto", "rows", True), ("auto", "rows/*.parquet", True)]
    + [("auto", "s3://bucket/rows", True), (True, "one.parquet", True), (False, "rows", False)]
    + [("auto", "sklearn:wine", False)],
)
def test_streaming_auto_streams_many_files_and_uris_and_loads_one_small_file(tmp_path, streaming, source, want):
    from ludwig_hpo.data.streaming.mode import streaming_wanted

    _frame(10).to_parquet(tmp_path / "one.parquet")
    (tmp_path / "rows").mkdir()
    cfg = SweepConfig.model_validate(_sweep_dict(INPUTS, OUTPUTS, dataset={"source": source, "streaming": streaming}))
    assert streaming_wanted(cfg, tmp_path) is want


def test_a_bundled_dataset_asked_to_stream_is_refused():
    from ludwig_hpo.data.streaming.mode import streaming_wanted

    cfg = SweepConfig.model_validate(
        _sweep_dict(INPUTS, OUTPUTS, dataset={"source": "sklearn:wine", "streaming": True})
    )
    with pytest.raises(DataError) as e:
        streaming_wanted(cfg, None)
    assert "dataset.streaming" in _one_line(e)


def test_a_dataset_that_streams_is_not_loaded_in_memory_silently(tmp_path):
    from ludwig_hpo.data import load_dataframe

    _frame(50).to_parquet(tmp_path / "one.parquet")
    cfg = _cfg({"type": "fixed"}, dataset={"source": "one.parquet", "streaming": True})
    with pytest.raises(DataError) as e:
        prepare(load_dataframe("one.parquet", tmp_path), cfg)
    assert "dataset.streaming: false" in _one_line(e) and "one.parquet" in str(e.value)
    for mode in (False, "auto"):
        kept = _cfg({"type": "fixed"}, dataset={"source": "one.parquet", "streaming": mode})
        assert prepare(load_dataframe("one.parquet", tmp_path), kept).num_rows > 0


def test_a_folder_read_as_one_file_says_that_it_streams(tmp_path):
    from ludwig_hpo.data import load_dataframe

    (tmp_path / "rows").mkdir()
    with pytest.raises(DataError) as e:
        load_dataframe("rows", tmp_path)
    assert "stream" in _one_line(e)


def test_an_integer_column_missing_a_value_in_one_file_reads_as_float_in_every_batch(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ludwig_hpo.data.streaming.sources import stream_files

    folder = tmp_path / "rows"
    folder.mkdir()
    # written without pandas' metadata, as other writers write them
    pq.write_table(pa.table({"code": pa.array([1, None, 2], pa.int64()), "n": [1, 2, 3]}), folder / "a.parquet")
    pq.write_table(pa.table({"code": pa.array([3, 1, 2], pa.int64()), "n": [4, 5, 6]}), folder / "b.parquet")
    files = stream_files(str(folder), None, ["code", "n"])
    assert files.float_columns == ("code",)
    whole = pd.concat([pd.read_parquet(p) for p in files.paths], ignore_index=True)
    block = files.as_read_whole(pq.read_table(folder / "b.parquet").to_pandas())
    assert block["code"].dtype == whole["code"].dtype == np.float64 and block["n"].dtype == np.int64


def test_a_numeric_split_column_reads_as_its_cells_do_one_by_one():
    from ludwig_hpo.data.split import _split_code
    from ludwig_hpo.data.streaming.splits import _fixed_codes

    col = pd.Series([0, 1.0, 2, np.nan, 3, -1, 0.5, 2.0])
    np.testing.assert_array_equal(_fixed_codes(col), [_split_code(v) if v == v else -1 for v in col])
    names = pd.Series(["train", " Validation", "test", "2", "x", None])
    np.testing.assert_array_equal(_fixed_codes(names), [0, 1, 2, 2, -1, -1])


@pytest.mark.parametrize("order", ["shuffled", "sorted", "reversed"])
def test_counts_past_the_exact_limit_stay_bounded_with_exact_moments_and_quartiles_near_their_rank(monkeypatch, order):
    import ludwig_hpo.data.streaming.number_counts as nc

    monkeypatch.setattr(nc, "EXACT_LIMIT", 512)
    monkeypatch.setattr(nc, "_FOLD_ABOVE", 512)
    rng = np.random.default_rng(3)
    x = rng.lognormal(size=60_000)  # continuous: every value distinct
    x = {"shuffled": x, "sorted": np.sort(x), "reversed": np.sort(x)[::-1]}[order]  # ids, timestamps
    t = NumberCounts()
    for start in range(0, len(x), 3_000):  # batches, as the ordered pass merges them
        part = x[start : start + 3_000]
        t.merge(NumberCounts.of(part, np.arange(len(part))), start)
    got, want = t.statistics(), statistics(x)
    assert t.compacted and len(t.values) <= 512 and int(t.counts.sum()) == len(x)
    assert (np.diff(t.values) > 0).all()
    for k in ("min", "max"):
        assert got[k] == want[k]
    for k in ("mean", "std"):
        assert got[k] == pytest.approx(want[k], rel=1e-12)
    for k, q in {"q1": 0.25, "q2": 0.5, "q3": 0.75}.items():
        rank = np.searchsorted(np.sort(x), got[k]) / len(x)
        assert abs(rank - q) <= 8 / 512, (k, rank)
    filled = t.with_value(2.0, 100, 5)
    assert filled.statistics()["mean"] == pytest.approx(statistics(np.append(x, [2.0] * 100))["mean"], rel=1e-12)


def test_a_frequent_value_stays_the_mode_past_the_exact_limit(monkeypatch):
    import ludwig_hpo.data.streaming.number_counts as nc

    monkeypatch.setattr(nc, "EXACT_LIMIT", 512)
    monkeypatch.setattr(nc, "_FOLD_ABOVE", 512)
    ids = np.arange(40_000, dtype=np.float64)
    x = np.sort(np.concatenate([ids, np.full(2_000, 12_345.5)]))  # sorted ids and one value in 5% of rows
    t = NumberCounts()
    for start in range(0, len(x), 2_500):
        part = x[start : start + 2_500]
        t.merge(NumberCounts.of(part, np.arange(len(part))), start)
    assert t.compacted and t.mode() == 12_345.5


def test_counts_below_the_exact_limit_are_not_compacted_and_stay_exact():
    x = np.round(np.random.default_rng(4).normal(size=5_000), 2)
    t = NumberCounts.of(x[:2_000], np.arange(2_000))
    t.merge(NumberCounts.of(x[2_000:], np.arange(3_000)), 2_000)
    assert not t.compacted
    assert {k: v for k, v in t.statistics().items() if k not in ("mean", "std")} == {
        k: v for k, v in statistics(x).items() if k not in ("mean", "std")
    }
