"""Names as written (features, parameter paths, score keys) spelled for MLflow and Ray Tune:
both encodings round-trip, are the identity on names those libraries take as they are, and what
MLflow is given passes MLflow's own key validation."""

from __future__ import annotations

import pytest

from ludwig_hpo.tracking.names import (
    MAX_KEY_LENGTH,
    ROOT_PARAM_KEY,
    key_too_long,
    mlflow_key,
    name_of_key,
    path_of_tune_key,
    tune_key,
)

#: Names a CSV header can hold, and the paths and keys the sweep composes from them.
AWKWARD = [
    "size (cm)",
    "a/b",
    "x.y",
    "width [px]",
    "naïve",
    "日本",
    "a=b",
    '"q"',
    "<t>",
    "  spaced  out  ",
    "tab\tand\nnewline",
    "a:b",
    ":28",
    "100%",
    "%2F",
    "a%25b",
    "😀 emoji",
    "/leading",
    "trailing/",
    "a//b",
    "a///b",
    "..",
    "...",
    "..x",
    "./a",
    "a/./b",
    "a/../b",
    "a/.",
    "/",
    "//",
    "root_block.x",
    "L" * 240,
    "size (cm).encoder.type",
    "a/b.encoder.embedding_size",
    "validation/size (cm)/loss",
    "validation/a/b/roc_auc",
    "best.x.y.encoder.type",
    "hparam/width [px].encoder.dropout",
]

#: Names MLflow and Tune take as they are: existing stores and experiments hold them so.
PLAIN = [
    "trainer.learning_rate",
    "mean_radius.encoder.type",
    "validation/label/roc_auc",
    "time/total_s",
    "hparam/trainer.learning_rate",
    "best.trainer.optimizer.type",
    "breast-cancer tiny",
    "version.torch",
    "mlflow.parentRunId",
    "naïve.encoder.type",
]


@pytest.mark.parametrize("name", AWKWARD + PLAIN)
def test_mlflow_key_round_trips(name):
    assert name_of_key(mlflow_key(name)) == name


@pytest.mark.parametrize("name", [n for n in AWKWARD + PLAIN if len(mlflow_key(n)) <= MAX_KEY_LENGTH])
def test_mlflow_accepts_every_key_as_param_metric_and_tag(name):
    from mlflow.utils.validation import _validate_metric_name, _validate_param_name, _validate_tag_name

    key = mlflow_key(name)
    _validate_param_name(key)
    _validate_metric_name(key)
    _validate_tag_name(key)


@pytest.mark.parametrize("name", PLAIN)
def test_names_mlflow_takes_as_they_are_keep_their_key(name):
    assert mlflow_key(name) == name
    assert name_of_key(name) == name


def test_the_root_parameter_has_a_key_of_its_own():
    assert mlflow_key(".") == ROOT_PARAM_KEY
    assert name_of_key(ROOT_PARAM_KEY) == "."


def test_escapes_are_readable_and_distinct():
    assert mlflow_key("size (cm).encoder.type") == "size :28cm:29.encoder.type"
    assert mlflow_key("a:b") == "a:3ab"  # the escape character itself is escaped
    assert len({mlflow_key(n) for n in AWKWARD + PLAIN}) == len(set(AWKWARD + PLAIN))


def test_too_long_names_are_told_apart():
    assert key_too_long("L" * (MAX_KEY_LENGTH + 1))
    assert not key_too_long("L" * MAX_KEY_LENGTH)
    assert key_too_long("(" * 100)  # 100 characters, 300 as a key


@pytest.mark.parametrize("path", AWKWARD + PLAIN)
def test_tune_key_round_trips_and_has_no_slash(path):
    key = tune_key(path)
    assert "/" not in key
    assert path_of_tune_key(key) == path


@pytest.mark.parametrize("path", [p for p in PLAIN if "/" not in p])
def test_paths_without_slash_or_percent_keep_their_tune_key(path):
    assert tune_key(path) == path
