"""Parameter paths beyond sections and features: ``defaults.<type>.<section>.<field>``,
the ``"."`` key of partial config blocks, fields that exist only under a sampled encoder
type; Ludwig's fixed split column."""

from __future__ import annotations

import numpy as np
import pytest

from ludwig_hpo.config import load_sweep, resolve_trial_config
from ludwig_hpo.config.paths import apply_params, deep_merge
from ludwig_hpo.data.split import fixed_split_indices
from ludwig_hpo.errors import ConfigError, DataError

BASE = """\
name: t
dataset: {source: sklearn:breast_cancer}
input_features:
  - {name: mean_radius, type: number}
  - {name: mean_texture, type: number, encoder: {type: dense, output_size: 4}}
output_features:
  - {name: malignant, type: binary}
defaults:
  number: {encoder: {type: dense, num_layers: 2}}
trainer: {epochs: 2}
hyperopt:
  goal: minimize
  output_feature: malignant
  parameters:
"""


def load(tmp_path, params: str, extra: str = ""):
    path = tmp_path / "s.yaml"
    path.write_text(BASE + params + extra)
    return load_sweep(path)


def test_defaults_apply_to_every_feature_of_the_type_and_feature_values_win(tmp_path):
    loaded = load(tmp_path, "    defaults.number.encoder.output_size: {space: choice, categories: [8, 32]}\n")
    cfg = resolve_trial_config(loaded.raw, {"defaults.number.encoder.output_size": 32})
    radius, texture = cfg.input_features
    assert (radius.encoder.type, radius.encoder.num_layers, radius.encoder.output_size) == ("dense", 2, 32)
    assert (texture.encoder.num_layers, texture.encoder.output_size) == (2, 4)


def test_root_blocks_deep_merge_and_dotted_parameters_win(tmp_path):
    loaded = load(
        tmp_path,
        """\
    ".":
      space: choice
      categories:
        - {trainer: {learning_rate: 0.1, optimizer: {type: sgd}}, combiner: {num_fc_layers: 3}}
        - {trainer: {optimizer: {type: adamw, weight_decay: 0.01}}}
    trainer.learning_rate: {space: choice, categories: [0.002]}
""",
    )
    blocks = loaded.config.hyperopt.parameters["."].categories
    cfg = resolve_trial_config(loaded.raw, {".": blocks[0], "trainer.learning_rate": 0.002})
    assert (cfg.trainer.learning_rate, cfg.trainer.optimizer.type, cfg.combiner.num_fc_layers) == (0.002, "sgd", 3)
    cfg = resolve_trial_config(loaded.raw, {".": blocks[1], "trainer.learning_rate": 0.002})
    assert (cfg.trainer.optimizer.type, cfg.trainer.optimizer.weight_decay, cfg.trainer.epochs) == ("adamw", 0.01, 2)


def test_a_field_that_exists_only_under_a_sampled_encoder_type(tmp_path):
    # loads (num_layers exists for the dense choice), and is left out of a passthrough trial
    text = (
        BASE.replace("defaults:\n  number: {encoder: {type: dense, num_layers: 2}}\n", "")
        + "    mean_radius.encoder.type: {space: choice, categories: [passthrough, dense]}\n"
        + "    mean_radius.encoder.num_layers: {space: randint, lower: 1, upper: 3}\n"
    )
    (tmp_path / "s.yaml").write_text(text)
    loaded = load_sweep(tmp_path / "s.yaml")
    dense = resolve_trial_config(loaded.raw, {"mean_radius.encoder.type": "dense", "mean_radius.encoder.num_layers": 2})
    assert dense.input_features[0].encoder.num_layers == 2
    plain = resolve_trial_config(
        loaded.raw, {"mean_radius.encoder.type": "passthrough", "mean_radius.encoder.num_layers": 2}
    )
    assert plain.input_features[0].encoder.type == "passthrough"


