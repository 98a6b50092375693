"""Dotted parameter paths applied to the raw sweep mapping: sections, nested blocks,
feature encoders; values copied, the original untouched; malformed paths refused."""

from __future__ import annotations

import copy

import pytest

from ludwig_hpo.config import PathError, SweepConfig, apply_params, resolve_trial_config
from ludwig_hpo.config.paths import set_path, split_path
from ludwig_hpo.errors import ConfigError


@pytest.fixture
def raw(sweep_dict):
    return sweep_dict(
        [{"name": "image", "type": "image"}, {"name": "size", "type": "number"}, {"name": "color", "type": "category"}],
        [{"name": "label", "type": "category"}],
        trainer={"epochs": 3, "optimizer": {"type": "adam"}},
    )


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ("trainer.learning_rate", 0.05, ("trainer", "learning_rate")),
        ("trainer.epochs", 7, ("trainer", "epochs")),
        ("trainer.optimizer.type", "sgd", ("trainer", "optimizer", "type")),
        ("trainer.optimizer.weight_decay", 1e-4, ("trainer", "optimizer", "weight_decay")),
        ("combiner.output_size", 32, ("combiner", "output_size")),
        ("combiner.num_fc_layers", 0, ("combiner", "num_fc_layers")),
        ("image.encoder.num_layers", 3, ("input_features", 0, "encoder", "num_layers")),
        ("size.encoder.type", "dense", ("input_features", 1, "encoder", "type")),
        ("size.preprocessing.normalization", "minmax", ("input_features", 1, "preprocessing", "normalization")),
        ("color.encoder.embedding_size", 4, ("input_features", 2, "encoder", "embedding_size")),
        ("label.decoder.num_fc_layers", 2, ("output_features", 0, "decoder", "num_fc_layers")),
        ("label.loss_weight", 0.5, ("output_features", 0, "loss_weight")),
    ],
)
def test_apply_params_sets_value(raw, path, value, where):
    before = copy.deepcopy(raw)
    out = apply_params(raw, {path: value})
    node = out
    for step in where:
        node = node[step]
    assert node == value
    assert raw == before, "the original raw mapping is untouched"


def test_missing_section_is_created(raw):
    assert "combiner" not in raw
    out = apply_params(raw, {"combiner.dropout": 0.2})
    assert out["combiner"] == {"dropout": 0.2}
    assert "combiner" not in raw


def test_null_section_is_replaced(raw):
    raw["combiner"] = None
    assert apply_params(raw, {"combiner.output_size": 8})["combiner"] == {"output_size": 8}


@pytest.mark.parametrize(
    "value",
    [
        [16, 32, 64],
        {"type": "sgd", "momentum": 0.5},
        {"type": "dense", "num_layers": 2, "output_size": 8},
        [{"a": [1, 2]}, {"b": None}],
    ],
)
def test_structured_values_are_deep_copies(raw, value):
    original = copy.deepcopy(value)
    out = apply_params(raw, {"trainer.x": value})
    assert out["trainer"]["x"] == original
    assert out["trainer"]["x"] is not value
    value.clear()  # the caller reusing its value (as Optuna's categories are) does not reach the config
    assert out["trainer"]["x"] == original


def test_whole_block_replaced(raw):
    out = apply_params(raw, {"trainer.optimizer": {"type": "sgd", "momentum": 0.5}})
    assert out["trainer"]["optimizer"] == {"type": "sgd", "momentum": 0.5}
    assert raw["trainer"]["optimizer"] == {"type": "adam"}


def test_several_params_applied_in_order(raw):
    out = apply_params(raw, {"trainer.optimizer": {"type": "sgd"}, "trainer.optimizer.momentum": 0.1})
    assert out["trainer"]["optimizer"] == {"type": "sgd", "momentum": 0.1}


def test_nested_original_untouched(raw):
    before = copy.deepcopy(raw)
    out = apply_params(raw, {"image.encoder.channels": 4, "trainer.optimizer.type": "sgd"})
    assert out["input_features"][0]["encoder"] == {"channels": 4}
    assert raw == before
    assert out["input_features"] is not raw["input_features"]


def test_set_path_mutates_in_place(raw):
    set_path(raw, "trainer.seed", 5)
    assert raw["trainer"]["seed"] == 5


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("trainr.learning_rate", "did you mean 'trainer'?"),
        ("imag.encoder.num_layers", "did you mean 'image'?"),
        (
            "zzzz.x",
            "valid starts are ['adapter', 'color', 'combiner', 'defaults', 'generation', 'image', 'label', 'size', 'trainer']",
        ),
        ("hyperopt.goal", "neither a section"),
        ("backend.num_workers", "neither a section"),
        ("trainer.epochs.x", "walks into 'trainer.epochs', which is a value, not a section"),
        ("image.type.x", "walks into 'image.type', which is a value"),
        ("trainer.optimizer.type.x", "walks into 'trainer.optimizer.type'"),
        ("trainer", "must be '<section or feature>.<field>"),
        ("", "must be '<section or feature>.<field>"),
        ("trainer.", "must be '<section or feature>.<field>"),
        (".learning_rate", "must be '<section or feature>.<field>"),
        ("trainer..learning_rate", "must be '<section or feature>.<field>"),
    ],
)
def test_bad_paths(raw, path, message):
    before = copy.deepcopy(raw)
    with pytest.raises(PathError) as info:
        apply_params(raw, {path: 1})
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)
    assert raw == before


