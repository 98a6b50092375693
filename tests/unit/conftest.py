"""Shared helpers for the fast unit tests: configs built in code, and a thread-leak check.

Nothing here starts Ray, MLflow or a process; every test runs on CPU in milliseconds to
seconds.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from ludwig_hpo.config.schema import SweepConfig

# transformers reads a model's weights on a thread pool it shuts down without waiting, so its
# threads outlive from_pretrained by a moment and the thread-leak check below would see them
# depending on timing; read on the calling thread (the same weights) for a deterministic check.
os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

LR_SPACE = {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}


def _sweep_dict(inputs: list[dict], outputs: list[dict], **sections: Any) -> dict:
    """A minimal valid raw sweep mapping (as the YAML loader would return it)."""
    raw: dict[str, Any] = {
        "name": "unit",
        "dataset": {"source": "sklearn:breast_cancer"},
        "input_features": inputs,
        "output_features": outputs,
        "hyperopt": {"parameters": {"trainer.learning_rate": dict(LR_SPACE)}},
    }
    raw.update(sections)
    return raw


@pytest.fixture
def repo_root() -> Path:
    """The repository checkout (holds ``sweeps/``)."""
    return Path(__file__).resolve().parents[2]


@pytest.fixture
def sweep_dict():
    """Factory: ``sweep_dict(inputs, outputs, **sections) -> dict``, a minimal valid raw sweep."""
    return _sweep_dict


@pytest.fixture
def make_config():
    """Factory: ``make_config(inputs, outputs, **sections) -> SweepConfig``."""

    def make(inputs: list[dict], outputs: list[dict], **sections: Any) -> SweepConfig:
        return SweepConfig.model_validate(_sweep_dict(inputs, outputs, **sections))

    return make


@pytest.fixture(autouse=True)
def _no_leaked_threads():
    """Fail a test that leaves Python threads running (environment leaks: tests/conftest.py)."""
    threads = {t.ident for t in threading.enumerate()}
    yield
    leaked = [t.name for t in threading.enumerate() if t.ident not in threads and t.is_alive()]
    assert not leaked, f"test left threads running: {leaked}"