def test_an_out_of_range_sampled_value_is_still_an_error(tmp_path):
    loaded = load(tmp_path, "    combiner.dropout: {space: uniform, lower: 0.0, upper: 0.5}\n")
    with pytest.raises(ConfigError, match="combiner.dropout"):
        resolve_trial_config(loaded.raw, {"combiner.dropout": 1.5})


def test_deep_merge_copies_and_replaces_lists():
    base = {"a": {"b": 1, "l": [1, 2]}, "k": 0}
    over = {"a": {"l": [3]}, "n": {"x": 1}}
    out = deep_merge(base, over)
    assert out == {"a": {"b": 1, "l": [3]}, "k": 0, "n": {"x": 1}}
    out["a"]["l"].append(9)
    assert over["a"]["l"] == [3] and base["a"]["l"] == [1, 2]


def test_list_and_block_values_reach_the_config_intact():
    raw = {"trainer": {}, "combiner": {}}
    out = apply_params(raw, {"trainer.optimizer": {"type": "sgd", "momentum": 0.5}, "combiner.sizes": [16, 8]})
    assert out["trainer"]["optimizer"] == {"type": "sgd", "momentum": 0.5}
    assert out["combiner"]["sizes"] == [16, 8]


@pytest.mark.parametrize(
    ("values", "want"),
    [
        ([0, 1, 2, 0, 2], {"train": [0, 3], "validation": [1], "test": [2, 4]}),
        ([0.0, 1.0, 2.0], {"train": [0], "validation": [1], "test": [2]}),
        (["0", "1", "2", "0"], {"train": [0, 3], "validation": [1], "test": [2]}),
    ],
)
def test_fixed_split_column(values, want):
    got = fixed_split_indices(np.array(values, dtype=object))
    assert {k: v.tolist() for k, v in got.items()} == want


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            [0, 1, 3],
            "the split column holds 3 at data row 3 (1 such rows); it may hold only 0 (train), 1 (validation), 2 (test)",
        ),
        ([0, None, 2, 1], "the split column holds None at data row 2"),
        ([0, 0, 2], "the split column assigns no row to validation (1)"),
    ],
)
def test_fixed_split_column_errors(values, message):
    with pytest.raises(DataError) as info:
        fixed_split_indices(np.array(values, dtype=object))
    assert message in info.value.message


# ---------------------------------------------------------------------------- feature names as written
def _awkward_sweep(tmp_path, inputs: str, params: str = "", output: str = '"label (y/n)"'):
    path = tmp_path / "awkward.yaml"
    path.write_text(
        f"name: t\ndataset: {{source: data.csv}}\ninput_features:\n{inputs}"
        f"output_features:\n  - {{name: {output}, type: binary}}\n"
        f"hyperopt:\n  output_feature: {output}\n  parameters:\n"
        + (params or "    trainer.learning_rate: {space: choice, categories: [0.01, 0.1]}\n")
    )
    return path


def test_dotted_feature_names_are_searched_and_fixed_fields_are_still_refused(tmp_path):
    inputs = '  - {name: "x.y", type: number}\n  - {name: x, type: number}\n'
    loaded = load_sweep(
        _awkward_sweep(tmp_path, inputs, '    "x.y.encoder.type": {space: choice, categories: [passthrough, dense]}\n')
    )
    cfg = resolve_trial_config(loaded.raw, {"x.y.encoder.type": "dense"})
    assert [f.encoder.type for f in cfg.input_features] == ["dense", "passthrough"]
    with pytest.raises(ConfigError, match="cannot be searched"):
        load_sweep(_awkward_sweep(tmp_path, inputs, '    "x.y.type": {space: choice, categories: [number, binary]}\n'))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("trainer.size", "starts with 'trainer.', which parameter paths read as the trainer section"),
        ("combined", "is reserved"),
        ("L" * 201, "characters as an MLflow key"),
        ("(" * 80, "characters as an MLflow key"),  # 80 characters, 240 as a key
    ],
)
def test_names_that_cannot_work_are_refused_with_the_fix(tmp_path, name, message):
    path = _awkward_sweep(tmp_path, f"  - {{name: {name!r}, type: number}}\n")
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    line = info.value.one_line()
    assert message in line and "\n" not in line
    assert str(path) in line and "input_features" in line
    if "reserved" not in message:
        assert "column:" in line  # the fix keeps the column's name


