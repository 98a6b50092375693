"""Bad files and bad data through the real CLI: each case is one line on stderr naming the file or
key and the fix, exit 2, no traceback, and nothing created (no output folder, no MLflow store;
every case fails before Ray would start).

Config-language mistakes have their own table in the config tests; these are the inputs around
it: unreadable sweep files and datasets, and data that cannot be trained on.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ludwig_hpo.cli import app

SWEEP = """\
name: bad-input
dataset: {{source: {source}}}
input_features:
  - {{name: a, type: number}}
  - {{name: c, type: category}}
{inputs}output_features:
  - {{name: y, type: {target_type}}}
trainer: {{epochs: 1{trainer}}}
hyperopt:
  goal: minimize
  metric: loss
  output_feature: y
  parameters:
    trainer.learning_rate: {{space: loguniform, lower: 1.0e-4, upper: 1.0e-2}}
{extra}"""


def frame(rows: int = 120, seed: int = 0) -> pd.DataFrame:
    """A valid table: number ``a``, category ``c``, two-class target ``y``."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"a": rng.normal(size=rows), "c": rng.choice(["u", "v", "w"], rows), "y": rng.choice(["p", "q"], rows)}
    )


def edit(**columns) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def apply(df: pd.DataFrame) -> pd.DataFrame:
        for name, value in columns.items():
            if value is DROP:
                df = df.drop(columns=name)
            elif callable(value):
                df[name] = value(df[name])
            else:
                df[name] = value
        return df

    return apply


DROP = object()


def _set_rows(index, value):
    def apply(s: pd.Series) -> pd.Series:
        s = s.astype(object)
        s.iloc[index] = value
        return s

    return apply


@dataclass
class Case:
    """One bad input. ``data``: a frame edit, raw CSV bytes, or None (a sweep-file case);
    ``sweep``: raw sweep-file bytes replacing the template; ``message``: the exact stderr
    line (``{dir}`` is the case's folder); ``inputs``: more input features (YAML lines);
    ``files``: more files written into the case's folder (e.g. images the data refers to)."""

    data: Callable[[pd.DataFrame], pd.DataFrame] | bytes | None
    message: str
    sweep: bytes | None = None
    source: str = "data.csv"
    target_type: str = "category"
    trainer: str = ""
    extra: str = ""
    sweep_name: str = "sweep.yaml"
    inputs: str = ""
    files: dict[str, bytes] = field(default_factory=dict)


def _png(size: tuple[int, ...] = (4, 4)) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full(size, 9, np.uint8), mode="L" if len(size) == 2 else "RGB").save(buf, format="PNG")
    return buf.getvalue()


#: An image feature ``img`` whose column holds paths to PNGs under ``img/`` (relative to data.csv).
IMG = "  - {name: img, type: image}\n"
IMAGES = {"img/ok.png": _png()}


def _image_paths(bad_row: int | None = None, bad: object = "img/ok.png"):
    def apply(df: pd.DataFrame) -> pd.DataFrame:
        df["img"] = ["img/ok.png"] * len(df)
        if bad_row is not None:
            df["img"] = df["img"].astype(object)
            df.loc[bad_row, "img"] = bad
        return df

    return apply


FIX_FORMAT = "fix: check the file's format"
MISSING = "fix: drop this feature"

