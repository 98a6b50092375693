"""Wrong sweep files, table-driven, through the real CLI in-process: each ``hpo validate``
and ``hpo sweep`` prints exactly one line (file:line:column, key path, what is wrong, the
fix), exits 2, shows no traceback, and creates nothing (no output folder, no MLflow store,
no Ray)."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from ludwig_hpo.cli import app

BASE = """\
name: t
dataset: {source: sklearn:digits}
input_features:
  - {name: image, type: image}
output_features:
  - {name: label, type: category}
trainer: {epochs: 4}
hyperopt:
  goal: minimize
  metric: loss
  output_feature: label
  search_alg: {type: optuna, sampler: tpe, seed: 1}
  scheduler: {type: async_hyperband, grace_period: 1}
  executor: {num_samples: 4}
  parameters:
    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}
"""
LR = "    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}\n"


def edit(*pairs: tuple[str, str]) -> str:
    text = BASE
    for old, new in pairs:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def param(*lines: str) -> str:
    """BASE with its parameter replaced by ``lines`` (each under ``parameters:``, line 16 on)."""
    return edit((LR, "".join(f"    {ln}\n" for ln in lines)))


def sa(text: str) -> str:
    return edit(("  search_alg: {type: optuna, sampler: tpe, seed: 1}\n", f"  search_alg: {text}\n"))


def sched(text: str) -> str:
    return edit(("  scheduler: {type: async_hyperband, grace_period: 1}\n", f"  scheduler: {text}\n"))


def pbt(scheduler: str, *more: tuple[str, str]) -> str:
    """BASE with the PBT scheduler ``scheduler`` (line 12) and no search_alg (PBT samples at random)."""
    return edit(
        ("  search_alg: {type: optuna, sampler: tpe, seed: 1}\n", ""),
        ("  scheduler: {type: async_hyperband, grace_period: 1}\n", f"  scheduler: {scheduler}\n"),
        *more,
    )


P = "sweep.yaml:16:5: hyperopt.parameters."
CASES = [
    # ---- spaces: bounds, q, empty lists, unknown types
    (
        "loguniform-lower-zero",
        param("trainer.learning_rate: {space: loguniform, lower: 0, upper: 0.1}"),
        P + '"trainer.learning_rate": loguniform needs lower > 0, but got lower=0 (bounds are values, not exponents); '
        "fix: use a positive lower bound, e.g. 1.0e-5",
    ),
    (
        "loguniform-exponents",
        param("trainer.learning_rate: {space: loguniform, lower: -4, upper: -1}"),
        P + '"trainer.learning_rate": loguniform needs lower > 0, but got lower=-4 (bounds are values, not exponents); '
        "fix: use a positive lower bound, e.g. 1.0e-5",
    ),
    (
        "loguniform-lower-above-upper",
        param("trainer.learning_rate: {space: loguniform, lower: 0.1, upper: 0.01}"),
        P
        + '"trainer.learning_rate": lower < upper must hold, but got (lower=0.1, upper=0.01); fix: correct the bounds',
    ),
    (
        "uniform-empty-range",
        param("combiner.dropout: {space: uniform, lower: 0.5, upper: 0.5}"),
        P + '"combiner.dropout": lower < upper must hold, but got (lower=0.5, upper=0.5); fix: correct the bounds',
    ),
    (
        "randint-empty-range",
        param("image.encoder.num_layers: {space: randint, lower: 3, upper: 3}"),
        P + '"image.encoder.num_layers": lower < upper must hold, but got (lower=3, upper=3); fix: correct the bounds',
    ),
    (
        "qrandint-q-not-integer",
        param("combiner.output_size: {space: qrandint, lower: 8, upper: 64, q: 2.5}"),
        'sweep.yaml:16:66: hyperopt.parameters."combiner.output_size".q: Input should be a valid integer, got'
        " a number with a fractional part, got 2.5",
    ),
    (
        "q-larger-than-range",
        param("combiner.output_size: {space: qrandint, lower: 8, upper: 16, q: 32}"),
        P + '"combiner.output_size": no multiple of q=32 lies in [8, 16] (values are multiples of q); '
        "fix: use a smaller q or wider bounds",
    ),
    (
        "q-zero",
        param("combiner.dropout: {space: quniform, lower: 0.0, upper: 0.5, q: 0}"),
        P + '"combiner.dropout": q must be > 0, but got q=0; fix: use a positive step q',
    ),
    (
        "randn-sd-zero",
        param("trainer.optimizer.weight_decay: {space: randn, mean: 0.01, sd: 0}"),
        P + '"trainer.optimizer.weight_decay": sd must be > 0, but got sd=0; fix: use a positive standard deviation',
    ),
    (
        "lograndint-lower-zero",
        param("combiner.output_size: {space: lograndint, lower: 0, upper: 64}"),
        P + '"combiner.output_size": lograndint needs lower > 0, but got lower=0 (bounds are values, not exponents); '
        "fix: use a positive lower bound, e.g. 1.0e-5",
    ),
    (
        "choice-empty",
        param("trainer.optimizer.type: {space: choice, categories: []}"),
        'sweep.yaml:16:45: hyperopt.parameters."trainer.optimizer.type".categories: List should have at least'
        " 1 item after validation, not 0",
    ),
    (
        "grid-empty",
        param("trainer.optimizer.type: {space: grid_search, values: []}"),
        'sweep.yaml:16:50: hyperopt.parameters."trainer.optimizer.type".values: List should have at least 1 '
        "item after validation, not 0",
    ),
    (
        "unknown-space",
        param("trainer.learning_rate: {space: lognormal, lower: 1, upper: 2}"),
        "sweep.yaml:16:29: hyperopt.parameters.\"trainer.learning_rate\".space: unknown space 'lognormal'; "
        "fix: did you mean 'loguniform' or 'qloguniform' or 'lograndint'?",
    ),
    (
        "space-missing",
        param("trainer.learning_rate: {lower: 1.0e-4, upper: 1.0e-2}"),
        "sweep.yaml:16:5: hyperopt.parameters.\"trainer.learning_rate\": 'space' is missing; fix: add 'space:' "
        "(uniform, loguniform, randint, choice, grid_search, ...)",
    ),
    (
        "unknown-space-key",
        param("trainer.learning_rate: {space: loguniform, lower: 1.0e-4, uper: 1.0e-2}"),
        "sweep.yaml:16:63: hyperopt.parameters.\"trainer.learning_rate\".uper: unknown key 'uper'; fix: did you"
        " mean 'upper'?",
    ),
    # ---- spaces vs the config's fields
    (
        "float-space-on-integer-field",
        param("image.encoder.num_layers: {space: uniform, lower: 1, upper: 4}"),
        P + '"image.encoder.num_layers": value 2.113 is invalid for input_features[image].encoder.num_layers: '
        "Input should be a valid integer, got a number with a fractional part, got 2.113; "
        "fix: use an integer space (randint, qrandint, lograndint) for an integer field",
    ),
    (
        "range-beyond-field-limit",
        param("image.encoder.num_layers: {space: randint, lower: 1, upper: 10}"),
        P + '"image.encoder.num_layers": value 9 is invalid for input_features[image].encoder.num_layers: '
        "Input should be less than or equal to 6, got 9; fix: change the range or categories",
    ),
    (
        "category-not-allowed",
        param("trainer.precision: {space: choice, categories: [fp32, fp8]}"),
        P + "\"trainer.precision\": value 'fp8' is invalid for trainer.precision: "
        "Input should be 'fp32', 'bf16' or 'fp16', got 'fp8'; fix: use one of the values listed",
    ),
    (
        "block-category-invalid",
        param("trainer.optimizer: {space: choice, categories: [{type: adam}, {type: sgd, momentun: 0.5}]}"),
        P + '"trainer.optimizer": value {"type": "sgd", "momentun": 0.5} is invalid for trainer.optimizer.momentun: '
        "unknown key 'momentun'; fix: did you mean 'momentum'?",
    ),
    # ---- parameter paths
    (
        "path-unknown-section",
        param("trainr.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}"),
        P + "\"trainr.learning_rate\": path 'trainr.learning_rate' starts with 'trainr', which is neither a section "
        "(trainer, combiner, defaults, adapter, generation) nor a feature name; did you mean 'trainer'?; fix: use a path such as "
        "'trainer.learning_rate', '<feature>.encoder.<field>' or 'defaults.<feature type>.encoder.<field>'",
    ),
    (
        "path-unknown-field",
        param("trainer.learning_rat: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}"),
        P + "\"trainer.learning_rat\": 'trainer.learning_rat' is not a field of the config: trainer.learning_rat: "
        "unknown key 'learning_rat'; fix: did you mean 'learning_rate'?",
    ),
    (
        "path-unknown-encoder-field",
        param("image.encoder.num_layer: {space: randint, lower: 1, upper: 3}"),
        P + "\"image.encoder.num_layer\": 'image.encoder.num_layer' is not a field of the config: "
        "input_features[image].encoder.num_layer: unknown key 'num_layer'; fix: did you mean 'num_layers'?",
    ),
    (
        "path-unknown-feature-type-default",
        param("defaults.imag.encoder.channels: {space: choice, categories: [8, 16]}"),
        P + "\"defaults.imag.encoder.channels\": 'defaults.imag.encoder.channels' is not a field of the config: "
        "defaults.imag: unknown key 'imag'; fix: did you mean 'image'?",
    ),
    (
        "path-into-a-value",
        param("trainer.learning_rate.x: {space: uniform, lower: 0, upper: 1}"),
        "sweep.yaml:16:5: hyperopt.parameters.\"trainer.learning_rate.x\": path 'trainer.learning_rate.x' walks"
        " into 'trainer.learning_rate', which is a value, not a section; fix: end the path at a field",
    ),
    (
        "feature-named-like-section",
        edit(
            ("  - {name: image, type: image}\n", "  - {name: image, type: image}\n  - {name: trainer, type: number}\n")
        ),
        "sweep.yaml:5:6: input_features[trainer].name: feature name 'trainer' is reserved (it names a config "
        "section); rename the feature",
    ),
    (
        "search-fixed-epochs",
        param("trainer.epochs: {space: randint, lower: 2, upper: 5}"),
        P + "\"trainer.epochs\": 'trainer.epochs' cannot be searched: it sets the scheduler's max_t; "
        "fix: set it in the config instead of hyperopt.parameters",
    ),
    (
        "search-preprocessing",
        param("image.preprocessing.scale: {space: choice, categories: [16, 255]}"),
        P + "\"image.preprocessing.scale\": 'image.preprocessing.scale' cannot be searched: preprocessing is fitted "
        "once per sweep, before any trial; fix: set it in the config instead of hyperopt.parameters",
    ),
    # ---- the "." key
    (
        "root-not-choice",
        param("'.': {space: uniform, lower: 0, upper: 1}"),
        "sweep.yaml:16:5: hyperopt.parameters.\".\": the '.' parameter must be a choice or grid_search of config blocks, "
        "not uniform; fix: use space: choice with categories that are mappings",
    ),
    (
        "root-category-not-mapping",
        param("'.': {space: choice, categories: [{trainer: {learning_rate: 0.1}}, 3]}"),
        "sweep.yaml:16:5: hyperopt.parameters.\".\": each category of the '.' parameter must be a non-empty mapping of "
        "config sections, got 3; fix: write categories like {trainer: {learning_rate: 0.01}}",
    ),
    (
        "root-block-touches-dataset",
        param("'.': {space: choice, categories: [{dataset: {source: x.csv}}]}"),
        "sweep.yaml:16:5: hyperopt.parameters.\".\": a '.' block may set only trainer, combiner, defaults, adapter, generation, not 'dataset'; "
        "fix: move that setting out of the search or into its section",
    ),
    (
        "root-block-unknown-field",
        param("'.': {space: choice, categories: [{trainer: {learning_rat: 0.1}}]}"),
        'sweep.yaml:16:5: hyperopt.parameters.".": value {"trainer": {"learning_rat": 0.1}} is invalid for '
        "trainer.learning_rat: unknown key 'learning_rat'; fix: did you mean 'learning_rate'?",
    ),
    # ---- search algorithm
    (
        "unknown-sampler",
        sa("{type: optuna, sampler: bayes}"),
        "sweep.yaml:12:30: hyperopt.search_alg.sampler: Input should be 'tpe', 'random', 'cmaes', 'gp', 'qmc'"
        " or 'nsga2', got 'bayes'; fix: use one of the values listed",
    ),
    (
        "unknown-search-alg-type",
        sa("{type: hypertune}"),
        "sweep.yaml:12:16: hyperopt.search_alg.type: Input should be 'optuna', 'grid', 'variant_generator' or"
        " 'random', got 'hypertune'; fix: use one of the values listed",
    ),
    (
        "search-alg-type-of-another-package",
        sa("{type: hyperopt}"),
        "sweep.yaml:12:16: hyperopt.search_alg.type: search_alg.type 'hyperopt' is not supported yet (Ray Tune's "
        "hyperopt searcher needs a package not installed with ludwig_hpo); fix: use search_alg: {type: optuna, "
        "sampler: tpe} (the same family of search) or {type: variant_generator}",
    ),
    (
        "option-of-another-sampler",
        sa("{sampler: random, multivariate: true}"),
        "sweep.yaml:12:33: hyperopt.search_alg.multivariate: multivariate does not apply to the 'random' "
        "sampler (only to tpe); fix: remove multivariate",
    ),
    (
        "sampler-with-grid",
        edit(
            ("  search_alg: {type: optuna, sampler: tpe, seed: 1}\n", "  search_alg: {type: grid, sampler: tpe}\n"),
            (LR, "    trainer.learning_rate: {space: grid_search, values: [0.1, 0.01]}\n"),
        ),
        "sweep.yaml:12:28: hyperopt.search_alg.sampler: sampler 'tpe' is set but search_alg.type is 'grid'; "
        "fix: remove sampler, or use type: optuna",
    ),
    (
        "misspelt-seed",
        sa("{type: optuna, seeed: 1}"),
        "sweep.yaml:12:30: hyperopt.search_alg.seeed: unknown key 'seeed'; fix: did you mean 'seed'?",
    ),
    (
        "grid-with-random-space",
        sa("{type: grid}"),
        'sweep.yaml:16:5: hyperopt.parameters."trainer.learning_rate": search_alg.type grid needs every parameter to be '
        "grid_search, but 'trainer.learning_rate' is loguniform; fix: use space: grid_search with values, or "
        "search_alg.type: optuna",
    ),
    (
        "grid-num-samples-contradiction",
        edit(
            ("  search_alg: {type: optuna, sampler: tpe, seed: 1}\n", "  search_alg: {type: grid}\n"),
            (LR, "    trainer.learning_rate: {space: grid_search, values: [0.1, 0.01]}\n"),
        ),
        "sweep.yaml:14:14: hyperopt.executor.num_samples: num_samples (4) contradicts the grid's 2 points (a "
        "grid runs each point once); fix: remove num_samples",
    ),
    (
        "point-unknown-parameter",
        sa("{points_to_evaluate: [{trainer.learning_rat: 0.001}]}"),
        'sweep.yaml:12:38: hyperopt.search_alg.points_to_evaluate[0]."trainer.learning_rat": '
        "'trainer.learning_rat' is not a searched parameter; fix: did you mean 'trainer.learning_rate'?",
    ),
    (
        "point-out-of-range",
        sa("{points_to_evaluate: [{trainer.learning_rate: 0.5}]}"),
        'sweep.yaml:12:38: hyperopt.search_alg.points_to_evaluate[0]."trainer.learning_rate": 0.5 is outside '
        "[0.0001, 0.01) of the loguniform space of 'trainer.learning_rate'; fix: use a value inside the "
        "parameter's space",
    ),
    (
        "point-wrong-type",
        sa("{points_to_evaluate: [{trainer.learning_rate: fast}]}"),
        "sweep.yaml:12:38: hyperopt.search_alg.points_to_evaluate[0].\"trainer.learning_rate\": 'fast' is not a"
        " number of the loguniform space of 'trainer.learning_rate'; fix: use a value inside the parameter's "
        "space",
    ),
    (
        "point-not-a-category",
        edit(
            (
                "  search_alg: {type: optuna, sampler: tpe, seed: 1}\n",
                "  search_alg: {points_to_evaluate: [{trainer.optimizer.type: rmsprop}]}\n",
            ),
            (LR, "    trainer.optimizer.type: {space: choice, categories: [adam, sgd]}\n"),
        ),
        "sweep.yaml:12:38: hyperopt.search_alg.points_to_evaluate[0].\"trainer.optimizer.type\": 'rmsprop' is "
        "not one of 'adam', 'sgd' of the choice space of 'trainer.optimizer.type'; fix: use a value inside "
        "the parameter's space",
    ),
    (
        "too-many-points",
        edit(
            (
                "  search_alg: {type: optuna, sampler: tpe, seed: 1}\n",
                "  search_alg: {points_to_evaluate: [{trainer.learning_rate: 0.001}, "
                "{trainer.learning_rate: 0.002}]}\n",
            ),
            ("{num_samples: 4}", "{num_samples: 1}"),
        ),
        "sweep.yaml:12:16: hyperopt.search_alg.points_to_evaluate: 2 points_to_evaluate exceed the 1 trials "
        "of the sweep; fix: raise executor.num_samples or remove points",
    ),
    # ---- schedulers
    (
        "unknown-scheduler",
        sched("{type: pbt2}"),
        "sweep.yaml:13:15: hyperopt.scheduler.type: unknown type 'pbt2'; fix: did you mean 'pbt'?",
    ),
    (
        "option-of-another-scheduler",
        sched("{type: fifo, grace_period: 2}"),
        "sweep.yaml:13:27: hyperopt.scheduler.grace_period: unknown key 'grace_period'; fix: remove it "
        "(allowed keys: type)",
    ),
    (
        "max-t-contradicts-epochs",
        sched("{type: async_hyperband, max_t: 8}"),
        "sweep.yaml:13:38: hyperopt.scheduler.max_t: max_t (8) contradicts trainer.epochs (4); set only one of them",
    ),
    (
        "grace-period-beyond-epochs",
        sched("{type: asha, grace_period: 6}"),
        "sweep.yaml:13:27: hyperopt.scheduler.grace_period: grace_period (6) must be <= trainer.epochs (4)",
    ),
    (
        "seconds-without-max-t",
        sched("{type: hyperband, time_attr: time_total_s}"),
        "sweep.yaml:13:32: hyperopt.scheduler.time_attr: hyperband with time_attr: time_total_s needs max_t "
        "in seconds; fix: add max_t: <seconds>",
    ),
    (
        "unknown-time-attr",
        sched("{type: asha, time_attr: steps}"),
        "sweep.yaml:13:27: hyperopt.scheduler.time_attr: Input should be 'epoch', 'training_iteration' or "
        "'time_total_s', got 'steps'; fix: use one of the values listed",
    ),
    (
        "scheduler-twice",
        edit(("  executor: {num_samples: 4}\n", "  executor: {num_samples: 4, scheduler: {type: fifo}}\n")),
        "sweep.yaml:14:30: hyperopt.executor.scheduler: the scheduler is set twice: hyperopt.scheduler and "
        "hyperopt.executor.scheduler; fix: keep only one of them",
    ),
    (
        "several-metrics-with-cmaes",
        edit(
            ("  metric: loss\n", "  metric: [loss, accuracy]\n"),
            ("{type: optuna, sampler: tpe, seed: 1}", "{type: optuna, sampler: cmaes}"),
            ("{type: async_hyperband, grace_period: 1}", "{type: fifo}"),
        ),
        "sweep.yaml:12:30: hyperopt.search_alg.sampler: the 'cmaes' sampler optimizes one metric, but 2 are "
        "given; fix: use sampler: nsga2 or tpe, or a single metric",
    ),
    (
        "several-metrics-with-asha",
        edit(("  metric: loss\n", "  metric: [loss, accuracy]\n")),
        "sweep.yaml:13:3: hyperopt.scheduler: scheduler 'async_hyperband' stops trials on one metric, but 2 "
        "are optimized; fix: use scheduler: {type: fifo} with several metrics",
    ),
    (
        "several-metrics-unknown-metric",
        edit(
            ("  metric: loss\n", "  metric: [loss, jaccard]\n"),
            ("{type: async_hyperband, grace_period: 1}", "{type: fifo}"),
        ),
        "sweep.yaml:10:18: hyperopt.metric[1]: 'jaccard' is not reported for a category output; use one of "
        "['accuracy', 'hits_at_k', 'loss', 'roc_auc']",
    ),
    # ---- the PBT scheduler
    (
        "pbt-after-tpe",
        sched("{type: pbt}"),
        "sweep.yaml:12:16: hyperopt.search_alg.type: the pbt scheduler samples its first population at random and then explores by itself; it cannot follow search_alg.type 'optuna'; fix: use search_alg: {type: random} with pbt",
    ),
    (
        "pbt-mutates-architecture",
        pbt(
            "{type: pbt, hyperparam_mutations: {combiner.output_size: [16, 32]}}",
            (LR, LR + "    combiner.output_size: {space: choice, categories: [16, 32]}\n"),
        ),
        "sweep.yaml:12:49: hyperopt.scheduler.hyperparam_mutations.\"combiner.output_size\": PBT cannot change 'combiner.output_size' mid-trial: a cloned checkpoint would not fit (only trainer.* settings other than epochs, optimizer.type and seed, and dropout rates may change); fix: remove combiner.output_size from hyperparam_mutations",
    ),
    (
        "pbt-mutates-unsearched",
        pbt("{type: pbt, hyperparam_mutations: {trainer.learning_rat: null}}"),
        "sweep.yaml:12:49: hyperopt.scheduler.hyperparam_mutations.\"trainer.learning_rat\": 'trainer.learning_rat' is not a searched parameter (PBT perturbs parameters of hyperopt.parameters); fix: did you mean 'trainer.learning_rate'?",
    ),
    (
        "pbt-mutation-outside-space",
        pbt("{type: pbt, hyperparam_mutations: {trainer.learning_rate: [0.001, 0.5]}}"),
        "sweep.yaml:12:49: hyperopt.scheduler.hyperparam_mutations.\"trainer.learning_rate\": 0.5 is outside [0.0001, 0.01) of the loguniform space of 'trainer.learning_rate'; fix: list values inside the parameter's space",
    ),
    (
        "pbt-mutation-not-a-list",
        pbt("{type: pbt, hyperparam_mutations: {trainer.learning_rate: 0.01}}"),
        "sweep.yaml:12:49: hyperopt.scheduler.hyperparam_mutations.\"trainer.learning_rate\": mutations of 'trainer.learning_rate' must be a non-empty list of values, a space mapping or null, got 0.01; fix: write e.g. [0.001, 0.01, 0.1], or null for the parameter's own space",
    ),
    (
        "pbt-mutation-space-of-a-choice",
        pbt(
            "{type: pbt, hyperparam_mutations: {combiner.dropout: {space: uniform, lower: 0, upper: 0.5}}}",
            (LR, "    combiner.dropout: {space: choice, categories: [0.1, 0.2]}\n"),
        ),
        "sweep.yaml:12:49: hyperopt.scheduler.hyperparam_mutations.\"combiner.dropout\": a mutation space needs a numeric parameter with bounds, but 'combiner.dropout' is choice; fix: list the values to try, or write null (its own space)",
    ),
    (
        "pbt-interval-beyond-epochs",
        pbt("{type: pbt, perturbation_interval: 4}"),
        "sweep.yaml:12:26: hyperopt.scheduler.perturbation_interval: perturbation_interval (4) must be below trainer.epochs (4), or no trial is ever perturbed; fix: use a smaller interval or more epochs",
    ),
    (
        "pbt-burn-in-beyond-epochs",
        pbt("{type: pbt, burn_in_period: 4}"),
        "sweep.yaml:12:26: hyperopt.scheduler.burn_in_period: burn_in_period (4) must be below trainer.epochs (4), "
        "or no trial is ever perturbed; fix: use a shorter burn-in or more epochs",
    ),
    (
        "pbt-fresh-multiworker",
        pbt(
            "{type: pbt}",
            ("trainer: {epochs: 4}\n", "trainer: {epochs: 4}\nbackend: {num_workers: 2, trial_executor: fresh}\n"),
        ),
        "sweep.yaml:8:27: backend.trial_executor: pbt needs the checkpoints of multi-worker trials in Tune, which only pooled worker groups hand over; fix: use trial_executor: pooled (or auto) with pbt",
    ),
    (
        "pbt-nothing-mutable",
        pbt("{type: pbt}", (LR, "    combiner.output_size: {space: choice, categories: [16, 32]}\n")),
        "sweep.yaml:12:3: hyperopt.scheduler: pbt has no parameter it may change: none of hyperopt.parameters is a training setting (trainer.*) or a dropout rate; fix: search e.g. trainer.learning_rate, or use another scheduler",
    ),
    (
        "pbt-bad-quantile",
        pbt("{type: pbt, quantile_fraction: 0.7}"),
        "sweep.yaml:12:26: hyperopt.scheduler.quantile_fraction: Input should be less than or equal to 0.5, got 0.7; fix: set it to at most 0.5",
    ),
    (
        "pbt-custom-explore-fn",
        pbt("{type: pbt, custom_explore_fn: my.fn}"),
        "sweep.yaml:12:26: hyperopt.scheduler.custom_explore_fn: unknown key 'custom_explore_fn'; fix: remove it (allowed keys: burn_in_period, hyperparam_mutations, log_config, perturbation_factors, perturbation_interval, quantile_fraction, require_attrs, resample_probability, synch, time_attr, type)",
    ),
    # ---- budget, Ludwig sections
    (
        "num-samples-zero",
        edit(("{num_samples: 4}", "{num_samples: 0}")),
        "sweep.yaml:14:14: hyperopt.executor.num_samples: Input should be greater than or equal to 1, got 0; fix: set it to at least 1",
    ),
    (
        "negative-time-budget",
        edit(("{num_samples: 4}", "{num_samples: 4, time_budget_s: -5}")),
        "sweep.yaml:14:30: hyperopt.executor.time_budget_s: Input should be greater than 0, got -5; fix: set it above 0.0",
    ),
    (
        "fixed-split-without-its-column",
        edit(("trainer: {epochs: 4}\n", "trainer: {epochs: 4}\npreprocessing: {split: {type: fixed}}\n")),
        "sklearn:digits: preprocessing.split.column: split column 'split' is not in the dataset; fix: add a column "
        "'split' (0 = train, 1 = validation, 2 = test) or set preprocessing.split.column",
    ),
    (
        "split-probabilities",
        edit(
            (
                "trainer: {epochs: 4}\n",
                "trainer: {epochs: 4}\npreprocessing: {split: {probabilities: [0.5, 0.2, 0.2]}}\n",
            )
        ),
        "sweep.yaml:8:17: preprocessing.split: probabilities must be three positive fractions summing to 1, got "
        "[0.5, 0.2, 0.2]; fix: use e.g. [0.7, 0.1, 0.2]",
    ),
    (
        "split-twice",
        edit(
            ("dataset: {source: sklearn:digits}\n", "dataset: {source: sklearn:digits, split: {train: 0.7}}\n"),
            ("trainer: {epochs: 4}\n", "trainer: {epochs: 4}\npreprocessing: {split: {type: random}}\n"),
        ),
        "sweep.yaml:8:17: preprocessing.split: the split is set twice: dataset.split and preprocessing.split; "
        "fix: keep only one of them",
    ),
    (
        "defaults-bad-encoder-field",
        edit(("trainer: {epochs: 4}\n", "trainer: {epochs: 4}\ndefaults: {image: {encoder: {num_layerz: 2}}}\n")),
        "sweep.yaml:8:30: defaults.image.encoder.num_layerz: unknown key 'num_layerz'; fix: did you mean 'num_layers'?",
    ),
    (
        "image-height-without-width",
        edit(("  - {name: image, type: image}\n", "  - {name: image, type: image, preprocessing: {height: 8}}\n")),
        "sweep.yaml:4:32: input_features[image].preprocessing: height is set but width is not; fix: set width too "
        "(or remove height)",
    ),
    (
        "image-colour-channels",
        edit(
            ("  - {name: image, type: image}\n", "  - {name: image, type: image, preprocessing: {num_channels: 4}}\n")
        ),
        "sweep.yaml:4:32: input_features[image].preprocessing: num_channels 4 is not supported (alpha channels are "
        "dropped); fix: set num_channels: 3 (RGB) or 1 (grayscale), or remove it",
    ),
    (
        "duplicate-parameter",
        param(
            "trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}",
            "trainer.learning_rate: {space: uniform, lower: 0.001, upper: 0.01}",
        ),
        "sweep.yaml:17:5: duplicate key 'trainer.learning_rate' (first at line 16); fix: keep only one of them",
    ),
]


def _invoke(*args: str):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("text", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_wrong_sweep_file(tmp_path, monkeypatch, text, line):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text(text)
    before = set(tmp_path.iterdir())
    for args in (["validate", "sweep.yaml"], ["sweep", "sweep.yaml"], ["sweep", "sweep.yaml", "--output", "out"]):
        code, stdout, stderr = _invoke(*args)
        assert (code, stderr) == (2, f"error: {line}\n"), args
        assert "Traceback" not in stdout + stderr
        assert set(tmp_path.iterdir()) == before, "nothing is created (no output folder, no mlflow.db)"
        ray = sys.modules.get("ray")
        assert ray is None or not ray.is_initialized(), "Ray is not started"


def test_at_least_forty_cases_with_distinct_messages():
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)
    assert len({c[2] for c in CASES}) == len(CASES)