def test_resolve_trial_config_applies_and_validates(raw):
    cfg = resolve_trial_config(
        raw, {"trainer.learning_rate": 0.05, "image.encoder.num_layers": 3, "trainer.optimizer.type": "sgd"}
    )
    assert isinstance(cfg, SweepConfig)
    assert cfg.trainer.learning_rate == 0.05
    assert cfg.trainer.optimizer.type == "sgd"
    assert cfg.input_features[0].encoder.num_layers == 3
    assert raw["trainer"]["optimizer"] == {"type": "adam"}


def test_resolve_trial_config_with_block_value(raw):
    cfg = resolve_trial_config(raw, {"size.encoder": {"type": "dense", "num_layers": 2, "output_size": 8}})
    assert cfg.input_features[1].encoder.type == "dense"
    assert cfg.input_features[1].encoder.output_size == 8


def test_resolve_trial_config_invalid_value(raw):
    with pytest.raises(ConfigError) as info:
        resolve_trial_config(raw, {"image.encoder.num_layers": 9})
    err = info.value
    assert err.key.endswith("input_features[image].encoder.num_layers")
    assert "less than or equal to 6" in err.message
    assert "\n" not in err.one_line()


def test_resolve_trial_config_bad_path(raw):
    with pytest.raises(ConfigError) as info:
        resolve_trial_config(raw, {"nope.x": 1})
    assert info.value.key == "hyperopt.parameters"
    assert "neither a section" in info.value.message


def test_overrides_may_start_with_any_top_level_key(raw):
    set_path(raw, "backend.num_workers", 3, any_top_level=True)
    set_path(raw, "name", "renamed", any_top_level=True)
    set_path(raw, "image.encoder.channels", 8, any_top_level=True)
    assert raw["backend"]["num_workers"] == 3 and raw["name"] == "renamed"
    assert raw["input_features"][0]["encoder"] == {"channels": 8}
    with pytest.raises(PathError, match="neither a section"):
        set_path(raw, "backend.num_workers", 3)


@pytest.mark.parametrize("any_top_level", [False, True])
def test_both_grammars_refuse_empty_parts_and_walking_into_values(raw, any_top_level):
    with pytest.raises(PathError, match="has an empty part"):
        set_path(raw, "trainer..x", 1, any_top_level=any_top_level)
    with pytest.raises(PathError, match="walks into 'trainer.epochs', which is a value") as info:
        set_path(raw, "trainer.epochs.x", 1, any_top_level=any_top_level)
    assert info.value.fix == "end the path at a field"


# ---------------------------------------------------------------------------- names as written
#: Feature names a CSV header holds: dots, slashes, brackets, quotes, unicode, spaces.
AWKWARD_FEATURES = ["size (cm)", "a/b", "x.y", "width [px]", "naïve", "日本", "a=b", '"q"', "<t>", "two words"]


@pytest.fixture
def awkward(sweep_dict):
    return sweep_dict(
        [{"name": n, "type": "number"} for n in AWKWARD_FEATURES] + [{"name": "x", "type": "number"}],
        [{"name": "label (y/n)", "type": "binary"}],
    )


@pytest.mark.parametrize("name", AWKWARD_FEATURES)
def test_a_path_walks_into_a_feature_named_as_written(awkward, name):
    out = apply_params(awkward, {f"{name}.encoder.type": "dense"})
    feat = next(f for f in out["input_features"] if f["name"] == name)
    assert feat["encoder"] == {"type": "dense"}
    assert SweepConfig.model_validate(out)  # the config with such names validates


def test_the_longest_feature_name_wins_and_quotes_name_a_feature_exactly(awkward):
    out = apply_params(awkward, {"x.y.encoder.type": "dense"})
    assert next(f for f in out["input_features"] if f["name"] == "x.y")["encoder"] == {"type": "dense"}
    assert "encoder" not in next(f for f in out["input_features"] if f["name"] == "x")
    for quoted in ('"x.y".encoder.output_size', "'x.y'.encoder.output_size"):
        out = apply_params(awkward, {"x.y.encoder.type": "dense", quoted: 8})
        assert next(f for f in out["input_features"] if f["name"] == "x.y")["encoder"]["output_size"] == 8
    out = apply_params(awkward, {'"x".encoder.type': "dense"})  # feature x, though x.y exists
    assert next(f for f in out["input_features"] if f["name"] == "x")["encoder"] == {"type": "dense"}


@pytest.mark.parametrize(
    ("path", "features", "parts"),
    [
        ("x.y.encoder.type", ["x", "x.y"], ["x.y", "encoder", "type"]),
        ("x.encoder.type", ["x", "x.y"], ["x", "encoder", "type"]),
        ('"x.y".encoder.type', [], ["x.y", "encoder", "type"]),
        ("'a.b.c'.x", [], ["a.b.c", "x"]),
        ('"name"', [], ["name"]),
        ("trainer.learning_rate", ["x.y"], ["trainer", "learning_rate"]),
        ("a/b.encoder.embedding_size", ["a/b"], ["a/b", "encoder", "embedding_size"]),
    ],
)
def test_split_path(path, features, parts):
    assert split_path(path, features) == parts


def test_an_unclosed_quote_is_a_path_error(awkward):
    with pytest.raises(PathError, match="does not close"):
        apply_params(awkward, {'"x.y.encoder.type': "dense"})
