"""The example sweeps in sweeps/: each says what it takes on a 2-core machine (minutes and
memory), and the quick start's sweep searches only optimizers that learn within its epochs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "sweeps").glob("*.yaml"))


def _header(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    return " ".join(
        line.lstrip("# ") for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("#"))]
    )


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_each_shipped_sweep_says_its_time_and_memory_on_two_cores(path: Path) -> None:
    header = _header(path)
    assert "2 CPU cores" in header, f"{path.name}: the leading comment names no machine: {header}"
    assert re.search(r"\d+(\.\d+)? minutes?\b", header), f"{path.name}: no time in minutes: {header}"
    assert re.search(r"\d+(\.\d+)? GB of memory", header), f"{path.name}: no memory figure: {header}"


def test_the_quick_start_sweep_offers_no_optimizer_that_stays_at_chance() -> None:
    from ludwig_hpo.config import load_sweep

    cfg = load_sweep(ROOT / "sweeps" / "digits.yaml").config
    # SGD at the learning rates adam needs stays at chance on digits within 8 epochs.
    assert cfg.trainer.optimizer.type != "sgd"
    for path, space in cfg.hyperopt.parameters.items():
        assert "sgd" not in repr(space.model_dump()), f"digits.yaml searches sgd through {path}"