def test_a_model_of_features_named_as_written_trains_and_keeps_plain_keys(tmp_path):
    import pandas as pd
    import torch

    from ludwig_hpo.config import SweepConfig
    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model

    names = ["x.y", "size (cm)", "a/b", "naïve", "plain"]
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({n: rng.normal(size=24) for n in names} | {"label.v2": [0, 1] * 12})
    raw = {
        "name": "t",
        "dataset": {"source": "data.csv"},
        "input_features": [{"name": n, "type": "number", "encoder": {"type": "dense"}} for n in names],
        "output_features": [{"name": "label.v2", "type": "binary"}],
        "hyperopt": {
            "output_feature": "label.v2",
            "parameters": {"trainer.learning_rate": {"space": "uniform", "lower": 0.1, "upper": 0.2}},
        },
    }
    cfg = SweepConfig.model_validate(raw)
    data = prepare(frame, cfg)
    model = build_model(cfg, data.meta)
    x = {n: torch.as_tensor(data.inputs[n][:4]) for n in names}
    out = model(x)
    assert set(out) == {"label.v2"} and out["label.v2"].shape == (4,)
    keys = set(model.state_dict())
    assert any(k.startswith("encoders.plain.") for k in keys)  # a name without '.' keeps its key
    assert any(k.startswith("encoders.x%2Ey.") for k in keys)


# ---------------------------------------------------------------------------- Ludwig's hyperopt and backend
LUDWIG_HYPEROPT = """\
    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-1}
    combiner.output_size: {space: qrandint, lower: 10, upper: 64, q: 8}
    mean_texture.encoder.output_size: {space: choice, categories: [4, 16]}
    defaults.number.encoder.num_layers: {space: randint, lower: 1, upper: 3}
    ".": {space: choice, categories: [{trainer: {batch_size: 32}}, {combiner: {num_fc_layers: 2}}]}
  search_alg: {type: variant_generator, random_state: 9}
  executor:
    type: ray
    num_samples: 4
    max_concurrent_trials: 2
    cpu_resources_per_trial: 2
    gpu_resources_per_trial: 0
    kubernetes_namespace: ray
    scheduler: {type: async_hyperband, time_attr: training_iteration, grace_period: 1}
"""


def test_a_ludwig_hyperopt_section_loads_with_ludwigs_names(tmp_path):
    cfg = load(tmp_path, LUDWIG_HYPEROPT).config
    hp = cfg.hyperopt
    assert (hp.search_alg.type, hp.search_alg.seed, hp.scheduler.type) == ("variant_generator", 9, "async_hyperband")
    assert (hp.executor.num_samples, hp.executor.time_budget_s) == (4, 3600)
    assert (cfg.backend.num_workers, cfg.backend.cpus_per_worker, cfg.backend.use_gpu) == (1, 2.0, False)
    assert hp.parameters["combiner.output_size"].inclusive_range() == (16, 64)


def test_concurrency_the_cluster_cannot_hold_is_one_line_naming_ludwigs_key(tmp_path):
    from ludwig_hpo.execution.cluster import cluster_plan
    from ludwig_hpo.execution.resources import NodeShape

    plan = cluster_plan(load(tmp_path, LUDWIG_HYPEROPT).config, [NodeShape(2)], existing=False)
    assert (plan.num_workers, plan.cpus_per_worker, plan.max_concurrent) == (1, 2.0, 1)
    assert plan.concurrency_note() == (
        "note: max_concurrent_trials 2 cannot be honoured: 2 concurrent trials of 1 worker(s) x 2 CPU need 4 CPUs; "
        "this cluster has 2 CPUs, so 1 run at once: lower hyperopt.executor.cpu_resources_per_trial "
        "(backend.cpus_per_worker) or backend.num_workers, or run on 4 CPUs"
    )