CASES = {
    # -------------------------------------------------------------- the sweep file itself
    "sweep file missing": Case(
        None,
        "error: nope.yaml: file not found; fix: check the path (it is relative to the current folder)",
        sweep_name="nope.yaml",
    ),
    "parameter path with an unclosed quote": Case(
        None,
        'error: sweep.yaml:15:5: hyperopt.parameters.""a.b": path \'"a.b\' opens a quote " that does not close'
        " before a '.'; fix: write the name in quotes followed by its fields, e.g. \"a.b\".encoder.type",
        extra="    '\"a.b': {space: choice, categories: [1, 2]}\n",
    ),
    "sweep file empty": Case(
        None, "error: sweep.yaml: the file is empty; fix: write a sweep file (see README.md)", sweep=b""
    ),
    "sweep file only comments": Case(
        None,
        "error: sweep.yaml: the file is empty; fix: write a sweep file (see README.md)",
        sweep=b"# nothing yet\n\n",
    ),
    "sweep file not UTF-8": Case(
        None, "error: sweep.yaml: not UTF-8 text (byte 6); fix: save the file as UTF-8", sweep=b"name: \xe9t\xe9\n"
    ),
    "sweep file UTF-16": Case(
        None,
        "error: sweep.yaml: not UTF-8 text (byte 0); fix: save the file as UTF-8",
        sweep="name: x\n".encode("utf-16"),
    ),
    "sweep file is a list": Case(
        None,
        "error: sweep.yaml: the top level must be a mapping of sections, not a list; "
        "fix: start the file with 'name:', 'dataset:', ... keys",
        sweep=b"- name\n- dataset\n",
    ),
    "sweep file is a scalar": Case(
        None,
        "error: sweep.yaml: the top level must be a mapping of sections, not a "
        "str; fix: start the file with 'name:', 'dataset:', ... keys",
        sweep=b"hello\n",
    ),
    "tab indentation": Case(
        None,
        "error: sweep.yaml:2:1: invalid YAML: found character '\\t' that cannot start any "
        "token; fix: fix the YAML syntax at that position",
        sweep=b"name: x\n\tdataset: y\n",
    ),
    "unclosed bracket": Case(
        None,
        "error: sweep.yaml:3:1: invalid YAML: expected the node content, but found "
        "'<stream end>'; fix: fix the YAML syntax at that position",
        sweep=b"name: x\ndataset: {source: [\n",
    ),
    "unclosed quote": Case(
        None,
        "error: sweep.yaml:2:1: invalid YAML: found unexpected end of stream; fix: fix the "
        "YAML syntax at that position",
        sweep=b'name: "x\n',
    ),
    "python object tag": Case(
        None,
        "error: sweep.yaml:1:7: invalid YAML: could not determine a constructor for the "
        "tag 'tag:yaml.org,2002:python/object/apply:os.system'; fix: fix the YAML syntax at that "
        "position",
        sweep=b"name: !!python/object/apply:os.system ['true']\n",
    ),
    "name escapes the output root": Case(
        None,
        "error: sweep.yaml:1:1: name: name '../escape' must be letters, "
        "digits, '_', '.', '-' (it names the output folder)",
        sweep=b"name: ../escape\n",
    ),
    # -------------------------------------------------------------- the dataset file
    "dataset missing": Case(
        None,
        "error: {dir}/nope.csv: dataset.source: dataset file not found; fix: check the "
        "path (relative paths start at the sweep file's folder)",
        source="nope.csv",
    ),
    "dataset is a folder without data files": Case(
        None,
        "error: .: dataset.source: no .parquet, .csv or .tsv file found; "
        "fix: check the path (relative paths start at the sweep file's folder)",
        source=".",
    ),
    "dataset empty file": Case(
        b"",
        "error: {dir}/data.csv: dataset.source: cannot read the dataset: No columns to parse from file; " + FIX_FORMAT,
    ),
    "dataset header only": Case(
        b"a,c,y\n", "error: {dir}/data.csv: dataset.source: the dataset has no rows; fix: point to a file with data"
    ),
    "dataset ragged rows": Case(
        b"a,c,y\n1,u,p\n2,v,q,7,8\n",
        "error: {dir}/data.csv: dataset.source: cannot read "
        "the dataset: Error tokenizing data. C error: Expected 3 fields in line 3, saw 5; " + FIX_FORMAT,
    ),
    "dataset not UTF-8": Case(
        "a,c,y\n1,é,p\n".encode("latin-1") + b"2,v,q\n" * 100,
        "error: {dir}/data.csv: dataset.source: cannot read the dataset: 'utf-8' codec can't "
        "decode byte 0xe9 in position 0: unexpected end of data; " + FIX_FORMAT,
    ),
    "dataset duplicate header": Case(
        b"a,a,c,y\n" + b"1,2,u,p\n3,4,v,q\n" * 60,
        "error: {dir}/data.csv: dataset.source: the header repeats column name(s) "
        "['a']; fix: give every column a unique name",
    ),
    "dataset unknown format": Case(
        None,
        "error: {dir}/data.xlsx: dataset.source: unknown dataset format '.xlsx'; "
        "fix: use a .csv, .tsv or .parquet file",
        source="data.xlsx",
    ),
    "dataset parquet is not parquet": Case(
        None,
        "error: {dir}/data.parquet: dataset.source: cannot read the "
        "dataset: Could not open Parquet input source '{dir}/data.parquet': Parquet "
        "magic bytes not found in footer. Either the file is corrupted or this is not "
        "a parquet file.; " + FIX_FORMAT,
        source="data.parquet",
    ),
    "unknown bundled dataset": Case(
        None,
        "error: dataset.source: unknown bundled dataset 'iris2'; fix: use one of "
        "sklearn:digits, sklearn:breast_cancer, sklearn:wine or a CSV/Parquet path",
        source="sklearn:iris2",
    ),
    # -------------------------------------------------------------- columns and values
    "feature column missing": Case(
        edit(c=DROP),
        "error: {dir}/data.csv: input_features[c]: column 'c' is not in the dataset (it has "
        "2 columns); fix: set 'column:' to one of the dataset's columns",
    ),
    "target column missing": Case(
        edit(y=DROP),
        "error: {dir}/data.csv: output_features[y]: column 'y' is not in the dataset (it has "
        "2 columns); fix: set 'column:' to one of the dataset's columns",
    ),
    "number column all NaN": Case(
        edit(a=np.nan),
        "error: {dir}/data.csv: input_features[a]: column 'a': every training value is missing; " + MISSING,
    ),
    "category column all NaN": Case(
        edit(c=None),
        "error: {dir}/data.csv: input_features[c]: column 'c': every training value is missing; " + MISSING,
    ),
    "number column holds text": Case(
        edit(a=_set_rows(5, "abc")),
        "error: {dir}/data.csv: input_features[a]: column 'a': 1 values are not numbers (e.g. 'abc'; line 7); "
        "fix: clean the column or use type: category",
    ),
    "number column holds inf": Case(
        edit(a=_set_rows(7, np.inf)),
        "error: {dir}/data.csv: input_features[a]: column 'a' holds infinite values (line 9); fix: clean the column",
    ),
    "number beyond float32": Case(
        edit(a=_set_rows(slice(None, None, 2), 1e300)),
        "error: {dir}/data.csv: input_features[a]: column 'a': values up to 1e+300 do not fit float32 "
        "(largest 3.4e+38; lines 2, 4, 6 and 57 more); fix: rescale the column (e.g. "
        "take its log) before the sweep",
    ),
    "target single class": Case(
        edit(y="p"),
        "error: {dir}/data.csv: output_features[y]: column 'y': the target has a single class; there is "
        "nothing to learn; fix: use a column with at least 2 classes",
    ),
    "binary target with 3 values": Case(
        edit(y=lambda s: np.resize(["p", "q", "r"], len(s))),
        "error: {dir}/data.csv: output_features[y]: column 'y': a binary column needs 2 distinct values, but has "
        "3: ['p', 'q', 'r'] (line 4 holds 'r'); fix: use type: category for more than two classes",
        target_type="binary",
    ),
    "number target holds text": Case(
        lambda df: df,
        "error: {dir}/data.csv: output_features[y]: column 'y': 120 values are not numbers (e.g. 'q'; lines 2, 3, 4 "
        "and 117 more); fix: clean the column or use type: category",
        target_type="number",
    ),
    "a class per row": Case(
        edit(y=lambda s: [f"k{i}" for i in range(len(s))]),
        "error: {dir}/data.csv: preprocessing.split: the validation split has 12 rows, too few for 120 classes (at "
        "least 120); fix: use more rows or a larger validation fraction",
    ),
    # -------------------------------------------------------------- sizes
    "too few rows to split": Case(
        lambda df: df.head(6),
        "error: {dir}/data.csv: preprocessing.split: the validation split has 0 rows, too "
        "few for 2 classes (at least 2); fix: use more rows or a larger validation fraction",
    ),
    "fewer rows than kfold.k": Case(
        lambda df: df.head(30),
        "error: {dir}/data.csv: kfold.k: 40 folds of 24 train+validation rows "
        "hold about 0 rows each, too few to score 2 classes; fix: lower kfold.k",
        extra="kfold: {k: 40, top_k: 1}\n",
    ),
    # -------------------------------------------------------------- image files
    "image file missing": Case(
        _image_paths(7, "img/gone.png"),
        "error: {dir}/img/gone.png: input_features[img]: "
        "image file not found (line 9 of data.csv, column 'img'; 1 of 120 files missing); fix: check the "
        "paths in column 'img' (relative paths start at the dataset file's folder)",
        inputs=IMG,
        files=IMAGES,
    ),
    "image file is not an image": Case(
        _image_paths(3, "img/notes.png"),
        "error: {dir}/img/notes.png: "
        "input_features[img]: cannot read the image (line 5 of data.csv, column 'img'): cannot "
        "identify image file '{dir}/img/notes.png'; fix: replace the file with a PNG, "
        "JPEG, BMP or TIFF image, or drop the row",
        inputs=IMG,
        files={**IMAGES, "img/notes.png": b"text"},
    ),
    "images of different sizes": Case(
        _image_paths(5, "img/big.png"),
        "error: {dir}/img/big.png: input_features[img]: "
        "image is 6x7 pixels (line 7 of data.csv, column 'img') but the first image (ok.png) is 4x4 "
        "(height x width); fix: set preprocessing: {{height: 4, width: 4}} on the feature "
        "to resize every image (or remove infer_image_dimensions: false)",
        inputs="  - {name: img, type: image, preprocessing: {infer_image_dimensions: false}}\n",
        files={**IMAGES, "img/big.png": _png((6, 7))},
    ),
    "images of mixed channel counts": Case(
        _image_paths(5, "img/colour.png"),
        "error: {dir}/img/colour.png: input_features[img]: "
        "image is colour (3 channels; line 7 of data.csv, column 'img') but the first image (ok.png) is "
        "grayscale (1 channel); 1 of 120 images differ; fix: set preprocessing: {{num_channels: 3}} (RGB) or "
        "{{num_channels: 1}} (grayscale) on the feature to convert every image",
        inputs=IMG,
        files={**IMAGES, "img/colour.png": _png((4, 4, 3))},
    ),
    "images too small for the stacked_cnn": Case(
        _image_paths(),
        "error: sweep.yaml: input_features[img].encoder: stacked_cnn conv layer 2 of 2: a 1x1 map "
        "shrinks below one pixel (kernel_size 3, padding valid, pool_kernel_size 2); fix: use padding: same, a "
        "smaller kernel_size or pool_kernel_size, or fewer conv layers",
        inputs=IMG,
        files=IMAGES,
    ),
    "image paths missing": Case(
        lambda df: df.assign(img=None),
        "error: {dir}/data.csv: input_features[img]: no row has an image in column 'img' (120 rows); fix: fill "
        "the column with image file paths or arrays",
        inputs=IMG,
        files=IMAGES,
    ),
}


