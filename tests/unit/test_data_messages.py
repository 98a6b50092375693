"""Every data error names the dataset file, the column and the first rows as a person finds
them in the file (a CSV's line numbers, else 1-based data rows); missing values that are filled
in are said (``PreparedData.filled``, ``hpo validate``'s summary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FilledValues, _refuse_missing
from ludwig_hpo.data.split import fixed_split_indices
from ludwig_hpo.errors import DataError

NUMBER_X = [{"name": "x", "type": "number", "preprocessing": {"normalization": "none"}}]
BINARY_Y = [{"name": "y", "type": "binary"}]


def _frame(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"x": np.arange(n, dtype=float), "y": [0, 1] * (n // 2)})


def _error(df_path: Path, make_config, inputs=NUMBER_X, outputs=BINARY_Y) -> DataError:
    cfg = make_config(inputs, outputs)
    with pytest.raises(DataError) as info:
        prepare(load_dataframe(str(df_path), df_path.parent), cfg)
    return info.value


def test_a_text_cell_in_a_number_column_names_the_file_the_column_and_its_lines(tmp_path, make_config):
    df = _frame().astype({"x": object})
    df.loc[[2, 5], "x"] = "abc"
    df.to_csv(tmp_path / "data.csv", index=False)
    err = _error(tmp_path / "data.csv", make_config)
    assert err.one_line() == (
        f"{tmp_path}/data.csv: input_features[x]: column 'x': 2 values are not numbers (e.g. 'abc'; lines 4, 7); "
        "fix: clean the column or use type: category"
    )


def test_line_numbers_count_quoted_line_breaks_and_skip_blank_lines(tmp_path, make_config):
    text = 'x,y,note\n1,0,"two\nlines"\n\n2,1,plain\nabc,0,bad\n' + "".join(f"{i},{i % 2},n\n" for i in range(3, 40))
    (tmp_path / "data.csv").write_text(text)
    err = _error(tmp_path / "data.csv", make_config)
    assert "(e.g. 'abc'; line 6)" in err.message  # data row 3 starts on the file's line 6


def test_a_parquet_file_names_1_based_data_rows(tmp_path, make_config):
    df = _frame().assign(y=["no", "yes"] * 20)
    df.loc[[9, 10, 11, 30], "y"] = "maybe"
    df.to_parquet(tmp_path / "data.parquet")
    err = _error(tmp_path / "data.parquet", make_config)
    assert err.source == str(tmp_path / "data.parquet") and err.key == "output_features[y]"
    assert err.message.endswith("(data row 10 holds 'maybe')")


def test_a_tsv_file_names_lines(tmp_path, make_config):
    df = _frame()
    df.loc[3, "x"] = np.inf
    df.to_csv(tmp_path / "data.tsv", sep="\t", index=False)
    err = _error(tmp_path / "data.tsv", make_config)
    assert err.one_line().startswith(
        f"{tmp_path}/data.tsv: input_features[x]: column 'x' holds infinite values (line 5)"
    )


def test_a_binary_column_with_a_third_value_names_its_line(tmp_path, make_config):
    df = _frame().assign(b=["cat", "dog"] * 20)
    df.loc[7, "b"] = "cow"
    df.to_csv(tmp_path / "data.csv", index=False)
    err = _error(tmp_path / "data.csv", make_config, inputs=[{"name": "b", "type": "binary"}])
    assert err.source == str(tmp_path / "data.csv")
    assert err.message.endswith("(line 9 holds 'cow')")


def test_a_bundled_dataset_is_named_too(make_config):
    cfg = make_config([{"name": "nope", "type": "number"}], [{"name": "malignant", "type": "binary"}])
    with pytest.raises(DataError) as info:
        prepare(load_dataframe("sklearn:breast_cancer", Path(".")), cfg)
    assert info.value.source == "sklearn:breast_cancer" and "column 'nope'" in info.value.message


def test_a_fixed_split_column_names_its_rows():
    origin = DataOrigin("data.parquet")
    with pytest.raises(DataError) as info:
        fixed_split_indices(np.array([0, 1, 2, 7, 1, 0], dtype=object), origin=origin)
    assert info.value.source == "data.parquet" and "holds 7 at data row 4 (1 such rows)" in info.value.message


def test_rows_without_a_file_are_1_based_data_rows():
    assert DataOrigin().rows([0]) == "data row 1"
    assert DataOrigin().rows([0, 4, 5, 6, 9]) == "data rows 1, 5, 6 and 2 more"


def test_filled_values_are_recorded_and_said(make_config):
    df = pd.DataFrame(
        {
            "x1": np.arange(40, dtype=float),
            "x2": [1.0, 2.0, 3.0, np.nan] * 3 + [2.0] * 28,
            "c": ["red", None] + ["blue"] * 38,
            "y": [0, 1] * 20,
        }
    )
    mean = {"missing_value_strategy": "fill_with_mean"}
    cfg = make_config(
        [
            {"name": "x1", "type": "number"},
            {"name": "x2", "type": "number", "preprocessing": mean},
            {"name": "c", "type": "category"},
        ],
        BINARY_Y,
    )
    data = prepare(df, cfg)
    (x2, c) = data.filled
    assert (x2.feature, x2.count, x2.how, c.feature, c.count, c.how) == (
        "x2",
        3,
        "training mean",
        "c",
        1,
        "unknown category",
    )
    assert x2.value == pytest.approx(float(np.nanmean(df["x2"].to_numpy()[data.splits["train"]])))
    assert x2.text().startswith("3 missing values in x2 filled with the training mean (")
    assert c.text() == "1 missing values in c read as the unknown category"
    assert FilledValues("x", "x", 2, "training mean", 0.5).text() == (
        "2 missing values in x filled with the training mean (0.5)"
    )


def test_hpo_validate_says_which_missing_values_it_filled(tmp_path):
    from ludwig_hpo.cli import app

    df = pd.DataFrame(
        {"x1": np.arange(60, dtype=float), "x2": [np.nan, 1.0, 2.0] * 3 + [1.5] * 51, "y": ["a", "b"] * 30}
    )
    df.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "sweep.yaml").write_text(
        "name: filled\n"
        "dataset: {source: data.csv}\n"
        "input_features: [{name: x1, type: number}, {name: x2, type: number}]\n"
        "output_features: [{name: y, type: binary}]\n"
        "hyperopt:\n"
        "  parameters:\n"
        "    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "sweep.yaml")])
    assert result.exit_code == 0, result.output
    assert "data: 3 missing values in x2 filled with 0\n" in result.stdout, "Ludwig's default: fill_value 0.0"


def test_both_missing_value_refusals_share_one_message_shape():
    s = pd.Series([1.0, None, 2.0, None], name="c")
    with pytest.raises(DataError) as info:
        _refuse_missing(s, "input_features[c]", DataOrigin("data.parquet"), "gaps", "fill them")
    line = info.value.one_line()
    assert line == "data.parquet: input_features[c]: column 'c': 2 gaps (data rows 2, 4); fix: fill them"
    _refuse_missing(s.dropna(), "input_features[c]", DataOrigin("data.parquet"), "gaps", "fill them")