def test_ludwig_parameter_paths_reach_their_fields(tmp_path):
    loaded = load(tmp_path, LUDWIG_HYPEROPT)
    blocks = loaded.config.hyperopt.parameters["."].categories
    cfg = resolve_trial_config(
        loaded.raw,
        {
            "trainer.learning_rate": 0.01,
            "combiner.output_size": 24,
            "mean_texture.encoder.output_size": 16,
            "defaults.number.encoder.num_layers": 1,
            ".": blocks[0],
        },
    )
    radius, texture = cfg.input_features
    assert (cfg.trainer.learning_rate, cfg.trainer.batch_size, cfg.combiner.output_size) == (0.01, 32, 24)
    assert (texture.encoder.output_size, texture.encoder.num_layers, radius.encoder.num_layers) == (16, 1, 1)


def test_a_ludwig_ray_backend_sets_the_workers_of_each_trial(tmp_path):
    cfg = load(
        tmp_path,
        "    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-1}\n",
        "backend:\n  type: ray\n  processor: {type: dask}\n  trainer: {num_workers: 2, strategy: ddp, "
        "resources_per_worker: {CPU: 1}}\n",
    ).config
    assert (cfg.backend.num_workers, cfg.backend.strategy, cfg.backend.cpus_per_worker) == (2, "ddp", 1.0)
    assert (
        load(
            tmp_path, "    trainer.learning_rate: {space: uniform, lower: 0.1, upper: 0.2}\n"
        ).config.backend.num_workers
        == 1
    )


def test_ludwig_keys_that_are_not_needed_say_so_in_one_line_each(tmp_path):
    from ludwig_hpo.config.backend import unused_key_notes

    cfg = load(tmp_path, LUDWIG_HYPEROPT, "backend: {type: local, cache_dir: /tmp/c, processor: {type: dask}}\n").config
    assert unused_key_notes(cfg.backend, cfg.hyperopt.executor.kubernetes_namespace) == [
        "note: backend.processor, backend.cache_dir are not used: the data is prepared once, in the driver, and "
        "every trial reuses it (remove to silence this line)",
        "note: hyperopt.executor.kubernetes_namespace is not used: trial results reach the driver through Ray and "
        "MLflow, never through files synced between pods (on Kubernetes, point --address at the Ray cluster)",
    ]
    plain = load(tmp_path, "    trainer.learning_rate: {space: uniform, lower: 0.1, upper: 0.2}\n").config
    assert unused_key_notes(plain.backend, plain.hyperopt.executor.kubernetes_namespace) == []


@pytest.mark.parametrize(
    ("output", "hyperopt", "key", "goal"),
    [
        ("{name: y, type: number}", "metric: mean_absolute_error", "validation/y/mean_absolute_error", "minimize"),
        (
            "{name: y, type: number}",
            "metric: root_mean_squared_error",
            "validation/y/root_mean_squared_error",
            "minimize",
        ),
        ("{name: y, type: number}", "{metric: r2, goal: maximize}", "validation/y/r2", "maximize"),
        ("{name: y, type: category}", "{metric: hits_at_k, goal: maximize}", "validation/y/hits_at_k", "maximize"),
        ("{name: y, type: binary}", "{metric: roc_auc, goal: maximize}", "validation/y/roc_auc", "maximize"),
        ("{name: y, type: binary}", "{output_feature: combined, metric: loss}", "validation/combined/loss", "minimize"),
    ],
)
def test_ludwigs_metric_spellings_are_the_searched_key(tmp_path, output, hyperopt, key, goal):
    import yaml

    spec = yaml.safe_load(hyperopt if hyperopt.startswith("{") else "{" + hyperopt + "}")
    if "output_feature" not in spec:
        spec["output_feature"] = "y"
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndataset: {source: sklearn:breast_cancer}\ninput_features: [{name: mean_radius, type: number}]\n"
        f"output_features: [{output}]\nhyperopt:\n"
        + "".join(f"  {k}: {v}\n" for k, v in spec.items())
        + "  parameters: {trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 0.1}}\n"
    )
    cfg = load_sweep(path).config
    assert cfg.objectives == [(key, goal)]