def _materialize(case: Case, folder: Path) -> Path:
    if callable(case.data):
        case.data(frame()).to_csv(folder / "data.csv", index=False)
    elif isinstance(case.data, bytes):
        (folder / "data.csv").write_bytes(case.data)
    for name, content in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    if case.source == "data.parquet":
        (folder / "data.parquet").write_text("not parquet")
    if case.source == "data.xlsx":
        (folder / "data.xlsx").write_bytes(b"PK\x03\x04")
    text = (
        case.sweep
        if case.sweep is not None
        else SWEEP.format(
            source=case.source, target_type=case.target_type, trainer=case.trainer, extra=case.extra, inputs=case.inputs
        ).encode()
    )
    if case.sweep_name != "nope.yaml":
        (folder / case.sweep_name).write_bytes(text)
    return folder / case.sweep_name


def _invoke(args: list[str], cwd: Path) -> tuple[int, str]:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, args)
    finally:
        os.chdir(old)
    return result.exit_code, result.stderr


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 30


#: The cases ``hpo sweep`` runs as well as ``hpo validate --model``: every sweep-file case (the
#: sweep stops before it starts anything), and one case for each later stage, which both
#: commands run through the same functions: reading the dataset (``load_dataframe``), preparing
#: it (``prepare``), its images, and the model checks (``check_prepared``, in the sweep's child
#: process). What only the sweep adds is the local cluster and the store's process it starts
#: meanwhile, stopped before the line is printed: one case a stage shows that, and the table
#: shows each line in ``validate``.
#: (A case with no data file where the sweep file names the default one fails in the sweep file.)
SWEPT = [name for name, case in CASES.items() if case.data is None and case.source == "data.csv"] + [
    "dataset missing",
    "target column missing",
    "image file is not an image",
    "images too small for the stacked_cnn",
]
RUNS = [(name, "validate") for name in CASES] + [(name, "sweep") for name in SWEPT]


