"""Batch-size search against scripted probes (the exact sizes tried), the out-of-memory
predicate, and one in-process run of the worker loop with ``batch_size: auto``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.train import Job, search_batch_size, train_loop
from ludwig_hpo.train.batch_size import BatchSizeError, is_oom

OOM = None


class ScriptedProbe:
    """``speeds[size]`` samples/s (``None``: out of memory); records every size asked."""

    def __init__(self, speeds):
        self.speeds = speeds
        self.calls: list[int] = []

    def __call__(self, size: int):
        self.calls.append(size)
        return self.speeds(size) if callable(self.speeds) else self.speeds[size]


# (id, speeds, search kwargs, sizes tried, chosen size)
SEARCHES = [
    ("monotone-to-cap", lambda s: 10.0 * s, {"max_size": 64}, [8, 16, 32, 64], 64),
    ("cap-not-power-of-two", lambda s: 10.0 * s, {"max_size": 50}, [8, 16, 32, 50], 50),
    ("cap-below-start", lambda s: 10.0 * s, {"max_size": 5}, [5], 5),
    ("cap-one", lambda s: 1.0, {"max_size": 1}, [1], 1),
    ("start-and-growth", lambda s: 10.0 * s, {"max_size": 100, "start": 4, "growth": 3}, [4, 12, 36, 100], 100),
    ("plateau-patience-2", {8: 100.0, 16: 200.0, 32: 205.0, 64: 206.0, 128: 900.0}, {"max_size": 1024},
     [8, 16, 32, 64], 16),
    ("plateau-patience-1", {8: 100.0, 16: 200.0, 32: 205.0, 64: 900.0}, {"max_size": 1024, "patience": 1},
     [8, 16, 32], 16),
    ("plateau-patience-3", {8: 100.0, 16: 200.0, 32: 205.0, 64: 206.0, 128: 207.0}, {"max_size": 1024,
                                                                                    "patience": 3},
     [8, 16, 32, 64, 128], 16),
    ("stall-then-improve", {8: 100.0, 16: 101.0, 32: 300.0, 64: 301.0, 128: 302.0}, {"max_size": 1024},
     [8, 16, 32, 64, 128], 32),
    ("slower-when-larger", {8: 100.0, 16: 50.0, 32: 25.0}, {"max_size": 1024}, [8, 16, 32], 8),
    ("zero-tolerance", {8: 100.0, 16: 100.5, 32: 100.6, 64: 100.6, 128: 100.6}, {"max_size": 1024,
                                                                                "tolerance": 0.0},
     [8, 16, 32, 64, 128], 32),
    ("oom-after-success", {8: 100.0, 16: 200.0, 32: OOM}, {"max_size": 1024}, [8, 16, 32], 16),
    ("oom-at-cap", {8: 100.0, 16: 200.0, 20: OOM}, {"max_size": 20}, [8, 16, 20], 16),
    ("oom-on-second-size", {8: 100.0, 16: OOM}, {"max_size": 1024}, [8, 16], 8),
]


@pytest.mark.parametrize(("speeds", "kwargs", "tried", "chosen"), [c[1:] for c in SEARCHES],
                         ids=[c[0] for c in SEARCHES])
def test_search_sequence(speeds, kwargs, tried, chosen):
    probe = ScriptedProbe(speeds)
    choice = search_batch_size(probe, **kwargs)
    assert probe.calls == tried
    assert choice.batch_size == chosen
    assert [s for s, _ in choice.tried] == tried
    assert [v for _, v in choice.tried] == [probe.speeds(s) if callable(probe.speeds) else probe.speeds[s]
                                            for s in tried]


def test_oom_at_start_halves_down():
    probe = ScriptedProbe(lambda s: None if s > 2 else 10.0 * s)
    choice = search_batch_size(probe, max_size=64)
    assert probe.calls[:3] == [8, 4, 2]
    assert choice.batch_size == 2
    assert choice.tried[:2] == ((8, None), (4, None))


def test_oom_at_start_never_retries_an_oom_size():
    probe = ScriptedProbe(lambda s: None if s > 2 else 10.0 * s)
    search_batch_size(probe, max_size=64)
    assert probe.calls == [8, 4, 2]


def test_smallest_size_within_tolerance_of_best_wins():
    probe = ScriptedProbe({8: 100.0, 16: 104.0, 32: 106.0})
    assert search_batch_size(probe, max_size=32).batch_size == 16


def test_oom_at_one_raises():
    probe = ScriptedProbe(lambda s: None)
    with pytest.raises(BatchSizeError, match="batch size 1 runs out of memory"):
        search_batch_size(probe, max_size=64)
    assert probe.calls == [8, 4, 2, 1]
    assert isinstance(BatchSizeError("x"), RuntimeError)


@pytest.mark.parametrize("kwargs", [
    {"max_size": 0}, {"max_size": -4}, {"max_size": 8, "growth": 1}, {"max_size": 8, "patience": 0},
])
def test_invalid_args(kwargs):
    probe = ScriptedProbe(lambda s: 1.0)
    with pytest.raises(ValueError, match="must hold, but got"):
        search_batch_size(probe, **kwargs)
    assert probe.calls == []


@settings(max_examples=200, deadline=None, database=None)
@given(max_size=st.integers(1, 4096), start=st.integers(1, 64), oom_above=st.integers(1, 5000),
       speeds=st.lists(st.floats(0.1, 1e6), min_size=40, max_size=40), patience=st.integers(1, 4))
def test_search_invariants(max_size, start, oom_above, speeds, patience):
    """Any probe where size 1 fits: sizes stay in [1, max_size]; the choice is a size that ran
    and fits; no size that fits is measured twice; the search is logarithmic in max_size."""
    probe = ScriptedProbe(lambda s: None if s > oom_above else speeds[s.bit_length() % len(speeds)])
    choice = search_batch_size(probe, max_size=max_size, start=start, patience=patience)
    assert all(1 <= s <= max_size for s in probe.calls)
    assert choice.batch_size in [s for s, v in choice.tried if v is not None]
    assert choice.batch_size <= oom_above
    ran = [s for s, v in choice.tried if v is not None]
    assert len(ran) == len(set(ran)), "a size that fits is measured once"
    assert len(probe.calls) <= 2 * max_size.bit_length() + 2


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError; the predicate matches by type name."""


