"""The ``model_type: llm`` sweep configs the llm tests train: one tiny text-to-text task
(``lemma`` -> ``gloss``), its base model a folder the fixtures save (``tiny_llama_dir``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd

#: Ten rows of the task (with a part of speech, ``pos``, some prompts name).
ROWS = pd.DataFrame(
    {
        "lemma": ["cat", "dog", "oak", "rain", "fox", "sun", "moon", "tree", "bird", "fish"],
        "pos": ["noun"] * 10,
        "gloss": [
            "a small animal",
            "a loyal friend of man",
            "a tall tree",
            "water falling from the sky",
            "a quick brown animal",
            "the star of the day",
            "it shines at night",
            "a tall plant",
            "it sings in the morning",
            "it swims in the river",
        ],
    }
)
#: The LoRA adapter most llm tests train (small rank, no dropout: runs repeat exactly).
LORA = {"type": "lora", "r": 4, "alpha": 8, "dropout": 0.0}
#: The prompt of the tests whose rows have a part of speech (``pos``) beside the lemma.
POS_TEMPLATE = "Define the {pos} '{lemma}':"
#: The order of the top-level sections in a written mapping (as a sweep file reads).
_ORDER = (
    "name",
    "model_type",
    "base_model",
    "dataset",
    "prompt",
    "input_features",
    "output_features",
    "adapter",
    "generation",
    "trainer",
    "backend",
    "hyperopt",
)


def llm_raw(
    base: str | Path,
    *,
    name: str = "llm",
    split: tuple[float, float, float, int] = (0.5, 0.25, 0.25, 1),
    template: str | None = None,
    trainer: dict[str, Any] | None = None,
    metric: str = "loss",
    goal: str = "minimize",
    lr_range: tuple[float, float] = (1e-4, 1e-2),
    **sections: Any,
) -> dict[str, Any]:
    """The sweep file mapping of an llm config on ``lemma`` (text input) -> ``gloss`` (text output).

    Args:
        base: the ``base_model`` (a folder).
        split: train, validation, test fractions and the split seed.
        template: ``prompt.template`` (none: no ``prompt`` section, unless given in ``sections``).
        trainer: the ``trainer`` section besides ``type: finetune``.
        metric, goal: the hyperopt metric of ``gloss`` and its direction.
        lr_range: the searched ``trainer.learning_rate`` (loguniform) bounds.
        sections: top-level sections as written (``adapter``, ``generation``, ``backend``,
            ``prompt``, ``kfold``...), replacing the ones above; ``adapter=None``: no adapter.
    """
    train, validation, test, seed = split
    raw: dict[str, Any] = {
        "name": name,
        "model_type": "llm",
        "base_model": str(base),
        "dataset": {
            "source": "rows.csv",
            "split": {"train": train, "validation": validation, "test": test, "seed": seed},
        },
        "input_features": [{"name": "lemma", "type": "text"}],
        "output_features": [{"name": "gloss", "type": "text"}],
        "trainer": {"type": "finetune", **(trainer or {})},
        "hyperopt": {
            "metric": metric,
            "goal": goal,
            "output_feature": "gloss",
            "parameters": {
                "trainer.learning_rate": {"space": "loguniform", "lower": lr_range[0], "upper": lr_range[1]}
            },
        },
    }
    if template is not None:
        raw["prompt"] = {"template": template}
    raw.update(sections)
    ordered = {k: raw[k] for k in _ORDER if k in raw} | raw
    return copy.deepcopy(ordered)  # the callers' and the constants' dicts are never shared


def checkpointed_llm_raw(base: str | Path, *, name: str, **sections: Any) -> dict[str, Any]:
    """:func:`llm_raw` of the checkpoint and resume tests: 3 epochs, 2 rows generated per
    evaluation, a LoRA on ``q_proj``/``v_proj`` with dropout (a resume must restore the random
    state as well as the adapter and its moments), greedy 3-token generation."""
    written: dict[str, Any] = {
        "template": POS_TEMPLATE,
        "trainer": {"epochs": 3, "batch_size": 4, "learning_rate": 0.01, "eval_generation_samples": 2},
        "lr_range": (1.0e-4, 1.0e-3),
        "adapter": {**LORA, "dropout": 0.1, "target_modules": ["q_proj", "v_proj"]},
        "generation": {"max_new_tokens": 3, "do_sample": False},
    }
    return llm_raw(base, name=name, **{**written, **sections})


def llm_config(base: str | Path, **kwargs: Any) -> Any:
    """:func:`llm_raw` validated as a :class:`~ludwig_hpo.config.schema.SweepConfig`.

    Raises:
        pydantic.ValidationError: the keyword arguments make an invalid config.
    """
    from ludwig_hpo.config.schema import SweepConfig

    return SweepConfig.model_validate(llm_raw(base, **kwargs))
