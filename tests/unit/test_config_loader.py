"""Sweep-file loader: every shipped sweep loads; every wrong file fails with one line that
names the file position, the key path, what is wrong and how to fix it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.errors import ConfigError

# A minimal valid sweep; the cases below edit it. Line numbers matter: sources are asserted.
BASE = """\
name: tiny
dataset:
  source: sklearn:digits
input_features:
  - {name: image, type: image}
  - {name: size, type: number}
output_features:
  - {name: label, type: category}
trainer:
  epochs: 4
  learning_rate: 0.01
hyperopt:
  goal: minimize
  metric: loss
  output_feature: label
  scheduler: {type: async_hyperband, grace_period: 1}
  parameters:
    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}
"""
PARAM_LR = "    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}\n"
TOP = "(top level)"


def edit(*pairs: tuple[str, str]) -> str:
    """BASE with each ``(old, new)`` replaced; ``old`` must occur exactly once."""
    text = BASE
    for old, new in pairs:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def param(line: str) -> str:
    """BASE with its one parameter replaced by ``line`` (indented under ``parameters:``)."""
    return edit((PARAM_LR, f"    {line}\n"))


def write(tmp_path: Path, text: str | bytes, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def load_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    return info.value


# ---------------------------------------------------------------------------- valid files
@pytest.mark.parametrize(
    "name", sorted(p.name for p in (Path(__file__).resolve().parents[2] / "sweeps").glob("*.yaml"))
)
def test_shipped_sweeps_load(repo_root, name):
    loaded = load_sweep(repo_root / "sweeps" / name)
    assert isinstance(loaded, LoadedSweep)
    assert isinstance(loaded.config, SweepConfig)
    assert loaded.base_dir == (repo_root / "sweeps").resolve()
    assert loaded.raw["name"] == loaded.config.name
    assert loaded.text == (repo_root / "sweeps" / name).read_text()


def test_base_is_valid(tmp_path):
    cfg = load_sweep(write(tmp_path, BASE)).config
    assert cfg.trainer.epochs == 4
    assert cfg.hyperopt.metric_key == "validation/label/loss"


def test_max_t_alone_sets_epochs(tmp_path):
    text = edit(("  epochs: 4\n", ""), ("grace_period: 1}", "grace_period: 1, max_t: 7}"))
    cfg = load_sweep(write(tmp_path, text)).config
    assert cfg.trainer.epochs == 7
    assert cfg.hyperopt.scheduler.max_t == 7


def test_max_t_equal_to_epochs_is_accepted(tmp_path):
    cfg = load_sweep(write(tmp_path, edit(("grace_period: 1}", "grace_period: 1, max_t: 4}")))).config
    assert cfg.trainer.epochs == cfg.hyperopt.scheduler.max_t == 4


# ---------------------------------------------------------------------------- wrong files
# (id, file text, err.key, substring of err.message, "line:col" of err.source or None for the bare path)
CASES = [
    ("unknown-top-level-key", BASE + "hyperopts: {}\n", "hyperopts", "unknown key 'hyperopts'", "19:1"),
    (
        "unknown-nested-key",
        edit(("  learning_rate: 0.01", "  learnin_rate: 0.01")),
        "trainer.learnin_rate",
        "unknown key 'learnin_rate'",
        "11:3",
    ),
    (
        "bad-literal",
        edit(("goal: minimize", "goal: maximise")),
        "hyperopt.goal",
        "Input should be 'minimize' or 'maximize', got 'maximise'",
        "13:3",
    ),
    ("wrong-type", edit(("epochs: 4", "epochs: ten")), "trainer.epochs", "valid integer", "10:3"),
    (
        "section-not-a-mapping",
        edit(("trainer:\n  epochs: 4\n  learning_rate: 0.01\n", "trainer: 5\n")),
        "trainer",
        "valid dictionary",
        "9:1",
    ),
    (
        "missing-required",
        edit(("dataset:\n  source: sklearn:digits\n", "")),
        "dataset",
        "required key is missing",
        "1:1",
    ),
    (
        "missing-parameters",
        edit(("  parameters:\n" + PARAM_LR, "")),
        "hyperopt.parameters",
        "required key is missing",
        "12:1",
    ),
    (
        "feature-named-like-section",
        edit(("{name: size, type: number}", "{name: trainer, type: number}")),
        "input_features[trainer].name",
        "'trainer' is reserved",
        "6:6",
    ),
    (
        "feature-name-starting-with-a-section",
        edit(("{name: size, type: number}", "{name: trainer.size, type: number}")),
        "input_features[trainer.size].name",
        "starts with 'trainer.'",
        "6:6",
    ),
    (
        "nested-encoder-value",
        edit(("{name: size, type: number}", "{name: size, type: number, encoder: {type: dense, num_layers: 0}}")),
        "input_features[size].encoder.num_layers",
        "greater than or equal to 1, got 0",
        "6:55",
    ),
    (
        "nested-encoder-typo",
        edit(("{name: size, type: number}", "{name: size, type: category, encoder: {embeding_size: 3}}")),
        "input_features[size].encoder.embeding_size",
        "unknown key 'embeding_size'",
        "6:44",
    ),
    (
        "kfold-k-too-small",
        edit(("hyperopt:\n", "kfold: {k: 1}\nhyperopt:\n")),
        "kfold.k",
        "greater than or equal to 2, got 1",
        "12:9",
    ),
    ("bad-sweep-name", edit(("name: tiny", "name: a/b")), "name", "must be letters, digits", "1:1"),
    (
        "unknown-feature-type",
        edit(("{name: size, type: number}", "{name: size, type: numeric}")),
        "input_features[size].type",
        "unknown type 'numeric'",
        "6:18",
    ),
    (
        "duplicate-feature-names",
        edit(("{name: size, type: number}", "{name: image, type: number}")),
        "input_features",
        "feature names must be unique, but ['image']",
        "4:1",
    ),
    (
        "duplicate-yaml-key",
        edit(("  epochs: 4\n", "  epochs: 4\n  epochs: 5\n")),
        None,
        "duplicate key 'epochs' (first at line 10)",
        "11:3",
    ),
    (
        "goal-contradicts-metric",
        edit(("goal: minimize", "goal: maximize")),
        "hyperopt.goal",
        "'loss' is better when smaller; set goal: minimize",
        "13:3",
    ),
    (
        "metric-not-for-output-type",
        edit(
            ("{name: label, type: category}", "{name: label, type: number}"),
            ("goal: minimize", "goal: maximize"),
            ("metric: loss", "metric: accuracy"),
        ),
        "hyperopt.metric",
        "'accuracy' is not reported for a number output; use one of ['loss', 'mae'",
        "14:3",
    ),
    (
        "output-feature-not-an-output",
        edit(("output_feature: label", "output_feature: size")),
        "hyperopt.output_feature",
        "'size' is not an output feature; use one of ['label', 'combined']",
        "15:3",
    ),
    (
        "split-test-refused",
        edit(("  metric: loss\n", "  metric: loss\n  split: test\n")),
        "hyperopt.split",
        "leaks it into the search",
        "15:3",
    ),
    (
        "split-fractions-sum",
        edit(
            (
                "  source: sklearn:digits\n",
                "  source: sklearn:digits\n  split: {train: 0.7, validation: 0.2, test: 0.2}\n",
            )
        ),
        "dataset.split",
        "must sum to 1, but got 1.1",
        "4:3",
    ),
    (
        "loguniform-lower-zero",
        param("trainer.learning_rate: {space: loguniform, lower: 0, upper: 0.1}"),
        'hyperopt.parameters."trainer.learning_rate"',
        "loguniform needs lower > 0",
        "18:5",
    ),
    (
        "uniform-lower-above-upper",
        param("combiner.dropout: {space: uniform, lower: 0.5, upper: 0.1}"),
        'hyperopt.parameters."combiner.dropout"',
        "lower < upper must hold, but got (lower=0.5, upper=0.1)",
        "18:5",
    ),
    (
        "randint-empty-range",
        param("combiner.num_fc_layers: {space: randint, lower: 3, upper: 3}"),
        'hyperopt.parameters."combiner.num_fc_layers"',
        "lower < upper must hold",
        "18:5",
    ),
    (
        "empty-categories",
        param("combiner.output_size: {space: choice, categories: []}"),
        'hyperopt.parameters."combiner.output_size".categories',
        "at least 1 item",
        "18:43",
    ),
    (
        "unknown-space-key",
        param("trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2, step: 2}"),
        'hyperopt.parameters."trainer.learning_rate".step',
        "unknown key 'step'",
        "18:78",
    ),
    (
        "unknown-space",
        param("trainer.learning_rate: {space: normal, lower: 0, upper: 1}"),
        'hyperopt.parameters."trainer.learning_rate".space',
        "unknown space 'normal'",
        "18:29",
    ),
    (
        "unknown-path-head",
        param("trainr.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}"),
        'hyperopt.parameters."trainr.learning_rate"',
        "did you mean 'trainer'?",
        "18:5",
    ),
    (
        "path-to-unknown-field",
        param("image.encoder.num_layer: {space: randint, lower: 1, upper: 4}"),
        'hyperopt.parameters."image.encoder.num_layer"',
        "unknown key 'num_layer'",
        "18:5",
    ),
    (
        "path-walks-into-value",
        param("trainer.epochs.x: {space: randint, lower: 1, upper: 4}"),
        'hyperopt.parameters."trainer.epochs.x"',
        "walks into 'trainer.epochs', which is a value",
        "18:5",
    ),
    (
        "value-out-of-schema-range",
        param("image.encoder.num_layers: {space: randint, lower: 1, upper: 10}"),
        'hyperopt.parameters."image.encoder.num_layers"',
        "value 9 is invalid for input_features[image].encoder.num_layers: Input should be less than or equal to 6",
        "18:5",
    ),
    (
        "category-wrong-type",
        param("combiner.output_size: {space: choice, categories: [8, big]}"),
        'hyperopt.parameters."combiner.output_size"',
        "value 'big' is invalid for combiner.output_size",
        "18:5",
    ),
    (
        "category-not-in-schema",
        param("trainer.optimizer.type: {space: choice, categories: [adam, rmsprops]}"),
        'hyperopt.parameters."trainer.optimizer.type"',
        "value 'rmsprops' is invalid for trainer.optimizer",
        "18:5",
    ),
    (
        "max-t-contradicts-epochs",
        edit(("grace_period: 1}", "grace_period: 1, max_t: 8}")),
        "hyperopt.scheduler.max_t",
        "max_t (8) contradicts trainer.epochs (4)",
        "16:55",
    ),
    (
        "grace-period-above-epochs",
        edit(("grace_period: 1}", "grace_period: 5}")),
        "hyperopt.scheduler.grace_period",
        "grace_period (5) must be <= trainer.epochs (4)",
        "16:38",
    ),
    ("yaml-tab", edit(("  epochs: 4\n", "\tepochs: 4\n")), None, "invalid YAML", "10:1"),
    (
        "yaml-unclosed-bracket",
        edit(("{name: size, type: number}", "{name: size, type: number")),
        None,
        "invalid YAML",
        "7:16",
    ),
    ("yaml-two-documents", BASE + "---\nname: other\n", None, "invalid YAML", "19:1"),
    ("empty-file", "", None, "the file is empty", None),
    ("comments-only", "# nothing here\n", None, "the file is empty", None),
    ("not-utf8", b"name: caf\xe9\n", None, "not UTF-8 text (byte 9)", None),
    (
        "top-level-list",
        "- name: tiny\n- dataset: x\n",
        None,
        "top level must be a mapping of sections, not a list",
        None,
    ),
    ("top-level-scalar", "just words\n", None, "not a str", None),
]


@pytest.mark.parametrize(("text", "key", "message", "where"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_wrong_file(tmp_path, text, key, message, where):
    path = write(tmp_path, text)
    err = load_error(path)
    assert err.key == key
    assert message in err.message
    assert err.source == (f"{path}:{where}" if where else str(path))
    line = err.one_line()
    assert "\n" not in line and "\r" not in line
    assert str(err) == line


def test_did_you_mean_top_level(tmp_path):
    err = load_error(write(tmp_path, BASE + "hyperopts: {}\n"))
    assert err.fix == "did you mean 'hyperopt'?"


def test_did_you_mean_nested(tmp_path):
    err = load_error(write(tmp_path, edit(("  learning_rate: 0.01", "  learnin_rate: 0.01"))))
    assert err.fix == "did you mean 'learning_rate'?"


def test_unknown_key_without_close_match_lists_allowed_keys(tmp_path):
    err = load_error(write(tmp_path, edit(("  learning_rate: 0.01", "  zzz: 0.01"))))
    assert err.fix.startswith("remove it (allowed keys: batch_size, ") and ", epochs, " in err.fix


def test_parameter_errors_say_how_to_fix(tmp_path):
    err = load_error(write(tmp_path, param("combiner.dropout: {space: uniform, lower: 0.5, upper: 0.1}")))
    assert err.fix == "correct the bounds"
    err = load_error(write(tmp_path, param("trainr.learning_rate: {space: uniform, lower: 0.1, upper: 0.5}")))
    assert "trainer.learning_rate" in err.fix


def test_misspelt_required_section_suggests_the_name(tmp_path):
    err = load_error(write(tmp_path, edit(("hyperopt:\n", "hyperopts:\n"))))
    assert (err.key, err.fix) == ("hyperopts", "did you mean 'hyperopt'?")
    assert err.source.endswith(":12:1")


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("epochs: 4", "epochs: 4\n  batch_size: big", "trainer.batch_size"),
        (
            "grace_period: 1}",
            "grace_period: 1}\n  executor: {max_concurrent_trials: lots}",
            "hyperopt.executor.max_concurrent_trials",
        ),
    ],
)
def test_scalar_union_error_names_the_key(tmp_path, old, new, key):
    assert load_error(write(tmp_path, edit((old, new)))).key == key


@pytest.mark.parametrize(
    ("old", "new", "key", "where"),
    [
        ("goal: minimize", "goal: maximize", "hyperopt.goal", "13:3"),
        ("output_feature: label", "output_feature: size", "hyperopt.output_feature", "15:3"),
        ("grace_period: 1}", "grace_period: 5}", "hyperopt.scheduler.grace_period", "16:38"),
    ],
)
def test_cross_field_error_points_at_the_key(tmp_path, old, new, key, where):
    path = write(tmp_path, edit((old, new)))
    err = load_error(path)
    assert (err.key, err.source) == (key, f"{path}:{where}")


def test_file_not_found(tmp_path):
    path = tmp_path / "missing.yaml"
    err = load_error(path)
    assert (err.source, err.key, err.message) == (str(path), None, "file not found")


def test_directory(tmp_path):
    err = load_error(tmp_path)
    assert (err.source, err.message) == (str(tmp_path), "is a folder, not a sweep file")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    path = write(tmp_path, BASE)
    path.chmod(0)
    try:
        assert load_error(path).message == "permission denied"
    finally:
        path.chmod(0o600)


def test_load_accepts_str_path(tmp_path):
    assert load_sweep(str(write(tmp_path, BASE))).config.name == "tiny"


@pytest.mark.parametrize(
    ("line", "message", "fix"),
    [
        (
            "image.preprocessing.scale: {space: choice, categories: [8, 16]}",
            "'image.preprocessing.scale' cannot be searched: preprocessing is fitted once per sweep",
            "set it in the config instead of hyperopt.parameters",
        ),
        ("size.column: {space: choice, categories: [a, b]}", "cannot be searched: the data is prepared once", None),
        ("label.type: {space: choice, categories: [number, category]}", "cannot be searched", None),
        ("trainer.epochs: {space: randint, lower: 2, upper: 4}", "it sets the scheduler's max_t", None),
        (
            "combiner.output_size: {space: uniform, lower: 8, upper: 16}",
            "is invalid for combiner.output_size",
            "use an integer space (randint, qrandint, lograndint) for an integer field",
        ),
    ],
)
def test_parameters_that_cannot_be_searched_or_do_not_fit_the_field(tmp_path, line, message, fix):
    err = load_error(write(tmp_path, param(line)))
    assert message in err.message
    assert err.key.startswith("hyperopt.parameters")
    if fix:
        assert err.fix == fix


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("? [a, b]\n: 1\n", "a key must be a plain value"),
        ("x: &a [*a]\n", "expands to over 100000 values through YAML aliases"),
        ("trainer: &a {x: *a}\n", "expands to over 100000 values through YAML aliases"),
    ],
)
def test_odd_yaml_is_a_config_error_not_a_traceback(tmp_path, text, message):
    assert message in load_error(write(tmp_path, text)).message


# ---------------------------------------------------------------------------- Ludwig model configs
#: BASE without its name, dataset and hyperopt section: a Ludwig model config.
MODEL = BASE.split("hyperopt:")[0].replace("name: tiny\ndataset:\n  source: sklearn:digits\n", "")


def test_a_model_config_without_hyperopt_loads_for_training_alone(tmp_path):
    loaded = load_sweep(write(tmp_path, MODEL, "my model.yaml"), dataset=tmp_path / "rows.csv", search=False)
    assert not loaded.searched
    assert loaded.config.name == "my-model"
    assert loaded.config.dataset.source == str((tmp_path / "rows.csv").resolve())
    hp = loaded.config.hyperopt  # one point: the configured learning rate, Ludwig's combined loss
    assert hp.metric_key == "validation/combined/loss" and hp.goal == "minimize"
    assert list(hp.parameters) == ["trainer.learning_rate"] and hp.num_trials == 1
    assert hp.parameters["trainer.learning_rate"].probe_values() == [0.01]


def test_a_sweep_of_a_file_without_hyperopt_says_what_to_add(tmp_path):
    from ludwig_hpo.config.loader import SEARCH_EXAMPLE

    err = load_error(write(tmp_path, MODEL + "dataset: {source: sklearn:digits}\n"))
    assert err.key == "hyperopt" and "a sweep needs a hyperopt section" in err.message
    assert SEARCH_EXAMPLE in err.fix and "hpo train" in err.fix
    assert len(str(err).splitlines()) == 1
    assert load_sweep(write(tmp_path, BASE)).searched  # a sweep file is searched


def test_the_model_is_checked_before_the_missing_hyperopt_section(tmp_path):
    err = load_error(write(tmp_path, MODEL.replace("epochs: 4", "epochs: ten") + "dataset: {source: x.csv}\n"))
    assert err.key == "trainer.epochs"


@pytest.mark.parametrize("kind", ["gbm"])
def test_another_model_type_is_the_first_error_not_its_unknown_keys(tmp_path, kind):
    text = f"model_type: {kind}\n" + BASE + "adapter: {type: lora}\nbase_model: x\nprompt: {template: hi}\n"
    err = load_error(write(tmp_path, text))
    assert (err.key, err.message) == ("model_type", f"model_type {kind} is not supported yet")
    assert err.source.endswith(":1:1")


def test_model_type_ecd_and_ludwig_version_are_accepted(tmp_path):
    cfg = load_sweep(write(tmp_path, "model_type: ecd\nludwig_version: 0.10.4\n" + BASE)).config
    assert cfg.model_type == "ecd"


@pytest.mark.parametrize("key", ["base_model", "prompt", "adapter", "quantization", "generation"])
def test_a_ludwig_llm_key_in_an_ecd_file_names_model_type_llm(tmp_path, key):
    err = load_error(write(tmp_path, BASE + f"{key}: {{x: 1}}\nbogus_key: 1\n"))
    assert err.key == key and "is a key of model_type llm" in err.message and "model_type: llm" in err.fix


@pytest.mark.parametrize("section", ["input_features", "output_features"])
def test_an_unsupported_feature_type_comes_before_unknown_keys(tmp_path, section):
    kind = "audio" if section == "input_features" else "text"  # text inputs are trained; text outputs are not
    text = edit(
        ("  learning_rate: 0.01\n", "  learning_rate: 0.01\n  not_a_trainer_key: 1\n"),
        (f"{section}:\n", f"{section}:\n  - {{name: review, type: {kind}, encoder: {{type: parallel_cnn}}}}\n"),
    )
    err = load_error(write(tmp_path, text + "unknown_top: 1\n"))
    assert err.key.startswith(f"{section}[review]") and "is not supported yet" in err.message and kind in err.message


def test_a_model_config_is_scored_as_its_trainer_selects_the_best_epoch(tmp_path):
    text = MODEL.replace("  epochs: 4\n", "  epochs: 4\n  validation_field: label\n  validation_metric: accuracy\n")
    hp = load_sweep(write(tmp_path, text), dataset="rows.csv", search=False).config.hyperopt
    assert (hp.metric_key, hp.goal) == ("validation/label/accuracy", "maximize")
