"""What ``hpo sweep`` and ``hpo validate`` check of a streamed dataset before Ray starts
(:mod:`ludwig_hpo.driver.streamed_checks`): k-fold accepted, a CPU left to Ray Data's tasks,
the files' footers checked; a single file loads in memory and is not checked here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from ludwig_hpo.config import load_sweep
from ludwig_hpo.driver.streamed_checks import check_streamed_sweep
from ludwig_hpo.errors import DataError, ResourceError
from ludwig_hpo.execution.resources import plan_resources

from ..conftest import SWEEPS


def _loaded(tmp_path, source: str, **sections):
    raw = {k: v for k, v in load_sweep(SWEEPS / "breast_cancer_tiny.yaml").raw.items() if k != "kfold"}
    rows = pd.DataFrame(
        np.random.default_rng(0).normal(size=(40, 10)), columns=[f["name"] for f in raw["input_features"]]
    )
    rows["malignant"] = np.arange(40) % 2
    (tmp_path / "rows").mkdir(exist_ok=True)
    rows.iloc[:20].to_parquet(tmp_path / "rows" / "a.parquet")
    rows.iloc[20:].to_parquet(tmp_path / "rows" / "b.parquet")
    rows.to_parquet(tmp_path / "one.parquet")
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({**raw, "dataset": {"source": source}, **sections}))
    return load_sweep(tmp_path / "sweep.yaml")


def _plan(cpus_per_worker: float, cluster_cpus: int = 2):
    return plan_resources(
        num_workers=2,
        use_gpu=False,
        cpus_per_worker=cpus_per_worker,
        cluster_cpus=cluster_cpus,
        cluster_gpus=0,
        max_concurrent=1,
    )


def _one_line(e: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_folder_streams_with_its_footers_checked(tmp_path):
    line = check_streamed_sweep(_loaded(tmp_path, "rows"), _plan(0.5))
    assert line is not None and "streamed, 2 parquet file(s)" in line


def test_a_single_file_loads_in_memory_and_is_not_checked_here(tmp_path):
    assert check_streamed_sweep(_loaded(tmp_path, "one.parquet", kfold={"k": 2}), _plan(1.0)) is None


def test_kfold_on_a_streamed_dataset_passes_the_checks(tmp_path):
    line = check_streamed_sweep(_loaded(tmp_path, "rows", kfold={"k": 2}), _plan(0.5))
    assert line is not None and "streamed, 2 parquet file(s)" in line


def test_ranks_that_reserve_every_cpu_are_refused_before_ray_starts(tmp_path):
    with pytest.raises(ResourceError) as e:
        check_streamed_sweep(_loaded(tmp_path, "rows"), _plan(1.0))
    assert "backend.cpus_per_worker" in _one_line(e) and "reserve 2 of the cluster's 2" in str(e.value)


def test_a_file_missing_a_column_is_refused_naming_it(tmp_path):
    loaded = _loaded(tmp_path, "rows")
    pd.read_parquet(tmp_path / "rows" / "b.parquet").drop(columns="mean_area").to_parquet(
        tmp_path / "rows" / "b.parquet"
    )
    with pytest.raises(DataError) as e:
        check_streamed_sweep(loaded, _plan(0.5))
    assert "b.parquet" in _one_line(e) and "mean_area" in str(e.value)
