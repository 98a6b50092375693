"""A small token-classification task for tests of transformer models at scale: rows of words
(a ``sequence`` feature) and a category label, and a sweep config over them with our
``transformer`` sequence encoder. Plain pandas/numpy; the config validates without Ray.

- ``token_frame(rows, longest, seed, long_rows)`` -> DataFrame ``tokens`` / ``label``: rows of
  2-6 words and ``long_rows`` rows of ``longest`` words.
- ``token_config(trainer, encoder, combiner, backend)`` -> SweepConfig (2 transformer blocks of
  width 16 by default; ``trainer`` etc. update the sections).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

WORDS = [f"w{i}" for i in range(30)]


def token_frame(rows: int = 120, longest: int = 14, seed: int = 0, long_rows: int = 1) -> pd.DataFrame:
    """Token rows of 2-6 words and ``long_rows`` rows of ``longest`` words; the label is
    ``yes`` when the first word is one of every other word of :data:`WORDS`."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 7)))) for _ in range(rows)]
    for i in range(long_rows):
        texts[(i + 1) * rows // (long_rows + 1)] = " ".join(rng.choice(WORDS, size=longest))
    labels = ["yes" if t.split()[0] in WORDS[::2] else "no" for t in texts]
    return pd.DataFrame({"tokens": texts, "label": labels})


def token_config(
    trainer: dict[str, Any] | None = None,
    encoder: dict[str, Any] | None = None,
    combiner: dict[str, Any] | None = None,
    backend: dict[str, Any] | None = None,
):
    """The sweep config of :func:`token_frame`'s task (validated ``SweepConfig``)."""
    from ludwig_hpo.config.schema import SweepConfig

    raw: dict[str, Any] = {
        "name": "tokens",
        "dataset": {"source": "tokens.csv"},
        "input_features": [
            {
                "name": "tokens",
                "type": "sequence",
                "encoder": encoder or {"type": "transformer", "hidden_size": 16, "num_heads": 2, "num_layers": 2},
            }
        ],
        "output_features": [{"name": "label", "type": "category"}],
        "trainer": {"epochs": 1, "batch_size": 8, **(trainer or {})},
        "hyperopt": {
            "goal": "minimize",
            "metric": "loss",
            "output_feature": "label",
            "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}},
        },
    }
    if combiner:
        raw["combiner"] = combiner
    if backend:
        raw["backend"] = backend
    return SweepConfig.model_validate(raw)
