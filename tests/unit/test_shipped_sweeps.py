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


def test_the_llm_sweep_is_a_lora_search_on_a_llama_ranked_by_generated_answers() -> None:
    from ludwig_hpo.config import load_sweep

    cfg = load_sweep(ROOT / "sweeps" / "llm_lora.yaml").config
    assert cfg.is_llm and cfg.base_model == "HuggingFaceTB/SmolLM2-135M"
    assert cfg.adapter is not None and cfg.adapter.type == "lora"
    assert cfg.adapter.target_modules == ["q_proj", "v_proj"]  # a Llama's attention projections
    assert cfg.prompt is not None and cfg.prompt.template == "Define the {pos} '{lemma}':"
    assert set(cfg.hyperopt.parameters) == {"adapter.r", "adapter.alpha", "trainer.learning_rate"}
    assert cfg.hyperopt.metric_key == "validation/gloss/rouge_l" and cfg.hyperopt.goal == "maximize"
    assert cfg.trainer.eval_generation_samples > 0  # rouge_l needs generated answers
    assert cfg.generation.do_sample is False  # the same answers at every evaluation


def test_the_llm_sweep_validates_offline_noting_its_hub_model_unchecked(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from ludwig_hpo.cli import app

    monkeypatch.chdir(tmp_path)
    # hpo validate asks no hub (HF_HUB_OFFLINE would make the model one that cannot be fetched)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: the model is not here
    result = CliRunner().invoke(app, ["validate", str(ROOT / "sweeps" / "llm_lora.yaml")])
    assert result.exit_code == 0, result.stderr
    noted = [line for line in result.output.splitlines() if "HuggingFaceTB/SmolLM2-135M" in line]
    assert noted and any("not checked" in line or "offline" in line for line in noted), result.output
    assert not (tmp_path / "hf").exists()  # nothing was fetched or cached
