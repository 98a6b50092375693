"""Ludwig's legacy spellings upgraded as Ludwig upgrades them (``config/upgrade.py``): each
upgrade's result, its one warning naming the old and the new key, the input left unchanged, and
errors after an upgrade located where the old key was written."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.upgrade import upgrade
from ludwig_hpo.errors import ConfigError

FEATURES = {
    "input_features": [{"name": "x", "type": "number"}],
    "output_features": [{"name": "y", "type": "binary"}],
}
SEARCH = {"parameters": {"trainer.learning_rate": {"space": "choice", "categories": [0.01]}}}


def _one(raw: dict, *words: str) -> dict:
    """The upgraded mapping of ``raw``, checking it gave exactly one warning naming ``words``."""
    before = copy.deepcopy(raw)
    out, warnings = upgrade(raw)
    assert raw == before  # pure
    assert len(warnings) == 1, warnings
    for w in words:
        assert w in warnings[0], warnings
    return out


def test_a_current_config_is_unchanged_and_silent():
    raw = {**FEATURES, "trainer": {"epochs": 2}, "hyperopt": SEARCH, "combiner": {"type": "concat"}}
    assert upgrade(raw) == (raw, [])


def test_training_is_trainer():
    out = _one({**FEATURES, "training": {"epochs": 3}}, "training:", "trainer:")
    assert out["trainer"] == {"epochs": 3} and "training" not in out


def test_numerical_is_number():
    raw = {"input_features": [{"name": "x", "type": "numerical"}], "output_features": []}
    assert _one(raw, "numerical", "number")["input_features"][0]["type"] == "number"


def test_feature_level_encoder_options_move_under_encoder():
    raw = {"input_features": [{"name": "c", "type": "category", "embedding_size": 4, "dropout": 0.1}]}
    out = _one(raw, "embedding_size", "encoder")
    assert out["input_features"][0] == {
        "name": "c",
        "type": "category",
        "encoder": {"embedding_size": 4, "dropout": 0.1},
    }


def test_an_encoder_written_as_a_string_is_its_type():
    raw = {"input_features": [{"name": "x", "type": "number", "encoder": "dense"}]}
    assert _one(raw, "encoder: dense", "{type: dense}")["input_features"][0]["encoder"] == {"type": "dense"}


def test_feature_level_decoder_options_take_ludwigs_fc_names():
    raw = {"output_features": [{"name": "y", "type": "number", "num_fc_layers": 2, "fc_size": 8, "dropout": 0.1}]}
    out = _one(raw, "fc_size -> decoder.fc_output_size", "dropout -> decoder.fc_dropout")
    assert out["output_features"][0]["decoder"] == {"num_fc_layers": 2, "fc_output_size": 8, "fc_dropout": 0.1}


def test_bias_is_use_bias_in_the_decoder_and_its_fc_stack():
    out, warnings = upgrade({"output_features": [{"name": "y", "type": "binary", "bias": False}]})
    assert out["output_features"][0]["decoder"] == {"use_bias": False, "fc_use_bias": False}
    assert any("bias: is Ludwig's old name for" in w and "use_bias" in w for w in warnings)


def test_fc_size_is_output_size_in_combiner_and_its_layer_list():
    out, warnings = upgrade({"combiner": {"type": "concat", "fc_size": 32, "fc_layers": [{"fc_size": 8}]}})
    assert out["combiner"] == {"type": "concat", "output_size": 32, "fc_layers": [{"output_size": 8}]}
    assert len(warnings) == 2 and all("fc_size" in w and "output_size" in w for w in warnings)


def test_a_new_key_written_too_wins_over_the_old_one():
    out, warnings = upgrade({"combiner": {"fc_size": 32, "output_size": 16}})
    assert out["combiner"] == {"output_size": 16}
    assert len(warnings) == 1 and "also set" in warnings[0]


def test_type_preprocessing_moves_to_defaults():
    raw = {"preprocessing": {"numerical": {"normalization": "minmax"}, "category": {"most_common": 5}}}
    out, warnings = upgrade(raw)
    assert "preprocessing" not in out
    assert out["defaults"] == {
        "number": {"preprocessing": {"normalization": "minmax"}},
        "category": {"preprocessing": {"most_common": 5}},
    }
    assert len(warnings) == 2 and "defaults.number.preprocessing" in warnings[0]


@pytest.mark.parametrize(
    ("legacy", "split"),
    [
        ({"stratify": "y"}, {"type": "stratify", "column": "y"}),
        ({"split_probabilities": [0.8, 0.1, 0.1]}, {"probabilities": [0.8, 0.1, 0.1]}),
        ({"force_split": True}, {"type": "random"}),
    ],
)
def test_split_keys_become_preprocessing_split(legacy, split):
    assert _one({"preprocessing": legacy}, "preprocessing.")["preprocessing"] == {"split": split}


def test_missing_value_strategies_backfill_and_pad():
    raw = {
        "input_features": [
            {"name": "a", "type": "number", "preprocessing": {"missing_value_strategy": "backfill"}},
            {"name": "b", "type": "number", "preprocessing": {"missing_value_strategy": "pad"}},
        ]
    }
    out, warnings = upgrade(raw)
    assert [f["preprocessing"]["missing_value_strategy"] for f in out["input_features"]] == ["bfill", "ffill"]
    assert len(warnings) == 2


def test_sequence_preprocessing_names_of_ludwig_0_4():
    raw = {"input_features": [{"name": "s", "type": "sequence", "preprocessing": {"word_tokenizer": "space"}}]}
    assert _one(raw, "word_tokenizer", "tokenizer")["input_features"][0]["preprocessing"] == {"tokenizer": "space"}


def test_trainer_legacy_keys():
    out, warnings = upgrade(
        {
            "trainer": {
                "eval_batch_size": 0,
                "increase_batch_size_on_plateau_max": 256,
                "type": "trainer",
                "decay": True,
                "decay_rate": 0.9,
                "reduce_learning_rate_on_plateau": 2,
                "learning_rate_warmup_epochs": 1,
            }
        }
    )
    assert out["trainer"] == {
        "max_batch_size": 256,
        "learning_rate_scheduler": {
            "decay": "exponential",
            "decay_rate": 0.9,
            "reduce_on_plateau": 2,
            "warmup_evaluations": 1,
        },
    }
    assert len(warnings) == 7
    assert any("learning_rate_warmup_epochs" in w and "warmup_evaluations" in w for w in warnings)


def test_hyperopt_sampler_and_executor_of_old_ludwig():
    raw = {
        "hyperopt": {
            "parameters": {"training.learning_rate": {"space": "loguniform", "lower": 0.001, "upper": 0.1}},
            "sampler": {"type": "ray", "num_samples": 4, "scheduler": {"type": "fifo"}},
            "executor": {"type": "serial"},
        }
    }
    out, warnings = upgrade(raw)
    assert out["hyperopt"] == {
        "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 0.001, "upper": 0.1}},
        "executor": {"type": "ray", "num_samples": 4, "scheduler": {"type": "fifo"}},
        "search_alg": {"type": "variant_generator"},
    }
    assert len(warnings) == 3


def test_search_alg_under_executor_or_as_a_string():
    out = _one({"hyperopt": {"executor": {"search_alg": "optuna"}}}, "executor.search_alg", "hyperopt.search_alg")
    assert out["hyperopt"] == {"executor": {}, "search_alg": {"type": "optuna"}}


def test_parameter_paths_follow_the_moved_keys():
    raw = {
        "input_features": [{"name": "c", "type": "category"}],
        "output_features": [{"name": "y", "type": "number"}],
        "hyperopt": {"parameters": {"c.embedding_size": {}, "y.fc_size": {}, "combiner.fc_size": {}}},
    }
    out, warnings = upgrade(raw)
    assert list(out["hyperopt"]["parameters"]) == [
        "c.encoder.embedding_size",
        "y.decoder.fc_output_size",
        "combiner.output_size",
    ]
    assert len(warnings) == 3


def test_scalar_class_weights_are_no_weights():
    raw = {"output_features": [{"name": "y", "type": "category", "loss": {"class_weights": 1}}]}
    assert _one(raw, "class_weights")["output_features"][0]["loss"] == {}


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "data.csv").write_text("x,y\n" + "".join(f"{i / 10},{i % 2}\n" for i in range(20)))
    path = tmp_path / "legacy.yaml"
    path.write_text(text)
    return path


def test_loaded_sweep_carries_the_warnings_and_trains_the_upgraded_config(tmp_path):
    path = _write(
        tmp_path,
        "input_features: [{name: x, type: numerical}]\n"
        "output_features: [{name: y, type: binary}]\n"
        "training: {epochs: 3, learning_rate: 0.02}\n"
        "hyperopt: {parameters: {training.learning_rate: {space: choice, categories: [0.01, 0.02]}}}\n",
    )
    loaded = load_sweep(path, dataset=tmp_path / "data.csv")
    assert loaded.config.trainer.epochs == 3 and loaded.config.input_features[0].type == "number"
    assert list(loaded.config.hyperopt.parameters) == ["trainer.learning_rate"]
    assert [w.split(": ", 1)[0] for w in loaded.warnings] == [f"{path}:3:1", f"{path}:1:28", f"{path}:4:25"]


def test_an_error_under_a_moved_key_points_where_the_old_key_was_written(tmp_path):
    path = _write(
        tmp_path,
        "input_features: [{name: x, type: number}]\n"
        "output_features: [{name: y, type: binary}]\n"
        "training:\n"
        "  epochs: 2\n"
        "  learning_rate: -1\n"
        "hyperopt: {parameters: {trainer.epochs: {space: choice, categories: [1]}}}\n",
    )
    with pytest.raises(ConfigError) as info:
        load_sweep(path, dataset=tmp_path / "data.csv")
    assert info.value.source == f"{path}:5:3"
    assert info.value.key == "trainer.learning_rate"


def test_an_error_in_a_moved_encoder_option_points_at_the_feature_level_key(tmp_path):
    path = _write(
        tmp_path,
        "input_features:\n"
        "  - name: x\n"
        "    type: number\n"
        "    encoder: dense\n"
        "    output_size: 0\n"
        "output_features: [{name: y, type: binary}]\n"
        "hyperopt: {parameters: {trainer.learning_rate: {space: choice, categories: [0.01]}}}\n",
    )
    with pytest.raises(ConfigError) as info:
        load_sweep(path, dataset=tmp_path / "data.csv")
    assert info.value.source == f"{path}:5:5", info.value.one_line()
    assert info.value.key == "input_features[x].encoder.output_size"


def test_hpo_sweep_and_train_print_each_warning_once_on_stderr(tmp_path, capsys):
    from ludwig_hpo import cli

    path = _write(
        tmp_path,
        "input_features: [{name: x, type: numerical}]\n"
        "output_features: [{name: y, type: binary}]\n"
        "training: {epochs: 1}\n"
        "hyperopt: {parameters: {trainer.learning_rate: {space: choice, categories: [0.01]}}}\n",
    )
    loaded = load_sweep(path, dataset=tmp_path / "data.csv")
    cli._with_cli_overrides(loaded, None, ["trainer.epochs=2"])  # what `hpo sweep` and `hpo train` call
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert lines == [f"warning: {w}" for w in loaded.warnings] and len(lines) == 2
    assert "warning" not in captured.out


@pytest.mark.parametrize("name", ["titanic_legacy.yaml", "wine_quality_legacy.yaml", "insurance_legacy_decoder.yaml"])
def test_an_upgraded_config_upgrades_to_itself_silently(name):
    from ludwig_hpo.config.reader import read_sweep_file

    raw = read_sweep_file(Path(__file__).resolve().parents[1] / "fixtures" / "ludwig" / name).raw
    once, warnings = upgrade(raw)
    assert warnings
    assert upgrade(once) == (once, [])
