"""Ludwig's optuna executor's keys: the ``int`` space (Optuna's ``suggest_int(lower, upper)``,
upper bound inclusive) and ``executor.time_budget_s``, kept as the search's time budget."""

from __future__ import annotations

from pathlib import Path

from optuna.distributions import IntDistribution

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.spaces import parse_space
from ludwig_hpo.search.space import decode_value, to_optuna

SWEEP = """\
name: tiny
dataset:
  source: sklearn:digits
input_features:
  - {name: size, type: number}
output_features:
  - {name: label, type: category}
trainer:
  epochs: 2
hyperopt:
  executor:
    type: optuna
    num_samples: 3
    time_budget_s: 1800
  parameters:
    trainer.batch_size:
      space: int
      lower: 32
      upper: 256
"""


def test_int_space_samples_both_bounds_inclusive():
    space = parse_space({"space": "int", "lower": 1, "upper": 4})
    assert to_optuna(space) == IntDistribution(1, 4, step=1)
    assert space.problem_with(4) is None and space.problem_with(5) is not None
    assert decode_value(space, 4) == 4
    assert space.describe() == "int [1, 4] = integers 1..4, linear scale"


def test_optuna_executor_keeps_int_space_and_time_budget(tmp_path: Path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    hp = load_sweep(path).config.hyperopt
    assert hp is not None
    assert hp.executor.time_budget_s == 1800
    assert to_optuna(hp.parameters["trainer.batch_size"]) == IntDistribution(32, 256, step=1)


def test_optuna_executor_without_time_budget_has_none(tmp_path: Path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.replace("    time_budget_s: 1800\n", ""))
    hp = load_sweep(path).config.hyperopt
    assert hp is not None and hp.executor.time_budget_s is None
