"""A GPU asked for by Ludwig's ``hyperopt.executor.gpu_resources_per_trial`` on a machine
without one: the error names that key where the file has it, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.errors import ResourceError
from ludwig_hpo.execution.cluster import cluster_plan
from ludwig_hpo.execution.resources import NodeShape

SWEEP = """\
name: tiny
dataset:
  source: sklearn:digits
input_features:
  - {name: size, type: number}
output_features:
  - {name: label, type: category}
hyperopt:
  executor:
    num_samples: 2
    gpu_resources_per_trial: 1
  parameters:
    trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 1.0e-2}
"""


def test_gpu_resources_per_trial_without_a_gpu_points_at_the_key(tmp_path: Path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    cfg = load_sweep(path).config
    with pytest.raises(ResourceError) as info:
        cluster_plan(cfg, [NodeShape(2, 0)], existing=False, sweep_file=path)
    assert str(info.value) == (
        f"{path}:11:5: hyperopt.executor.gpu_resources_per_trial: gpu_resources_per_trial asks for a GPU but this "
        "machine has no GPU; fix: set gpu_resources_per_trial: 0 to train on CPU, or run on a machine with a GPU"
    )


def test_backend_use_gpu_without_a_gpu_still_names_backend(tmp_path: Path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.replace("    gpu_resources_per_trial: 1\n", "") + "backend:\n  use_gpu: true\n")
    cfg = load_sweep(path).config
    with pytest.raises(ResourceError, match="backend.use_gpu: use_gpu is true but this machine has no GPU"):
        cluster_plan(cfg, [NodeShape(2, 0)], existing=False, sweep_file=path)
