"""Ludwig's number normalizations and outlier strategies, category vocabularies
(``most_common``, ``lowercase``) and binary labels (``fallback_true_label``), shown on the
prepared arrays; statistics come from the training split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.data import prepare
from ludwig_hpo.errors import DataError

N = 60
BINARY_Y = [{"name": "y", "type": "binary"}]


def _frame(**cols) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"x": rng.uniform(1.0, 9.0, size=N), "y": [0, 1] * (N // 2), **cols})


def _prep(df: pd.DataFrame, make_config, inputs: list[dict], outputs=BINARY_Y):
    return prepare(df, make_config(inputs, outputs))


def _x(**prep) -> list[dict]:
    return [{"name": "x", "type": "number", "preprocessing": prep}]


@pytest.mark.parametrize(
    ("norm", "expect"),
    [
        ("zscore", lambda x, t: (x - t.mean()) / t.std(ddof=1)),
        ("minmax", lambda x, t: (x - t.min()) / (t.max() - t.min())),
        ("iq", lambda x, t: (x - np.percentile(t, 50)) / (np.percentile(t, 75) - np.percentile(t, 25))),
        ("log1p", lambda x, t: np.log1p(x)),
        (None, lambda x, t: x),
        ("none", lambda x, t: x),
    ],
)
def test_normalizations_use_the_training_split(make_config, norm, expect):
    df = _frame()
    data = _prep(df, make_config, _x(normalization=norm))
    x, train = df["x"].to_numpy(), data.splits["train"]
    np.testing.assert_allclose(data.inputs["x"][:, 0], expect(x, x[train]), rtol=1e-5, atol=1e-6)


def test_zscore_is_ludwigs_default(make_config):
    df = _frame()
    data = _prep(df, make_config, [{"name": "x", "type": "number"}])
    assert data.inputs["x"][data.splits["train"]].std(ddof=1) == pytest.approx(1.0, abs=1e-4)


def test_log1p_of_a_non_positive_value_is_one_line(make_config):
    df = _frame()
    df.loc[4, "x"] = 0.0
    with pytest.raises(DataError) as info:
        _prep(df, make_config, _x(normalization="log1p"))
    assert info.value.key == "input_features[x].preprocessing.normalization"
    assert "needs positive values, but 1 are <= 0 (data row 5)" in info.value.one_line()


def test_a_number_target_is_normalized_only_when_asked(make_config):
    df = _frame(t=np.linspace(10.0, 20.0, N))
    plain = _prep(df, make_config, _x(), outputs=[{"name": "t", "type": "number"}])
    np.testing.assert_allclose(plain.targets["t"], df["t"], rtol=1e-6)
    scaled = _prep(
        df, make_config, _x(), outputs=[{"name": "t", "type": "number", "preprocessing": {"normalization": "zscore"}}]
    )
    train = scaled.splits["train"]
    assert scaled.targets["t"][train].mean() == pytest.approx(0.0, abs=1e-5)
    assert scaled.meta["t"].stats["mean"] == pytest.approx(df["t"].to_numpy()[train].mean())


def _with_outlier() -> tuple[pd.DataFrame, int]:
    df = pd.DataFrame({"x": np.tile([1.0, 2.0, 3.0], N // 3), "y": [0, 1] * (N // 2)})
    df.loc[7, "x"] = 1000.0
    return df, 7


def test_outliers_are_kept_by_default(make_config):
    df, i = _with_outlier()
    data = _prep(df, make_config, _x(normalization=None))
    assert data.inputs["x"][i, 0] == 1000.0


@pytest.mark.parametrize(
    ("strategy", "prep", "value"),
    [("fill_with_const", {"fill_value": -1.0}, -1.0), ("fill_with_mode", {}, None), ("ffill", {}, 1.0)],
)
def test_outlier_strategies_replace_values_beyond_the_threshold(make_config, strategy, prep, value):
    df, i = _with_outlier()
    data = _prep(df, make_config, _x(normalization=None, outlier_strategy=strategy, outlier_threshold=3.0, **prep))
    x = data.inputs["x"][:, 0]
    if value is None:  # the training mode: 1, 2 and 3 are equally frequent, the first seen wins
        value = float(pd.Series(df["x"].to_numpy()[data.splits["train"]]).value_counts().index[0])
    assert x[i] == value
    assert np.all(x[np.arange(N) != i] == df["x"].to_numpy()[np.arange(N) != i])
    (note,) = data.filled
    assert note.what == "outlier" and note.count == 1 and note.text().startswith("1 outliers in x filled with")


def test_outlier_fill_with_mean_uses_the_training_mean_of_the_raw_values(make_config):
    df, i = _with_outlier()
    data = _prep(df, make_config, _x(normalization=None, outlier_strategy="fill_with_mean"))
    train = data.splits["train"]
    assert data.inputs["x"][i, 0] == pytest.approx(df["x"].to_numpy()[train].mean())


def test_outlier_drop_row_drops_the_row_everywhere(make_config):
    df, i = _with_outlier()
    df["rid"] = np.arange(N, dtype=float)
    data = _prep(
        df,
        make_config,
        [
            *_x(normalization=None, outlier_strategy="drop_row"),
            {"name": "rid", "type": "number", "preprocessing": {"normalization": None}},
        ],
    )
    assert data.num_rows == N - 1 and i not in data.inputs["rid"][:, 0].astype(int).tolist()
    assert sorted(np.concatenate(list(data.splits.values())).tolist()) == list(range(N - 1))
    assert data.filled[0].text() == "1 rows dropped: an outlier in x (drop_row)"


def test_a_high_threshold_keeps_the_outlier(make_config):
    df, i = _with_outlier()
    data = _prep(df, make_config, _x(normalization=None, outlier_strategy="fill_with_mean", outlier_threshold=1e5))
    assert data.inputs["x"][i, 0] == 1000.0 and data.filled == ()


def test_most_common_caps_the_vocabulary(make_config):
    c = (["a"] * 5 + ["b"] * 4 + ["c"] * 3) * 5
    df = _frame(c=c)
    data = _prep(df, make_config, [{"name": "c", "type": "category", "preprocessing": {"most_common": 2}}])
    vocab = data.meta["c"].vocab
    assert vocab == ("<UNK>", "a", "b")
    assert np.all(data.inputs["c"][df["c"].to_numpy() == "c"] == 0), "rarer values read as unknown"


def test_lowercase_folds_case_before_the_vocabulary(make_config):
    df = _frame(c=["Red", "red", "BLUE", "blue"] * (N // 4))
    data = _prep(df, make_config, [{"name": "c", "type": "category", "preprocessing": {"lowercase": True}}])
    assert set(data.meta["c"].vocab) == {"<UNK>", "red", "blue"}
    default = _prep(df, make_config, [{"name": "c", "type": "category"}])
    assert len(default.meta["c"].vocab) == 5, "Ludwig's default keeps case"


@pytest.mark.parametrize(
    ("prep", "expect"),
    [({}, [1.0, 0.0]), ({"fallback_true_label": "dog"}, [0.0, 1.0])],
)
def test_fallback_true_label(make_config, prep, expect):
    df = _frame(pet=["cat", "dog"] * (N // 2))
    data = _prep(df, make_config, [{"name": "pet", "type": "binary", "preprocessing": prep}])
    assert data.inputs["pet"][:2, 0].tolist() == expect


def test_numeric_binary_columns_are_true_where_non_zero(make_config):
    df = _frame(b=[0, 2] * (N // 2))
    data = _prep(df, make_config, [{"name": "b", "type": "binary"}])
    assert data.inputs["b"][:2, 0].tolist() == [0.0, 1.0]


def test_defaults_preprocessing_applies_to_every_feature_of_the_type(make_config):
    c = (["a"] * 5 + ["b"] * 4 + ["c"] * 3) * 5
    df = _frame(c=c, d=c)
    cfg = make_config(
        [
            {"name": "c", "type": "category"},
            {"name": "d", "type": "category", "preprocessing": {"most_common": 1}},
            {"name": "x", "type": "number"},
        ],
        BINARY_Y,
        defaults={
            "category": {"preprocessing": {"most_common": 2}},
            "number": {"preprocessing": {"normalization": None}},
        },
    )
    data = prepare(df, cfg)
    assert data.meta["c"].vocab == ("<UNK>", "a", "b")
    assert data.meta["d"].vocab == ("<UNK>", "a"), "the feature's own value wins"
    np.testing.assert_allclose(data.inputs["x"][:, 0], df["x"], rtol=1e-6)


def test_ludwigs_image_reading_keys_and_standardize_image_are_accepted(make_config):
    image = {"name": "img", "type": "image"}
    make_config([{**image, "preprocessing": {"in_memory": False, "num_processes": 4}}], BINARY_Y)
    cfg = make_config([{**image, "preprocessing": {"standardize_image": "imagenet1k"}}], BINARY_Y)
    assert cfg.input_features[0].preprocessing.standardize_image == "imagenet1k"
    none = make_config([{**image, "preprocessing": {"standardize_image": "None"}}], BINARY_Y)  # Ludwig's docs
    assert none.input_features[0].preprocessing.standardize_image is None
    with pytest.raises(Exception, match="num_channels 4 is not supported"):
        make_config([{**image, "preprocessing": {"num_channels": 4}}], BINARY_Y)


def test_a_binary_target_reads_its_fallback_true_label(make_config):
    df = _frame(income=["<=50K", ">50K"] * (N // 2))
    out = [{"name": "income", "type": "binary", "preprocessing": {"fallback_true_label": ">50K"}}]
    data = _prep(df, make_config, _x(), outputs=out)
    assert data.targets["income"][:4].tolist() == [0.0, 1.0, 0.0, 1.0]
    default = _prep(df, make_config, _x(), outputs=[{"name": "income", "type": "binary"}])
    assert default.targets["income"][:2].tolist() == [1.0, 0.0], "Ludwig: the sorted first label ('<=50K')"


def test_a_category_target_with_more_classes_than_most_common_is_not_supported_yet(make_config):
    df = _frame(t=["a", "b", "c"] * (N // 3))
    with pytest.raises(DataError) as info:
        _prep(df, make_config, _x(), outputs=[{"name": "t", "type": "category", "preprocessing": {"most_common": 2}}])
    assert info.value.key == "output_features[t].preprocessing.most_common"
    assert "not supported yet" in info.value.message
