"""Data: bundled and file sources, seeded splits and folds, preprocessing fitted on the
training split only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.data import kfold_indices, load_dataframe, prepare, split_indices
from ludwig_hpo.data.preprocess import UNKNOWN
from ludwig_hpo.errors import DataError

NUMBERS = ["mean_radius", "mean_texture", "worst_area"]


# ---------------------------------------------------------------------------- sources
@pytest.mark.parametrize(
    ("name", "shape", "columns", "target", "n_classes"),
    [
        ("digits", (1797, 2), ["image", "label"], "label", 10),
        ("breast_cancer", (569, 31), ["mean_radius", "mean_concave_points", "worst_fractal_dimension"], "malignant", 2),
        ("wine", (178, 14), ["alcohol", "od280_od315_of_diluted_wines", "proline"], "cultivar", 3),
    ],
)
def test_bundled(tmp_path, name, shape, columns, target, n_classes):
    df = load_dataframe(f"sklearn:{name}", tmp_path)
    assert df.shape == shape
    assert set(columns) <= set(df.columns)
    assert df.columns[-1] == target
    assert df[target].nunique() == n_classes
    assert not df.isna().any().any()


def test_digits_cells_are_8x8_images(tmp_path):
    df = load_dataframe("sklearn:digits", tmp_path)
    assert df["image"].iloc[0].shape == (8, 8)
    assert df["image"].iloc[0].dtype == np.float32
    assert max(float(im.max()) for im in df["image"]) == 16.0


def test_breast_cancer_target_is_malignant(tmp_path):
    df = load_dataframe("sklearn:breast_cancer", tmp_path)
    assert int(df["malignant"].sum()) == 212  # 212 malignant, 357 benign


@pytest.fixture
def small_frame():
    return pd.DataFrame({"x": [1.5, 2.0, -3.25], "n": [1, 2, 3], "s": ["a", "b", "c"]})


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet", ".pq"])
def test_file_round_trip(tmp_path, small_frame, suffix):
    path = tmp_path / f"data{suffix}"
    if suffix in (".csv", ".tsv"):
        small_frame.to_csv(path, index=False, sep="\t" if suffix == ".tsv" else ",")
    else:
        small_frame.to_parquet(path, index=False)
    pd.testing.assert_frame_equal(load_dataframe(str(path), tmp_path / "elsewhere"), small_frame)


def test_relative_path_resolves_against_base_dir(tmp_path, small_frame):
    (tmp_path / "data").mkdir()
    small_frame.to_csv(tmp_path / "data" / "rows.csv", index=False)
    pd.testing.assert_frame_equal(load_dataframe("data/rows.csv", tmp_path), small_frame)


def test_parquet_list_column_round_trip(tmp_path):
    df = pd.DataFrame({"image": [np.zeros((2, 2), np.float32).tolist(), np.ones((2, 2), np.float32).tolist()]})
    df.to_parquet(tmp_path / "im.parquet")
    back = load_dataframe("im.parquet", tmp_path)
    assert np.asarray(back["image"].iloc[1].tolist(), dtype=np.float32).sum() == 4


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.csv", None, "dataset file not found"),
        ("data.xlsx", "x\n1\n", "unknown dataset format '.xlsx'"),
        ("noext", "x\n1\n", "unknown dataset format ''"),
        ("empty.csv", "", "cannot read the dataset"),
        ("header_only.csv", "x,y\n", "the dataset has no rows"),
        ("broken.parquet", "not parquet", "cannot read the dataset"),
    ],
)
def test_file_errors(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError) as info:
        load_dataframe(name, tmp_path)
    err = info.value
    assert message in err.message
    assert err.key == "dataset.source"
    assert err.source == str(path)
    assert "\n" not in err.one_line()


def test_unknown_bundled_name(tmp_path):
    with pytest.raises(DataError) as info:
        load_dataframe("sklearn:iris", tmp_path)
    assert "unknown bundled dataset 'iris'" in info.value.message
    assert "sklearn:digits" in info.value.fix


# ---------------------------------------------------------------------------- splits
FRACTIONS = (0.7, 0.15, 0.15)


def _assert_partition(splits, n):
    parts = [splits[k] for k in ("train", "validation", "test")]
    allrows = np.concatenate(parts)
    assert len(allrows) == n and set(allrows) == set(range(n)), "disjoint and covering"
    for p in parts:
        assert p.dtype.kind == "i" and np.all(np.diff(p) > 0), "sorted indices"


def test_split_reproducible_disjoint_covering():
    a = split_indices(200, FRACTIONS, seed=1)
    b = split_indices(200, FRACTIONS, seed=1)
    c = split_indices(200, FRACTIONS, seed=2)
    _assert_partition(a, 200)
    _assert_partition(c, 200)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["test"], c["test"])
    assert [len(a[k]) for k in ("train", "validation", "test")] == [140, 30, 30]


def test_split_stratified_proportions():
    labels = np.array([0] * 160 + [1] * 40)
    s = split_indices(200, FRACTIONS, seed=3, labels=labels)
    _assert_partition(s, 200)
    for part in s.values():
        assert labels[part].mean() == pytest.approx(0.2, abs=0.02)


def test_split_falls_back_when_a_class_is_too_rare():
    labels = np.array([0] * 99 + [1])  # one sample of class 1: cannot stratify
    _assert_partition(split_indices(100, FRACTIONS, seed=0, labels=labels), 100)


def test_split_too_few_rows():
    with pytest.raises(DataError) as info:
        split_indices(3, FRACTIONS, seed=0)
    assert info.value.key == "dataset.split"


@pytest.mark.parametrize("stratified", [False, True])
def test_kfold_held_out_folds_partition_rows(stratified):
    rows = np.arange(0, 120, 2)  # not contiguous: indices into a larger frame
    labels = np.arange(120) % 3 if stratified else None
    folds = kfold_indices(rows, 4, seed=0, labels=labels)
    assert len(folds) == 4
    held = np.concatenate([h for _, h in folds])
    assert sorted(held) == sorted(rows), "held-out folds are disjoint and cover every row"
    for train, held_out in folds:
        assert not set(train) & set(held_out)
        assert sorted(np.concatenate([train, held_out])) == sorted(rows)
        if stratified:
            assert np.bincount(labels[held_out]).tolist() == [5, 5, 5]
    again = kfold_indices(rows, 4, seed=0, labels=labels)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again, strict=True))


def test_kfold_too_few_rows():
    with pytest.raises(DataError) as info:
        kfold_indices(np.arange(2), 3, seed=0)
    assert info.value.key == "kfold.k"


# ---------------------------------------------------------------------------- prepare
@pytest.fixture(scope="module")
def breast_cancer(tmp_path_factory):
    return load_dataframe("sklearn:breast_cancer", tmp_path_factory.mktemp("bc"))


def test_prepare_zscore_fitted_on_train_only(breast_cancer, make_config):
    cfg = make_config(
        [{"name": n, "type": "number"} for n in NUMBERS],
        [{"name": "malignant", "type": "binary"}],
        kfold={"k": 3},
        dataset={"source": "sklearn:breast_cancer", "split": {"train": 0.7, "validation": 0.15, "test": 0.15}},
    )
    data = prepare(breast_cancer, cfg)
    train, val = data.splits["train"], data.splits["validation"]
    _assert_partition(data.splits, len(breast_cancer))
    for name in NUMBERS:
        x = data.inputs[name]
        assert x.shape == (569, 1) and x.dtype == np.float32
        assert x[train].mean() == pytest.approx(0.0, abs=1e-5)
        assert x[train].std(ddof=1) == pytest.approx(1.0, abs=1e-4), "pandas' (and Ludwig's) standard deviation"
        assert abs(x[val].mean()) > 1e-4, "validation rows are scaled with the training statistics"
        stats = data.meta[name].stats
        assert stats["mean"] == pytest.approx(breast_cancer[name].iloc[train].mean())
        assert stats["max"] == pytest.approx(breast_cancer[name].iloc[train].max())
    y = data.targets["malignant"]
    assert y.dtype == np.float32 and set(np.unique(y)) == {0.0, 1.0}
    assert y[train].mean() == pytest.approx(y[val].mean(), abs=0.03), "stratified on the target"
    assert len(data.folds) == 3
    assert sorted(np.concatenate([h for _, h in data.folds])) == sorted(np.concatenate([train, val]))


def test_prepare_minmax_and_none(breast_cancer, make_config):
    cfg = make_config(
        [
            {"name": "mean_radius", "type": "number", "preprocessing": {"normalization": "minmax"}},
            {"name": "mean_area", "type": "number", "preprocessing": {"normalization": "none"}},
        ],
        [{"name": "malignant", "type": "binary"}],
    )
    data = prepare(breast_cancer, cfg)
    train = data.splits["train"]
    assert data.inputs["mean_radius"][train].min() == pytest.approx(0.0, abs=1e-6)
    assert data.inputs["mean_radius"][train].max() == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(data.inputs["mean_area"][:, 0], breast_cancer["mean_area"], rtol=1e-6)


def test_prepare_missing_numbers_filled_with_ludwigs_default_zero(make_config):
    df = pd.DataFrame({"x": [1.0, np.nan] * 20, "y": [0, 1] * 20})
    cfg = make_config(
        [{"name": "x", "type": "number", "preprocessing": {"normalization": None}}], [{"name": "y", "type": "binary"}]
    )
    assert prepare(df, cfg).inputs["x"][:, 0].tolist() == [1.0, 0.0] * 20


@pytest.fixture
def mixed_frame():
    n = 60
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "row_id": [f"r{i}" for i in range(n)],  # unique: every non-train value is unseen
            "color": rng.choice(["red", "green", None], size=n),
            "smoker": rng.choice(["yes", "No", " YES ", "n"], size=n),
            "target": ["a", "b", "c"] * (n // 3),
            "answer": ["yes", "no"] * (n // 2),
            "amount": rng.normal(size=n),
        }
    )


def test_prepare_category_vocab_unseen_maps_to_zero(mixed_frame, make_config):
    cfg = make_config(
        [{"name": "row_id", "type": "category"}, {"name": "color", "type": "category"}],
        [{"name": "target", "type": "category"}],
    )
    data = prepare(mixed_frame, cfg)
    train = data.splits["train"]
    others = np.concatenate([data.splits["validation"], data.splits["test"]])
    ids = data.inputs["row_id"]
    vocab = data.meta["row_id"].vocab
    assert ids.dtype == np.int64 and ids.shape == (60,)
    assert vocab[0] == UNKNOWN and len(vocab) == len(train) + 1
    assert np.all(ids[train] > 0) and np.all(ids[others] == 0)
    assert [vocab[i] for i in ids[train]] == mixed_frame["row_id"].iloc[train].tolist()
    color_vocab = data.meta["color"].vocab
    missing = mixed_frame["color"].isna().to_numpy()
    assert np.all(data.inputs["color"][missing] == 0), "missing values are the unknown category"
    assert set(color_vocab) == {UNKNOWN, "red", "green"}
    assert data.meta["target"].vocab == ("a", "b", "c")
    assert data.targets["target"].tolist() == [0, 1, 2] * 20


def test_prepare_binary_from_strings(mixed_frame, make_config):
    cfg = make_config(
        [{"name": "smoker", "type": "binary"}, {"name": "amount", "type": "number"}],
        [{"name": "answer", "type": "binary"}],
    )
    data = prepare(mixed_frame, cfg)
    expect = mixed_frame["smoker"].str.strip().str.lower().isin(["yes"]).to_numpy(np.float32)
    np.testing.assert_array_equal(data.inputs["smoker"][:, 0], expect)
    assert data.inputs["smoker"].shape == (60, 1)
    assert data.targets["answer"].tolist() == [1.0, 0.0] * 30


def test_prepare_binary_two_arbitrary_labels(make_config):
    df = pd.DataFrame({"x": range(40), "y": ["cat", "dog"] * 20})
    data = prepare(df, make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "binary"}]))
    assert data.targets["y"].tolist() == [1.0, 0.0] * 20, "Ludwig's fallback true label: the sorted first"


def test_prepare_number_target_and_image_input(make_config):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {"img": [rng.integers(0, 255, (6, 5)).astype(np.float32) for _ in range(30)], "price": rng.normal(size=30)}
    )
    data = prepare(df, make_config([{"name": "img", "type": "image"}], [{"name": "price", "type": "number"}]))
    assert data.inputs["img"].shape == (30, 1, 6, 5) and data.inputs["img"].dtype == np.uint8
    assert data.meta["img"].shape == (1, 6, 5)
    assert data.meta["img"].stats["scale"] == data.inputs["img"][data.splits["train"]].max()
    assert data.targets["price"].dtype == np.float32


def test_prepare_missing_column_names_the_feature(breast_cancer, make_config):
    cfg = make_config(
        [{"name": "radius", "column": "MEAN_RADIUS", "type": "number"}], [{"name": "malignant", "type": "binary"}]
    )
    with pytest.raises(DataError) as info:
        prepare(breast_cancer, cfg)
    err = info.value
    assert err.key == "input_features[radius]"
    assert "column 'MEAN_RADIUS' is not in the dataset" in err.message
    assert err.fix == "did you mean 'mean_radius'?"


def test_prepare_missing_target_column(breast_cancer, make_config):
    cfg = make_config([{"name": "mean_radius", "type": "number"}], [{"name": "label", "type": "category"}])
    with pytest.raises(DataError) as info:
        prepare(breast_cancer, cfg)
    assert info.value.key == "output_features[label]"


@pytest.mark.parametrize("out_type", ["binary", "category"])
def test_prepare_single_class_target(make_config, out_type):
    df = pd.DataFrame({"x": range(30), "y": ["same"] * 30})
    cfg = make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": out_type}])
    with pytest.raises(DataError) as info:
        prepare(df, cfg)
    assert "single class" in info.value.message
    assert info.value.key == "output_features[y]"


@pytest.mark.parametrize(
    ("frame", "inputs", "message"),
    [
        ({"x": ["1", "two"] * 10, "y": [0, 1] * 10}, [{"name": "x", "type": "number"}], "values are not numbers"),
        ({"x": [1.0, np.inf] * 10, "y": [0, 1] * 10}, [{"name": "x", "type": "number"}], "infinite values"),
        (
            {"x": ["a", "b", "c", "d"] * 5, "y": [0, 1] * 10},
            [{"name": "x", "type": "binary"}],
            "needs 2 distinct values",
        ),
    ],
)
def test_prepare_bad_columns(make_config, frame, inputs, message):
    cfg = make_config(inputs, [{"name": "y", "type": "binary"}])
    with pytest.raises(DataError) as info:
        prepare(pd.DataFrame(frame), cfg)
    assert message in info.value.message
