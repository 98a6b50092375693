"""The worker loop's augmentation hook, in this process (no Ray): a Ludwig config's image
augmentation runs on every training batch of every epoch and on no evaluation batch, a rerun
is identical, and augmenting changes what the model learns."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.data.sources import dataset_folder
from ludwig_hpo.train import augment
from ludwig_hpo.train.loop import Job, train_loop

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ludwig"


@lru_cache(maxsize=1)
def _loaded():
    loaded = load_sweep(FIXTURES / "image_rgb_augmentation.yaml", FIXTURES / "image_rgb.csv", search=False)
    cfg = loaded.config
    source = cfg.dataset.source
    data = prepare(load_dataframe(source, loaded.base_dir), cfg, dataset_folder(source, loaded.base_dir))
    return cfg, data


def _run(cfg) -> list[dict]:
    reports: list[dict] = []
    _, data = _loaded()
    train_loop(cfg, data, Job(), lambda m, c: reports.append(dict(m)))
    return reports


def _trainer(cfg, epochs: int = 2):
    return cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"batch_size": 8, "epochs": epochs})})


def test_every_training_batch_is_augmented_and_no_evaluation_batch(monkeypatch):
    cfg, data = _loaded()
    seen: list[tuple[int, int, int]] = []
    real = augment.Augmentation.__call__

    def spy(self, inputs, epoch, batch):
        seen.append((epoch, batch, len(inputs["image_path"])))
        assert inputs["image_path"].dtype == torch.uint8  # stored pixels, before the model scales them
        return real(self, inputs, epoch, batch)

    monkeypatch.setattr(augment.Augmentation, "__call__", spy)
    reports = _run(_trainer(cfg))
    train = len(data.splits["train"])
    batches = -(-train // 8)
    assert [(e, b) for e, b, _ in seen] == [(e, b) for e in (1, 2) for b in range(batches)]
    assert sum(n for e, _, n in seen if e == 1) == train  # the training rows only, once per epoch
    assert len(reports) == 2


def test_a_rerun_is_identical_and_augmentation_changes_the_training():
    cfg, _ = _loaded()
    first, again = _run(_trainer(cfg, 1)), _run(_trainer(cfg, 1))
    loss = "train/combined/running_loss"
    assert [r[loss] for r in first] == [r[loss] for r in again]
    plain = cfg.model_copy(
        update={"input_features": [f.model_copy(update={"augmentation": ()}) for f in cfg.input_features]}
    )
    assert [r[loss] for r in _run(_trainer(plain, 1))] != [r[loss] for r in first]