def test_the_swept_cases_are_cases():
    assert set(SWEPT) <= set(CASES) and len(SWEPT) == len(set(SWEPT))


@pytest.mark.parametrize(("name", "command"), RUNS, ids=[f"{name}-{command}" for name, command in RUNS])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(tmp_path, name, command):
    case = CASES[name]
    folder = tmp_path / "case"
    folder.mkdir()
    sweep = _materialize(case, folder)
    before = sorted(p.name for p in folder.iterdir())
    # validate --model: the checks that build the losses and encoders too, as a sweep runs them
    extra = ["--output", str(tmp_path / "out")] if command == "sweep" else ["--model"]
    code, err = _invoke([command, sweep.name, *extra], folder)
    assert code == 2, err
    assert err.strip() == case.message.format(dir=folder), err
    assert "Traceback" not in err
    assert sorted(p.name for p in folder.iterdir()) == before  # no hpo_results/, mlflow.db, ray/
    assert not (tmp_path / "out").exists()


def test_unseen_categories_at_test_time_are_mapped_to_unknown_not_an_error(tmp_path):
    """A category value seen only outside the training split is valid input: it maps to the
    feature's unknown index (0) and the sweep file validates."""
    df = frame()
    df["c"] = [f"only-{i}" if i % 10 == 0 else v for i, v in enumerate(df["c"])]  # 12 values seen at most once
    df.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "sweep.yaml").write_text(
        SWEEP.format(source="data.csv", target_type="category", trainer="", extra="", inputs="")
    )
    code, err = _invoke(["validate", "sweep.yaml"], tmp_path)
    assert code == 0, err

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import prepare

    data = prepare(df, load_sweep(tmp_path / "sweep.yaml").config)
    vocab = data.meta["c"].vocab
    test_rows = data.splits["test"]
    unseen = [i for i in test_rows if df["c"].iloc[i] not in vocab]
    assert unseen, "the fixture should put unseen values in the test split"
    assert all(data.inputs["c"][i] == 0 for i in unseen)