def test_goal_left_out_follows_the_metric_with_one_warning_and_a_written_wrong_goal_is_refused(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndataset: {source: sklearn:breast_cancer}\ninput_features: [{name: mean_radius, type: number}]\n"
        "output_features: [{name: y, type: binary}]\nhyperopt:\n  output_feature: y\n  metric: METRIC\n"
        "  parameters: {trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 0.1}}\n"
    )
    text = path.read_text()
    path.write_text(text.replace("METRIC", "loss"))
    loaded = load_sweep(path)
    assert loaded.config.hyperopt.goal == "minimize"
    assert not [w for w in loaded.warnings if "goal" in w]
    path.write_text(text.replace("METRIC", "roc_auc"))
    loaded = load_sweep(path)
    assert loaded.config.objectives == [("validation/y/roc_auc", "maximize")]
    assert [w for w in loaded.warnings if "goal" in w] == [
        "hyperopt.goal is not set: roc_auc is better when larger, so the sweep maximizes it "
        "(Ludwig would minimize); set goal explicitly to silence this"
    ]
    trial = resolve_trial_config(loaded.raw, {"trainer.learning_rate": 0.01})  # each trial's config too
    assert trial.hyperopt.goal == "maximize"
    path.write_text(text.replace("METRIC", "[roc_auc, loss]"))
    assert load_sweep(path).config.objectives[0] == ("validation/y/roc_auc", "maximize")
    path.write_text(text.replace("METRIC", "roc_auc\n  goal: minimize"))
    with pytest.raises(ConfigError, match="goal is 'minimize' but 'roc_auc' is better when larger; set goal: maximize"):
        load_sweep(path)


def test_ludwigs_optuna_executor_loads_as_one_optuna_trial_at_a_time(tmp_path):
    cfg = load(
        tmp_path,
        "    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-1}\n",
        "  executor: {type: optuna, num_samples: 3, sampler: tpe, pruner: hyperband}\n",
    ).config
    hp = cfg.hyperopt
    assert (hp.search_alg.type, hp.search_alg.sampler, hp.executor.num_samples) == ("optuna", "tpe", 3)
    assert (hp.executor.max_concurrent_trials, hp.executor.time_budget_s, hp.scheduler.type) == (1, None, "fifo")


@pytest.mark.parametrize(
    "path",
    ["preprocessing.sample_ratio", "defaults.number.preprocessing.normalization", "mean_radius.preprocessing.fill"],
)
def test_ludwigs_searched_preprocessing_is_one_line_saying_why(tmp_path, path):
    with pytest.raises(ConfigError, match="cannot be searched: preprocessing is fitted once per sweep"):
        load(tmp_path, f"    {path}: {{space: choice, categories: [0.5, 1.0]}}\n")


@pytest.mark.parametrize("max_t", ["0", "-3", "two"])
def test_a_bad_max_t_is_named_at_the_scheduler_not_at_the_epochs_it_would_set(tmp_path, max_t):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndataset: {source: sklearn:breast_cancer}\ninput_features: [{name: mean_radius, type: number}]\n"
        f"output_features: [{{name: y, type: binary}}]\nhyperopt:\n  scheduler: {{type: async_hyperband, max_t: {max_t}}}\n"
        "  parameters: {trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 0.1}}\n"
    )
    with pytest.raises(ConfigError, match=r"hyperopt\.scheduler\.max_t") as e:
        load_sweep(path)
    assert "trainer.epochs" not in str(e.value)
