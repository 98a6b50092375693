"""A tiny single-process training set-up shared by the test_trainer_* files: the breast-cancer
MLP on 96 training rows (6 batches of 16 per epoch), no Ray."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.paths import deep_merge
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.train.loop import Job, train_loop

from ..conftest import SWEEPS

TRAIN_ROWS, BATCH = 96, 16
STEPS_PER_EPOCH = TRAIN_ROWS // BATCH


@lru_cache(maxsize=1)
def _base() -> tuple[dict, Any]:
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    return loaded.raw, loaded.base_dir


def config(trainer: dict | None = None, **root: Any) -> SweepConfig:
    """The tiny sweep's config with ``trainer`` merged over a fixed-batch, 1-worker trainer."""
    raw, _ = _base()
    base_trainer = {"epochs": 3, "learning_rate": 0.01, "batch_size": BATCH, "optimizer": {"type": "adam"}}
    merged = {
        **raw,
        "trainer": deep_merge(base_trainer, trainer or {}),
        "combiner": {"type": "concat", "num_fc_layers": 1, "output_size": 8},
        "backend": {"num_workers": 1},
        **root,
    }
    return SweepConfig.model_validate(merged)


@lru_cache(maxsize=1)
def _data_for(key: str) -> PreparedData:
    whole = whole_data()
    return dataclasses.replace(whole, splits={**whole.splits, "train": whole.splits["train"][:TRAIN_ROWS]})


def data() -> PreparedData:
    """The prepared tiny dataset, training split cut to :data:`TRAIN_ROWS` rows (cached)."""
    return _data_for("tiny")


@lru_cache(maxsize=1)
def whole_data() -> PreparedData:
    """The prepared tiny dataset with its whole training split (399 rows; cached)."""
    raw, base_dir = _base()
    cfg = config()
    return prepare(load_dataframe(cfg.dataset.source, base_dir), cfg)


def run(cfg: SweepConfig, job: Job | None = None) -> tuple[list[dict], Any]:
    """Train ``cfg`` in this process; (every epoch's report, the trained model)."""
    reports: list[dict] = []
    model = train_loop(cfg, data(), job or Job(), lambda metrics, ckpt: reports.append(dict(metrics)))
    return reports, model