def test_a_batch_larger_than_the_train_split_is_the_whole_split_with_one_note(tmp_path):
    """As in Ludwig (``batch_size: 32769  # entire training set``), a batch larger than each
    worker's share of the training split is not an error: validate says so in one note line."""
    frame().to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "sweep.yaml").write_text(
        SWEEP.format(
            source="data.csv",
            target_type="category",
            trainer=", batch_size: 512",
            extra="backend: {num_workers: 2}\n",
            inputs="",
        )
    )
    from ludwig_hpo.driver.validate import validate_lines

    lines = validate_lines(tmp_path / "sweep.yaml")
    notes = [line for line in lines if "trainer.batch_size" in line]
    assert notes == [
        "note: trainer.batch_size 512 is larger than each of 2 DDP workers' share of the train split (42 rows): "
        "a batch is a worker's whole share"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="file permissions do not apply to root")
def test_an_unreadable_dataset_is_one_line(tmp_path):
    frame().to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "data.csv").chmod(0)
    (tmp_path / "sweep.yaml").write_text(
        SWEEP.format(source="data.csv", target_type="category", trainer="", extra="", inputs="")
    )
    code, err = _invoke(["validate", "sweep.yaml"], tmp_path)
    assert code == 2
    assert err.strip() == f"error: {tmp_path}/data.csv: dataset.source: permission denied; fix: make the file readable"
