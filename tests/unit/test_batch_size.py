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
from ludwig_hpo.train.batch_size import BatchSizeError, is_oom, search_batch_size
from ludwig_hpo.train.loop import Job, train_loop

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
    (
        "plateau-patience-2",
        {8: 100.0, 16: 200.0, 32: 205.0, 64: 206.0, 128: 900.0},
        {"max_size": 1024},
        [8, 16, 32, 64],
        16,
    ),
    (
        "plateau-patience-1",
        {8: 100.0, 16: 200.0, 32: 205.0, 64: 900.0},
        {"max_size": 1024, "patience": 1},
        [8, 16, 32],
        16,
    ),
    (
        "plateau-patience-3",
        {8: 100.0, 16: 200.0, 32: 205.0, 64: 206.0, 128: 207.0},
        {"max_size": 1024, "patience": 3},
        [8, 16, 32, 64, 128],
        16,
    ),
    (
        "stall-then-improve",
        {8: 100.0, 16: 101.0, 32: 300.0, 64: 301.0, 128: 302.0},
        {"max_size": 1024},
        [8, 16, 32, 64, 128],
        32,
    ),
    ("slower-when-larger", {8: 100.0, 16: 50.0, 32: 25.0}, {"max_size": 1024}, [8, 16, 32], 8),
    (
        "zero-tolerance",
        {8: 100.0, 16: 100.5, 32: 100.6, 64: 100.6, 128: 100.6},
        {"max_size": 1024, "tolerance": 0.0},
        [8, 16, 32, 64, 128],
        32,
    ),
    # out of memory: bisect between the last fit and the failure, then keep 10 % headroom below the failure
    ("oom-after-success", lambda s: OOM if s >= 32 else 10.0 * s, {"max_size": 1024}, [8, 16, 32, 24, 28], 28),
    ("oom-at-cap", lambda s: OOM if s >= 20 else 10.0 * s, {"max_size": 20}, [8, 16, 20, 18, 19], 18),
    ("oom-on-second-size", lambda s: OOM if s >= 16 else 10.0 * s, {"max_size": 1024}, [8, 16, 12, 14], 14),
    ("oom-no-refine", {8: 100.0, 16: 200.0, 32: OOM}, {"max_size": 1024, "refine_steps": 0}, [8, 16, 32], 16),
    ("oom-headroom-bites", {8: 100.0, 16: 200.0, 17: OOM}, {"max_size": 17, "refine_steps": 0}, [8, 16, 17], 15),
]


@pytest.mark.parametrize(
    ("speeds", "kwargs", "tried", "chosen"), [c[1:] for c in SEARCHES], ids=[c[0] for c in SEARCHES]
)
def test_search_sequence(speeds, kwargs, tried, chosen):
    probe = ScriptedProbe(speeds)
    choice = search_batch_size(probe, **kwargs)
    assert probe.calls == tried
    assert choice.batch_size == chosen
    assert [s for s, _ in choice.tried] == tried
    assert [v for _, v in choice.tried] == [
        probe.speeds(s) if callable(probe.speeds) else probe.speeds[s] for s in tried
    ]


def test_oom_at_start_halves_down():
    probe = ScriptedProbe(lambda s: None if s > 2 else 10.0 * s)
    choice = search_batch_size(probe, max_size=64)
    assert probe.calls == [8, 4, 2, 3]  # halve until it fits, then bisect towards the failure
    assert choice.batch_size == 2
    assert choice.tried[:2] == ((8, None), (4, None))


def test_a_size_that_ran_out_of_memory_is_never_probed_again_nor_anything_above():
    probe = ScriptedProbe(lambda s: None if s > 2 else 10.0 * s)
    choice = search_batch_size(probe, max_size=64)
    for i, (size, speed) in enumerate(choice.tried):
        if speed is None:
            assert all(later < size for later, _ in choice.tried[i + 1 :])


def test_smallest_size_within_tolerance_of_best_wins():
    probe = ScriptedProbe({8: 100.0, 16: 104.0, 32: 106.0})
    assert search_batch_size(probe, max_size=32).batch_size == 16


def test_oom_at_one_raises():
    probe = ScriptedProbe(lambda s: None)
    with pytest.raises(BatchSizeError, match="batch size 1 runs out of memory"):
        search_batch_size(probe, max_size=64)
    assert probe.calls == [8, 4, 2, 1]
    assert isinstance(BatchSizeError("x"), RuntimeError)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_size": 0},
        {"max_size": -4},
        {"max_size": 8, "growth": 1},
        {"max_size": 8, "patience": 0},
    ],
)
def test_invalid_args(kwargs):
    probe = ScriptedProbe(lambda s: 1.0)
    with pytest.raises(ValueError, match="must hold, but got"):
        search_batch_size(probe, **kwargs)
    assert probe.calls == []


