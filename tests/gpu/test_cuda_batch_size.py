"""On a CUDA GPU: a real out-of-memory error during the batch-size search is caught, and the
chosen size then trains a full epoch without running out of memory. Skipped without a GPU
(``HPO_GPU_ONLY=1 pytest -m gpu`` runs only these on a GPU machine)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.train.loop import Job, train_loop

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]


def _config() -> SweepConfig:
    return SweepConfig.model_validate(
        {
            "name": "gpu-oom",
            "dataset": {"source": "unused"},
            "input_features": [
                {
                    "name": "image",
                    "type": "image",
                    "encoder": {"type": "stacked_cnn", "num_layers": 2, "channels": 1024},
                }
            ],
            "output_features": [{"name": "label", "type": "category"}],
            "trainer": {"epochs": 1, "batch_size": "auto", "max_batch_size": 4096, "eval_batch_size": 64},
            "backend": {"num_workers": 1},
            "hyperopt": {
                "goal": "minimize",
                "metric": "loss",
                "output_feature": "label",
                "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}},
            },
        }
    )


def test_real_cuda_oom_is_caught_and_the_chosen_size_trains_a_full_epoch():
    rng = np.random.default_rng(0)
    n = 120_000  # enough rows that the cap (rows / 20 steps) is above what fits
    df = pd.DataFrame({"image": list(rng.random((n, 16, 16), dtype=np.float32)), "label": rng.integers(0, 10, n)})
    cfg = _config()
    data = prepare(df, cfg)
    torch.cuda.empty_cache()
    # ~3 GB for this process: 1024-channel activations of a few thousand 16x16 images do not fit.
    torch.cuda.set_per_process_memory_fraction(3e9 / torch.cuda.get_device_properties(0).total_memory)
    try:
        reports: list[dict] = []
        train_loop(cfg, data, Job(), lambda m, c: reports.append(m), device=torch.device("cuda", 0))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    tried = reports[0]["batch_size_tried"]
    assert "oom" in tried, tried  # a real CUDA out-of-memory error happened and was caught
    assert reports[0]["epoch"] == 1 and np.isfinite(reports[0]["objective"])  # the full epoch trained
    oom_sizes = [int(p.split(":")[0]) for p in tried.split(";") if p.endswith("oom")]
    assert reports[0]["batch_size"] < min(oom_sizes)
