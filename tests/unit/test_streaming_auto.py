"""``dataset.streaming: auto`` decides by size: a folder, a glob or a URI streams; a single file
streams above the threshold (a tenth of the machine's memory, at least 256 MB, or
``$LUDWIG_HPO_STREAM_ABOVE_MB``) and loads in memory below it; ``hpo validate`` says which way
and why. No file here is big: the threshold or the machine's memory is set, or the file is sparse."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from ludwig_hpo.cli import app
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.streaming import mode
from ludwig_hpo.data.streaming.mode import THRESHOLD_ENV, stream_threshold, streaming_choice
from ludwig_hpo.errors import DataError
from tests.unit.conftest import _sweep_dict

INPUTS = [{"name": "x", "type": "number"}]
OUTPUTS = [{"name": "y", "type": "binary"}]
GB = 10**9


def _cfg(source: str, streaming: object = "auto") -> SweepConfig:
    return SweepConfig.model_validate(_sweep_dict(INPUTS, OUTPUTS, dataset={"source": source, "streaming": streaming}))


@pytest.fixture
def rows(tmp_path, monkeypatch):
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)
    pd.DataFrame({"x": [0.5, 1.5] * 20, "y": [0, 1] * 20}).to_parquet(tmp_path / "one.parquet")
    return tmp_path


def test_the_threshold_is_a_tenth_of_the_machines_memory(monkeypatch):
    monkeypatch.setattr(mode, "machine_memory", lambda: 64 * GB)
    t = stream_threshold({})
    assert t.bytes == int(6.4 * GB) and "a tenth of this machine's 64.0 GB" in t.why


def test_the_threshold_has_a_floor_of_256_mb(monkeypatch):
    monkeypatch.setattr(mode, "machine_memory", lambda: GB)
    t = stream_threshold({})
    assert t.bytes == 256 * 10**6 and "floor" in t.why


def test_a_container_limit_below_the_machines_memory_is_the_memory(monkeypatch):
    monkeypatch.setattr(mode, "_cgroup_limit", lambda: 4 * GB)
    assert mode.machine_memory() == 4 * GB
    monkeypatch.setattr(mode, "_cgroup_limit", lambda: None)
    assert mode.machine_memory() > 0


def test_the_environment_variable_replaces_the_rule(monkeypatch):
    monkeypatch.setattr(mode, "machine_memory", lambda: 64 * GB)
    t = stream_threshold({THRESHOLD_ENV: "150"})
    assert t.bytes == 150 * 10**6 and t.why == f"{THRESHOLD_ENV}=150"
    assert stream_threshold({THRESHOLD_ENV: "0"}).bytes == 0


@pytest.mark.parametrize("value", ["x", "-1", "nan", "1e3MB"])
def test_a_bad_environment_variable_is_one_line_naming_it(value):
    with pytest.raises(DataError) as e:
        stream_threshold({THRESHOLD_ENV: value})
    assert "\n" not in str(e.value) and str(e.value).startswith(f"{THRESHOLD_ENV}: ") and "fix:" in str(e.value)


def test_a_small_file_loads_in_memory_and_says_its_size_and_the_threshold(rows, monkeypatch):
    monkeypatch.setattr(mode, "machine_memory", lambda: 20 * GB)
    choice = streaming_choice(_cfg("one.parquet"), rows)
    assert not choice.streams
    assert "kB is not above 2.0 GB (a tenth of this machine's 20.0 GB of memory)" in choice.why


def test_a_file_above_the_threshold_streams(rows, monkeypatch):
    big = rows / "big.csv"
    with big.open("wb") as f:  # sparse: its size is what stat says, no disk is written
        f.truncate(3 * 2**30)
    monkeypatch.setattr(mode, "machine_memory", lambda: 16 * GB)
    for source in ("big.csv", str(big)):
        choice = streaming_choice(_cfg(source), rows)
        assert choice.streams and "3.2 GB is above 1.6 GB" in choice.why
    monkeypatch.setattr(mode, "machine_memory", lambda: 64 * GB)
    assert not streaming_choice(_cfg("big.csv"), rows).streams


def test_the_environment_variable_streams_a_small_file(rows, monkeypatch):
    monkeypatch.setenv(THRESHOLD_ENV, "0")
    choice = streaming_choice(_cfg("one.parquet"), rows)
    assert choice.streams and f"({THRESHOLD_ENV}=0)" in choice.why
    monkeypatch.setenv(THRESHOLD_ENV, "1")
    assert not streaming_choice(_cfg("one.parquet"), rows).streams


@pytest.mark.parametrize(
    ("source", "streaming", "streams", "why"),
    [
        ("rows", "auto", True, "dataset.streaming: auto and a folder, glob or URI"),
        ("rows/*.parquet", "auto", True, "dataset.streaming: auto and a folder, glob or URI"),
        ("s3://bucket/rows", "auto", True, "dataset.streaming: auto and a folder, glob or URI"),
        ("one.parquet", True, True, "dataset.streaming: true"),
        ("rows", False, False, "dataset.streaming: false"),
        ("sklearn:wine", "auto", False, "a bundled dataset"),
    ],
)
def test_many_files_stream_whatever_their_size_and_true_or_false_is_as_written(
    rows, monkeypatch, source, streaming, streams, why
):
    monkeypatch.setenv(THRESHOLD_ENV, "1e9")  # no file is above it: the size does not decide these
    (rows / "rows").mkdir()
    choice = streaming_choice(_cfg(source, streaming), rows)
    assert (choice.streams, choice.why) == (streams, why)


def _validate(tmp_path, source: str) -> tuple[int, str]:
    (tmp_path / "sweep.yaml").write_text(
        "name: auto\n"
        f"dataset: {{source: {source}}}\n"
        "input_features: [{name: x, type: number}]\n"
        "output_features: [{name: y, type: binary}]\n"
        "backend: {num_workers: 1, cpus_per_worker: 1}\n"
        "hyperopt:\n  goal: maximize\n  metric: roc_auc\n  output_feature: y\n"
        "  executor: {max_concurrent_trials: 1}\n"
        "  parameters: {trainer.learning_rate: {space: choice, categories: [0.01]}}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "sweep.yaml")])
    return result.exit_code, result.output


def test_hpo_validate_says_a_small_file_loads_in_memory_and_why(rows, monkeypatch):
    monkeypatch.setattr(mode, "machine_memory", lambda: 20 * GB)
    code, out = _validate(rows, "one.parquet")
    assert code == 0, out
    assert "data: one.parquet: loaded in memory (dataset.streaming: auto and the file's" in out
    assert "is not above 2.0 GB" in out


def test_hpo_validate_says_a_file_above_the_threshold_streams_and_why(rows, monkeypatch):
    monkeypatch.setenv(THRESHOLD_ENV, "0.001")
    code, out = _validate(rows, "one.parquet")
    assert code == 0, out
    assert "data: one.parquet: streamed, 1 parquet file(s)" in out
    assert f"is above 1.0 kB ({THRESHOLD_ENV}=0.001)" in out
    assert "loaded in memory" not in out