@settings(max_examples=200, deadline=None, database=None)
@given(
    max_size=st.integers(1, 4096),
    start=st.integers(1, 64),
    oom_above=st.integers(1, 5000),
    speeds=st.lists(st.floats(0.1, 1e6), min_size=40, max_size=40),
    patience=st.integers(1, 4),
)
def test_search_invariants(max_size, start, oom_above, speeds, patience):
    """Any probe where size 1 fits: sizes stay in [1, max_size]; the choice is a size that ran
    and fits; no size that fits is measured twice; the search is logarithmic in max_size."""
    probe = ScriptedProbe(lambda s: None if s > oom_above else speeds[s.bit_length() % len(speeds)])
    choice = search_batch_size(probe, max_size=max_size, start=start, patience=patience)
    assert all(1 <= s <= max_size for s in probe.calls)
    fits = [s for s, v in choice.tried if v is not None]
    assert 1 <= choice.batch_size <= max(fits)
    assert choice.batch_size <= oom_above
    ran = [s for s, v in choice.tried if v is not None]
    assert len(ran) == len(set(ran)), "a size that fits is measured once"
    assert len(probe.calls) <= 2 * max_size.bit_length() + 2


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError; the predicate matches by type name."""


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (OutOfMemoryError("anything"), True),
        (torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.3 GiB total capacity)"), True),
        (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), True),
        (RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), True),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied (8x3 and 4x2)"), False),
        (ValueError("bad value"), False),
        (MemoryError(), False),
    ],
)
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
        if checkpoint_dir is None:  # no write at this epoch (the checkpoint budget)
            reports.append({**metrics, "_has_model_pt": False, "_ckpt_epoch": None, "_ckpt_dir": None})
            return
        model_pt = Path(checkpoint_dir) / "model.pt"
        state = torch.load(model_pt, weights_only=True)
        reports.append(
            {**metrics, "_has_model_pt": model_pt.is_file(), "_ckpt_epoch": state["epoch"], "_ckpt_dir": checkpoint_dir}
        )

    train_loop(cfg, data, Job(), report)

    assert [r["epoch"] for r in reports] == [1, 2]
    metric_key = cfg.hyperopt.metric_key
    assert metric_key == "validation/malignant/roc_auc"
    best = None
    assert reports[-1]["_has_model_pt"]  # the last epoch always writes
    for r in reports:
        assert r["objective"] == r[metric_key]
        assert 0.0 <= r["objective"] <= 1.0
        if best is None or r["objective"] >= best[1]:  # roc_auc: larger is better
            best = (r["epoch"], r["objective"])
        if r["_has_model_pt"]:  # model.pt holds the best epoch so far
            assert r["_ckpt_epoch"] == r["checkpoint_epoch"] == best[0] and r["checkpoint_objective"] == best[1]
            assert not Path(r["_ckpt_dir"]).exists(), "the loop removes its checkpoint folder after the report"
        else:
            assert "checkpoint_epoch" not in r
        assert r["world_size"] == 1 and r["global_batch_size"] == r["batch_size"]
        for key in (
            "train/combined/running_loss",
            "validation/combined/loss",
            "validation/malignant/loss",
            "validation/malignant/accuracy",
            "train_time_s",
            "samples_per_s",
            "batch_size_tuning_s",
        ):
            assert key in r, key
    tried = reports[0]["batch_size_tried"]
    assert tried.split(";")[0].startswith("8:")
    assert "batch_size_tried" not in reports[1]
    # breast cancer: 398 training rows / 20 steps per epoch -> cap 19, so sizes 8, 16, 19 at most
    assert reports[0]["batch_size"] in (8, 16, 19)
    assert reports[1]["train_time_s"] >= reports[0]["train_time_s"]


def test_a_second_trial_with_the_same_model_shape_is_a_cache_hit_without_probing(monkeypatch, tmp_path, repo_root):
    """Trials that differ only in the learning rate share the tuned size; no probe step runs."""
    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.train import autobatch
    from ludwig_hpo.train.batch_size import MemoryCache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    loaded = load_sweep(repo_root / "sweeps" / "breast_cancer_tiny.yaml")
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    searches = []
    real = autobatch.search_batch_size
    monkeypatch.setattr(autobatch, "search_batch_size", lambda *a, **k: searches.append(1) or real(*a, **k))
    cache = MemoryCache()
    firsts = []
    for lr in (0.01, 0.05):
        cfg = resolve_trial_config(
            {**loaded.raw, "trainer": {**loaded.raw["trainer"], "epochs": 1}}, {"trainer.learning_rate": lr}
        )
        reports: list[dict] = []
        train_loop(cfg, data, Job(), lambda m, c, out=reports: out.append(m), cache=cache)
        firsts.append(reports[0])
    assert len(searches) == 1 and len(cache.entries) == 1
    assert firsts[0]["batch_size_cache_hit"] == 0 and firsts[1]["batch_size_cache_hit"] == 1
    assert firsts[0]["batch_size"] == firsts[1]["batch_size"]
    assert "batch_size_tried" in firsts[0] and "batch_size_tried" not in firsts[1]


def test_a_different_model_shape_misses_the_cache():
    from ludwig_hpo.train.batch_size import cache_key

    base = dict(
        architecture="a",
        input_shapes={"x": (8, 8)},
        device="cpu",
        device_memory=0,
        world_size=2,
        precision="fp32",
        strategy="ddp",
        max_size=64,
    )
    assert cache_key(**base) == cache_key(**dict(base))
    for change in (
        {"architecture": "b"},
        {"input_shapes": {"x": (4, 4)}},
        {"world_size": 4},
        {"device": "NVIDIA H200", "device_memory": 150_000_000_000},
        {"precision": "bf16"},
        {"max_size": 32},
        {"kind": "eval"},
        {"optimizer": "adam"},
        {"torch_version": "2.0.0"},
    ):
        assert cache_key(**{**base, **change}) != cache_key(**base), change


def test_cpu_memory_guard_refuses_sizes_projected_over_budget():
    from ludwig_hpo.train.probe import CpuMemoryGuard

    guard = CpuMemoryGuard(budget_bytes=1_000)
    guard.points = [(8, 100), (16, 500)]  # 50 bytes per sample
    assert guard.allows(16) and guard.allows(26)  # 500 + 50 * 10 = 1000
    assert not guard.allows(32)
