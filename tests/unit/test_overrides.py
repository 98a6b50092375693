"""Command-line overrides (--set, --num-workers, --from-sweep) and the one-trial reduction of ``hpo train``."""

from __future__ import annotations

import pytest
import yaml

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.overrides import parse_set, with_overrides
from ludwig_hpo.driver.single_run import best_config_of, single_run_sweep
from ludwig_hpo.errors import ConfigError, DataError

from ..conftest import SWEEPS


@pytest.fixture(scope="module")
def loaded():
    return load_sweep(SWEEPS / "breast_cancer_tiny.yaml")


@pytest.mark.parametrize(
    ("item", "parsed"),
    [
        ("trainer.learning_rate=0.01", ("trainer.learning_rate", 0.01)),
        ("trainer.precision=bf16", ("trainer.precision", "bf16")),
        ("backend.use_gpu=false", ("backend.use_gpu", False)),
        ("combiner.output_size = 64", ("combiner.output_size", 64)),
        ("trainer.optimizer={type: sgd, momentum: 0.9}", ("trainer.optimizer", {"type": "sgd", "momentum": 0.9})),
    ],
)
def test_parse_set(item, parsed):
    assert parse_set(item) == parsed


def test_overrides_apply_to_sections_and_features(loaded):
    out = with_overrides(
        loaded, [("trainer.learning_rate", 0.05), ("backend.strategy", "fsdp"), ("backend.num_workers", 3)]
    )
    assert out.config.trainer.learning_rate == 0.05
    assert out.config.backend.strategy == "fsdp"
    assert out.config.backend.num_workers == 3
    assert out.raw["trainer"]["learning_rate"] == 0.05
    assert loaded.config.trainer.learning_rate == 0.01  # the original is untouched


@pytest.mark.parametrize(
    ("sets", "line"),
    [
        ([("trainer.learnin_rate", 0.1)], "trainer.learnin_rate: Extra inputs are not permitted"),
        ([("trainer.learning_rate", "abc")], "trainer.learning_rate: Input should be a valid number"),
        ([("trainer.precision", "fp8")], "trainer.precision: Input should be 'fp32', 'bf16' or 'fp16'"),
        ([("trainer.learning_rate.x", 1)], "walks into 'trainer.learning_rate', which is a value"),
        ([("trainer..x", 1)], "has an empty part"),
    ],
)
def test_bad_overrides_are_one_line_errors(loaded, sets, line):
    with pytest.raises(ConfigError) as info:
        with_overrides(loaded, sets)
    assert line in info.value.one_line()
    assert "\n" not in info.value.one_line()


def test_set_without_equals_is_refused():
    with pytest.raises(ConfigError, match="must be PATH=VALUE"):
        parse_set("trainer.learning_rate")


def test_single_run_is_one_fifo_trial_of_the_base_configuration(loaded):
    one = single_run_sweep(loaded)
    hp = one.config.hyperopt
    assert one.config.name == "breast-cancer-tiny-train"
    assert hp.executor.num_samples == 1 and hp.scheduler.type == "fifo"
    assert list(hp.parameters) == ["trainer.learning_rate"]
    assert hp.parameters["trainer.learning_rate"].categories == [loaded.config.trainer.learning_rate]
    assert one.config.kfold is None and not one.config.report.enabled


def test_from_sweep_reads_the_best_configuration(loaded, tmp_path):
    with pytest.raises(DataError, match="no best_model/config.yaml"):
        best_config_of(tmp_path, loaded)
    (tmp_path / "best_model").mkdir()
    raw = {**loaded.raw, "trainer": {**loaded.raw["trainer"], "learning_rate": 0.0042}}
    (tmp_path / "best_model" / "config.yaml").write_text(yaml.safe_dump(raw))
    assert best_config_of(tmp_path, loaded).config.trainer.learning_rate == 0.0042


AWKWARD_SWEEP = """
name: awkward
dataset: {source: data.csv}
input_features:
  - {name: "x.y", type: number}
  - {name: x, type: number}
  - {name: "size (cm)", type: number}
  - {name: "a/b", type: category}
output_features:
  - {name: "label (y/n)", type: binary}
hyperopt:
  metric: loss
  output_feature: "label (y/n)"
  parameters:
    "a/b.encoder.embedding_size": {space: choice, categories: [4, 8]}
"""


@pytest.fixture
def awkward(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(AWKWARD_SWEEP)
    return load_sweep(path)


def _feature(loaded, name):
    return next(f for f in loaded.config.input_features if f.name == name)


@pytest.mark.parametrize(
    ("item", "name"),
    [
        ("x.y.encoder.type=dense", "x.y"),  # the longest feature name the path starts with
        ("'x.y'.encoder.type=dense", "x.y"),
        ('"x".encoder.type=dense', "x"),
        ("x.encoder.type=dense", "x"),
        ("size (cm).encoder.type=dense", "size (cm)"),
        ("a/b.encoder.embedding_size=3", "a/b"),
    ],
)
def test_set_reaches_features_named_as_written(awkward, item, name):
    out = with_overrides(awkward, [parse_set(item)])
    changed = [f.name for f in out.config.input_features if f != _feature(awkward, f.name)]
    assert changed == [name]


def test_set_with_an_unclosed_quote_is_one_line(awkward):
    with pytest.raises(ConfigError) as info:
        with_overrides(awkward, [parse_set('"x.y.encoder.type=dense')])
    assert "does not close" in info.value.one_line() and "fix:" in info.value.one_line()