@pytest.mark.parametrize(("exc", "expected"), [
    (OutOfMemoryError("anything"), True),
    (torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
    (RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.3 GiB total capacity)"), True),
    (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), True),
    (RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), True),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied (8x3 and 4x2)"), False),
    (ValueError("bad value"), False),
    (MemoryError(), False),
])
def test_is_oom(exc, expected):
    assert is_oom(exc) is expected


# ---------------------------------------------------------------------------- the worker loop
def test_train_loop_in_process(repo_root: Path, tmp_path, monkeypatch):
    # torch sets this variable on first use of its compiler stack; pin it so the test leaks nothing.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    loaded = load_sweep(repo_root / "sweeps" / "breast_cancer_tiny.yaml")
    cfg = loaded.config
    assert cfg.trainer.epochs == 2 and cfg.trainer.batch_size == "auto"
    data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
    reports: list[dict] = []

    def report(metrics: dict, checkpoint_dir: str | None) -> None:
        # The loop deletes the checkpoint folder after the report: look at it now.
        assert checkpoint_dir is not None
        model_pt = Path(checkpoint_dir) / "model.pt"
        state = torch.load(model_pt, weights_only=True)
        reports.append({**metrics, "_has_model_pt": model_pt.is_file(), "_ckpt_epoch": state["epoch"],
                        "_ckpt_dir": checkpoint_dir})

    train_loop(cfg, data, Job(), report)

    assert [r["epoch"] for r in reports] == [1, 2]
    metric_key = cfg.hyperopt.metric_key
    assert metric_key == "validation/malignant/roc_auc"
    for r in reports:
        assert r["objective"] == r[metric_key]
        assert 0.0 <= r["objective"] <= 1.0
        assert r["_has_model_pt"] and r["_ckpt_epoch"] == r["epoch"]
        assert not Path(r["_ckpt_dir"]).exists(), "the loop removes its checkpoint folder after the report"
        assert r["world_size"] == 1 and r["global_batch_size"] == r["batch_size"]
        for key in ("train/combined/running_loss", "validation/combined/loss", "validation/malignant/loss",
                    "validation/malignant/accuracy", "train_time_s", "samples_per_s", "batch_size_tuning_s"):
            assert key in r, key
    tried = reports[0]["batch_size_tried"]
    assert tried.split(";")[0].startswith("8:")
    assert "batch_size_tried" not in reports[1]
    # breast cancer: 398 training rows / 20 steps per epoch -> cap 19, so sizes 8, 16, 19 at most
    assert reports[0]["batch_size"] in (8, 16, 19)
    assert reports[1]["train_time_s"] >= reports[0]["train_time_s"]
