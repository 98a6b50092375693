"""Bad and real-world input a streamed dataset meets, through the real ``hpo validate`` (no Ray
starts: each check reads footers and headers only): one line naming the file and
``dataset.source`` with a fix, exit 2, no traceback, nothing written; odd column names and
files that are fine pass. What only the rows show (split values, cells, a split without rows)
is found by the fit pass: tests/unit/test_streaming_data.py and the streamed e2e tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from ludwig_hpo.cli import app
from ludwig_hpo.data.streaming.sources import stream_files

TYPES = {"x1": "number", "x2": "number", "color": "category"}


def _frame(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "x1": rng.normal(size=n),
            "x2": rng.normal(size=n),
            "color": rng.choice(["red", "blue"], n),
            "y": (np.arange(n) % 2).astype(np.int64),
        }
    )


def _sweep(tmp_path: Path, source: str = "data", names: dict[str, str] | None = None) -> Path:
    names = names or {}
    raw = {
        "name": "bad",
        "dataset": {"source": source},
        "input_features": [{"name": names.get(c, c), "type": t} for c, t in TYPES.items()],
        "output_features": [{"name": names.get("y", "y"), "type": "binary"}],
        "backend": {"num_workers": 1, "cpus_per_worker": 1},
        "hyperopt": {
            "goal": "maximize",
            "metric": "roc_auc",
            "output_feature": names.get("y", "y"),
            "executor": {"max_concurrent_trials": 1},
            "parameters": {"trainer.learning_rate": {"space": "choice", "categories": [0.01]}},
        },
    }
    (tmp_path / "data").mkdir(exist_ok=True)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    return path


def _validate(sweep: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", str(sweep)])
    return result.exit_code, result.output


def _refused(tmp_path: Path, sweep: Path, *want: str) -> str:
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out = _validate(sweep)
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out, out
    assert "dataset.source: " in out and "; fix: " in out, out
    for w in want:
        assert w in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    return out


def _halves(df: pd.DataFrame, data: Path, fmt: str) -> tuple[Path, Path]:
    a, b = data / f"a.{fmt}", data / f"b.{fmt}"
    for part, path in ((df.iloc[: len(df) // 2], a), (df.iloc[len(df) // 2 :], b)):
        part.to_parquet(path) if fmt == "parquet" else part.to_csv(path, index=False)
    return a, b


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda b: b[: len(b) // 2], "magic bytes not found"),
        (lambda b: b"not a parquet file", "magic bytes not found"),
        (lambda b: b"", "0 bytes"),
        (lambda b: b"PAR1" + b"\0" * 64 + b"PAR1", "cannot read this file"),
    ],
    ids=["truncated", "garbage", "empty", "corrupt-footer"],
)
def test_an_unreadable_parquet_file_in_the_folder_is_named(tmp_path, damage, said):
    sweep = _sweep(tmp_path)
    _, b = _halves(_frame(), tmp_path / "data", "parquet")
    b.write_bytes(damage(b.read_bytes()))
    _refused(tmp_path, sweep, str(b), "cannot read this file: ", said, "fix or remove the file")


def test_an_empty_csv_file_in_the_folder_is_named(tmp_path):
    sweep = _sweep(tmp_path)
    _, b = _halves(_frame(), tmp_path / "data", "csv")
    b.write_text("")
    _refused(tmp_path, sweep, str(b), "cannot read this file: Empty CSV file")


def test_a_column_int_in_one_file_and_string_in_another_is_named(tmp_path):
    sweep = _sweep(tmp_path)
    df = _frame()
    df.iloc[:20].to_parquet(tmp_path / "data" / "a.parquet")
    df.iloc[20:].astype({"y": str}).to_parquet(tmp_path / "data" / "b.parquet")
    _refused(tmp_path, sweep, "b.parquet", "the schema differs from a.parquet's at column 'y'", "there int64")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_column_missing_from_one_file_is_named(tmp_path, fmt):
    sweep = _sweep(tmp_path)
    df = _frame()
    _halves(df, tmp_path / "data", fmt)
    b = tmp_path / "data" / f"b.{fmt}"
    rest = df.iloc[20:].drop(columns="x2")
    rest.to_parquet(b) if fmt == "parquet" else rest.to_csv(b, index=False)
    _refused(tmp_path, sweep, str(b), "column 'x2' is not in this file")


def test_a_column_only_one_file_has_is_named(tmp_path):
    sweep = _sweep(tmp_path)
    df = _frame()
    df.iloc[:20].to_parquet(tmp_path / "data" / "a.parquet")
    df.iloc[20:].assign(extra=1.0).to_parquet(tmp_path / "data" / "b.parquet")
    _refused(tmp_path, sweep, "b.parquet", "at column 'extra' (here double, there missing)")


def test_parquet_and_csv_files_in_one_folder_are_refused(tmp_path):
    sweep = _sweep(tmp_path)
    _frame().to_parquet(tmp_path / "data" / "a.parquet")
    _frame().to_csv(tmp_path / "data" / "b.csv", index=False)
    _refused(tmp_path, sweep, "b.csv", "the dataset mixes parquet and csv files")


def test_an_empty_folder_is_refused(tmp_path):
    sweep = _sweep(tmp_path)
    (tmp_path / "data" / "notes.txt").write_text("not data")
    _refused(tmp_path, sweep, "error: data: dataset.source: no .parquet, .csv or .tsv file found")


def test_a_glob_matching_nothing_is_refused(tmp_path):
    sweep = _sweep(tmp_path, "data/*.parquet")
    _frame().to_csv(tmp_path / "data" / "a.csv", index=False)  # there are files, of another suffix
    _refused(tmp_path, sweep, "error: data/*.parquet: dataset.source: no .parquet, .csv or .tsv file found")


@pytest.mark.parametrize("uri", ["foo://x", "foo://bucket/rows/*.parquet"])
def test_a_uri_scheme_no_file_system_reads_is_one_line(tmp_path, uri):
    sweep = _sweep(tmp_path, uri)
    _refused(tmp_path, sweep, f"error: {uri}: dataset.source: no file system reads foo:// here", "s3://")


def test_a_file_uri_to_nothing_is_refused(tmp_path):
    sweep = _sweep(tmp_path, (tmp_path / "missing").as_uri())
    _refused(tmp_path, sweep, "no .parquet, .csv or .tsv file found")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_column_names_with_spaces_slashes_and_unicode_stream(tmp_path, fmt):
    names = {"x1": "x one", "x2": "a/b", "color": "Farbe ü 色", "y": "y ß/z"}
    sweep = _sweep(tmp_path, names=names)
    _halves(_frame().rename(columns=names), tmp_path / "data", fmt)
    code, out = _validate(sweep)
    assert code == 0, out
    assert f"data: data: streamed, 2 {fmt} file(s)" in out
    files = stream_files("data", tmp_path, list(names.values()))
    assert files.columns == tuple(names.values())


def test_a_csv_with_a_header_only_passes_the_header_checks(tmp_path):
    sweep = _sweep(tmp_path)
    a, b = _halves(_frame(), tmp_path / "data", "csv")
    _frame().iloc[:0].to_csv(b, index=False)
    code, out = _validate(sweep)
    assert code == 0, out
    assert "streamed, 2 csv file(s)" in out


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_dataset_whose_files_hold_no_row_is_refused(tmp_path, fmt):
    sweep = _sweep(tmp_path)
    empty = _frame().iloc[:0]
    for name in ("a", "b"):
        path = tmp_path / "data" / f"{name}.{fmt}"
        empty.to_parquet(path) if fmt == "parquet" else empty.to_csv(path, index=False)
    only = "a schema only" if fmt == "parquet" else "a header only"
    _refused(tmp_path, sweep, "error: data: dataset.source: the dataset has no rows: its 2 file(s) hold " + only)


def test_quoted_line_breaks_in_a_csv_cell_read_as_one_row(tmp_path):
    import pyarrow.csv as pcsv

    n = 6000
    df = _frame(n).assign(color=[f"red\nline {i}" if i % 3 == 0 else "blue" for i in range(n)])
    df.to_csv(tmp_path / "data.csv", index=False)
    files = stream_files("data.csv", tmp_path, ["x1", "color"])
    # small blocks put a block edge inside a quoted cell, as a file of many MB does at Ray's size
    small = pcsv.ReadOptions(block_size=1 << 14, use_threads=False)
    reader = pcsv.open_csv(str(tmp_path / "data.csv"), read_options=small, parse_options=files.csv_parse_options())
    read = pd.concat([b.to_pandas() for b in reader], ignore_index=True)
    assert len(read) == n and read["color"].tolist() == df["color"].tolist()


@pytest.mark.parametrize(
    ("values", "codes"),
    [(["train", "val", "test", "validation", "1"], [0, 1, 2, 1, 1]), ([0.0, 1.0, 2.0], [0, 1, 2])],
)
def test_split_names_and_numbers_are_read_as_in_memory(values, codes):
    from ludwig_hpo.data.streaming.fit import FileOrigin
    from ludwig_hpo.data.streaming.splits import SplitRule, split_codes

    rule = SplitRule("fixed", "split", (0.7, 0.1, 0.2), 42)
    got = split_codes(pd.DataFrame({"split": values}), rule, FileOrigin("a.parquet"))
    assert got.tolist() == codes


@pytest.mark.parametrize("bad", [3, "dev", None])
def test_another_split_value_names_the_file_the_column_and_the_value(bad):
    from ludwig_hpo.data.streaming.fit import FileOrigin
    from ludwig_hpo.data.streaming.splits import SplitRule, split_codes
    from ludwig_hpo.errors import DataError

    rule = SplitRule("fixed", "split", (0.7, 0.1, 0.2), 42)
    with pytest.raises(DataError) as e:
        split_codes(pd.DataFrame({"split": [0, 1, bad, 2]}, dtype=object), rule, FileOrigin("part-7.parquet"))
    text = str(e.value)
    assert "\n" not in text and text.startswith("part-7.parquet: preprocessing.split.column: ")
    assert f"holds {'a missing value' if bad is None else repr(bad)} at 1 row of this file" in text


def _ray_read_failure(path: Path) -> ValueError:
    # the words Ray Data's CSV read task raises with, pyarrow's own error dropped on the way
    return ValueError(f"Failed to read CSV file: {path}. Please check the CSV file has correct format.")


def test_a_cell_its_inferred_csv_type_does_not_take_is_named_with_its_row(tmp_path):
    from ludwig_hpo.data.streaming.sources import read_error

    n = 60000  # past pyarrow's first block, whose rows inferred the column's type
    df = _frame(n).astype({"x1": object})
    df.loc[n - 10, "x1"] = "oops"
    df.to_csv(tmp_path / "data.csv", index=False)
    files = stream_files("data.csv", tmp_path, ["x1"])
    e = read_error(files, ["x1", "y"], _ray_read_failure(tmp_path / "data.csv"), "data.csv")
    text = str(e)
    assert "\n" not in text and text.startswith(f"{tmp_path / 'data.csv'}: dataset.source: cannot read this file: ")
    assert "conversion error" in text and "'oops'" in text and "write the files as Parquet" in text


def test_a_csv_row_with_another_number_of_cells_is_named(tmp_path):
    from ludwig_hpo.data.streaming.sources import read_error

    _frame(60000).to_csv(tmp_path / "data.csv", index=False)
    lines = (tmp_path / "data.csv").read_text().splitlines()
    lines[59000] += ",extra"  # past the first block, which the header check reads
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    files = stream_files("data.csv", tmp_path, ["x1"])
    text = str(read_error(files, ["x1", "y"], _ray_read_failure(tmp_path / "data.csv"), "data.csv"))
    assert "\n" not in text and "data.csv: dataset.source: cannot read this file: " in text
    assert "Expected 4 columns, got 5" in text


def test_a_read_failure_naming_no_file_is_one_line_at_the_source(tmp_path):
    from ludwig_hpo.data.streaming.sources import read_error

    _frame(10).to_parquet(tmp_path / "a.parquet")
    files = stream_files("a.parquet", tmp_path, ["x1"])
    text = str(read_error(files, ["x1"], RuntimeError("object store full\nmore words"), "rows/"))
    assert (
        text
        == "rows/: dataset.source: cannot read the dataset: object store full; fix: fix or remove the file that cannot be read"
    )


def test_a_csv_row_with_another_number_of_cells_in_the_first_block_is_refused_by_hpo_validate(tmp_path):
    sweep = _sweep(tmp_path)
    a, _ = _halves(_frame(), tmp_path / "data", "csv")
    lines = a.read_text().splitlines()
    lines[5] += ",extra"
    a.write_text("\n".join(lines) + "\n")
    _refused(tmp_path, sweep, str(a), "cannot read this file: CSV parse error: Expected 4 columns, got 5")


def test_missing_cells_of_a_csv_text_column_read_as_pandas_reads_them(tmp_path):
    import pyarrow.csv as pcsv

    lines = ["x1,color,note", "1,red,fine", "2,,NA", "3,None,n/a", "4,blue,<NA>", "5,NULL,ok"]
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    files = stream_files("data.csv", tmp_path, ["x1", "color", "note"])
    read = pcsv.read_csv(
        str(tmp_path / "data.csv"),
        parse_options=files.csv_parse_options(),
        convert_options=files.csv_convert_options(["x1", "color", "note"]),
    ).to_pandas()
    whole = pd.read_csv(tmp_path / "data.csv")
    for column in ("color", "note"):  # pyarrow alone keeps "" and "NA" as strings in text columns
        assert read[column].isna().tolist() == whole[column].isna().tolist()
        assert read[column].dropna().tolist() == whole[column].dropna().tolist()
    assert read["color"].isna().sum() == 3


def test_the_missing_markers_are_those_pandas_reads_as_missing(tmp_path):
    from ludwig_hpo.data.streaming.sources import PANDAS_NA_VALUES

    cells = [m if m else '""' for m in PANDAS_NA_VALUES]  # an empty cell written quoted
    (tmp_path / "m.csv").write_text("note\nkept\n" + "\n".join(cells) + "\n")
    read = pd.read_csv(tmp_path / "m.csv", keep_default_na=True)["note"]
    assert read.iloc[0] == "kept" and read.iloc[1:].isna().all() and len(read) == len(cells) + 1


def _streamed_read(files, path: Path, columns: list[str]) -> pd.DataFrame:
    # as Ray Data's CSV source reads a file: pyarrow's streaming reader, whose column types
    # come from the file's first block unless the convert options fix them
    import pyarrow as pa
    import pyarrow.csv as pcsv

    reader = pcsv.open_csv(
        str(path), parse_options=files.csv_parse_options(), convert_options=files.csv_convert_options(columns)
    )
    return pa.Table.from_batches(list(reader), schema=reader.schema).to_pandas()


def test_a_number_column_of_integers_in_the_first_block_takes_a_later_fraction(tmp_path):
    from ludwig_hpo.data.streaming.sources import read_error

    n = 200_000  # past pyarrow's first block (1 MiB of text)
    df = pd.DataFrame({"x1": np.arange(n).astype(object), "color": ["red"] * n})
    df.loc[n - 10, "x1"] = 2.5
    df.to_csv(tmp_path / "data.csv", index=False)
    inferred = stream_files("data.csv", tmp_path, ["x1", "color"])
    with pytest.raises(Exception, match="conversion error"):  # pyarrow's inference alone refuses it
        _streamed_read(inferred, tmp_path / "data.csv", ["x1", "color"])
    files = stream_files("data.csv", tmp_path, ["x1", "color"], numbers=["x1"])
    assert files.csv_types == (("x1", "float64"),)
    read = _streamed_read(files, tmp_path / "data.csv", ["x1", "color"])
    assert read["x1"].tolist() == pd.read_csv(tmp_path / "data.csv")["x1"].tolist()
    df.loc[n - 5, "x1"] = "oops"  # a number column still refuses a word, in one line naming it
    df.to_csv(tmp_path / "data.csv", index=False)
    text = str(read_error(files, ["x1", "color"], _ray_read_failure(tmp_path / "data.csv"), "data.csv"))
    assert "\n" not in text and "In CSV column 'x1': " in text and "'oops'" in text
    assert text.endswith(
        "fix: a column only number features read takes numbers only: clean the cell, or make the feature a category"
    )


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_column_without_a_value_in_the_first_block_reads_its_later_values(tmp_path, fmt):
    n = 400_000  # past pyarrow's first block (1 MiB of text)
    color = [None] * n
    color[n - 3 :] = ["red", "blue", "red"]
    x1 = [None] * n
    x1[n - 2 :] = [1.5, 2.0]
    df = pd.DataFrame({"x1": x1, "color": color, "y": np.arange(n) % 2})
    path = tmp_path / f"data.{fmt}"
    df.to_csv(path, index=False, sep="\t" if fmt == "tsv" else ",")
    files = stream_files(path.name, tmp_path, ["x1", "color", "y"], numbers=["x1"], texts=["color", "y"])
    assert dict(files.csv_types) == {"x1": "float64", "color": "string"}
    read = _streamed_read(files, path, ["x1", "color", "y"])
    whole = pd.read_csv(path, sep="\t" if fmt == "tsv" else ",")
    for column in ("x1", "color", "y"):
        assert read[column].isna().tolist() == whole[column].isna().tolist()
        assert read[column].dropna().tolist() == whole[column].dropna().tolist()


def test_an_input_example_types_a_number_column_of_whole_numbers_as_pandas_does(tmp_path):
    from ludwig_hpo.execution.streaming.local import _as_pandas_types

    df = pd.DataFrame({"whole": [1, 2, 3], "fraction": [1, 2.5, 3], "holes": [1, None, 3], "color": ["a", "b", "c"]})
    df.to_csv(tmp_path / "data.csv", index=False)
    files = stream_files("data.csv", tmp_path, list(df.columns), numbers=["whole", "fraction", "holes"])
    read = _streamed_read(files, tmp_path / "data.csv", list(df.columns))
    assert [str(t) for t in read.dtypes[:3]] == ["float64"] * 3
    typed = _as_pandas_types(read, files)
    assert typed.dtypes.to_dict() == pd.read_csv(tmp_path / "data.csv").dtypes.to_dict()


def test_the_split_id_and_a_column_other_features_read_keep_their_inferred_csv_types(tmp_path):
    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.data.streaming.splits import split_rule
    from ludwig_hpo.execution.streaming.prepare import dataset_files
    from tests.unit.conftest import _sweep_dict

    pd.DataFrame({"rid": [1, 2], "x1": [1, 2], "code": [3, 4], "note": [None, None], "y": [0, 1]}).to_csv(
        tmp_path / "data.csv", index=False
    )
    inputs = [
        {"name": "rid", "type": "number"},  # also the hashed id: hashed as its int64 cells, as in memory
        {"name": "x1", "type": "number"},
        {"name": "code", "type": "number"},
        {"name": "code_cat", "column": "code", "type": "category"},  # a category counts 3, not 3.0
        {"name": "note", "type": "category"},
    ]
    raw = _sweep_dict(
        inputs, [{"name": "y", "type": "binary"}], preprocessing={"split": {"type": "hash", "column": "rid"}}
    )
    raw["dataset"] = {"source": str(tmp_path / "data.csv"), "streaming": True}
    cfg = SweepConfig.model_validate(raw)
    files = dataset_files(cfg, None, split_rule(cfg))
    assert dict(files.csv_types) == {"x1": "float64", "note": "string"}
