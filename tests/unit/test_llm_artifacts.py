"""What an LLM trial leaves behind: checkpoints and best weights hold the adapter only (and the
optimizer state of its trainable parameters), never the base weights; resuming loads the base,
then the adapter, and continues as an uninterrupted run; full fine-tuning saves the whole model.

The tiny random Llama of ``tests/hf_models.py`` with a peft LoRA adapter, one process, no Ray.
"""

from __future__ import annotations

import os

import pytest
import torch

from ludwig_hpo.config import load_sweep
from ludwig_hpo.errors import CheckpointError
from ludwig_hpo.model.saved_weights import (
    adapter_only,
    load_saved_state_dict,
    saved_bytes,
    saved_state_dict,
)
from ludwig_hpo.train.checkpoint import CheckpointFolder, WeightsCopy, serialized
from ludwig_hpo.train.report_keys import MODEL_FILE, TRAINER_STATE_FILE
from ludwig_hpo.train.resume import copy_best_weights, resume, trainer_state
from tests.llm_configs import checkpointed_llm_raw

from ..conftest import SWEEPS

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

LR = 0.05


class CausalLM(torch.nn.Module):
    """A causal LM with an optional LoRA adapter, as a trial holds one: ``forward(ids)`` -> logits."""

    def __init__(self, folder, *, lora: bool = True, r: int = 4) -> None:
        super().__init__()
        base = transformers.AutoModelForCausalLM.from_pretrained(folder)
        if lora:
            cfg = peft.LoraConfig(r=r, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
            base = peft.get_peft_model(base, cfg)
        self.lm = base

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=ids).logits


def _batch(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 200, (4, 12), generator=g)


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, seed: int) -> float:
    ids = _batch(seed)
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def _optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LR)


@pytest.fixture(scope="module")
def cfg():
    raw = {**load_sweep(SWEEPS / "breast_cancer_tiny.yaml").raw, "trainer": {"optimizer": {"type": "adam"}}}
    from ludwig_hpo.config.schema import SweepConfig

    return SweepConfig.model_validate(raw)


def _write_checkpoint(model, optimizer, folder: CheckpointFolder, epoch: int) -> str:
    cpu = torch.device("cpu")
    best = copy_best_weights(model, model, WeightsCopy(), fsdp=False, rank=0)
    state = trainer_state(
        model,
        model,
        optimizer,
        torch.amp.GradScaler("cpu", enabled=False),
        fsdp=False,
        rank=0,
        device=cpu,
        state={"epoch": epoch, "best_objective": 1.0, "best_epoch": epoch},
        with_weights=False,
    )
    folder.write(serialized({"state_dict": best, "epoch": epoch}), MODEL_FILE)
    return folder.write(state, TRAINER_STATE_FILE)


def test_an_adapter_models_saved_weights_are_its_lora_parameters_only(tiny_llama_dir):
    model = CausalLM(tiny_llama_dir)
    saved = saved_state_dict(model)
    assert adapter_only(model)
    assert saved and all("lora_" in k for k in saved), list(saved)[:5]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert set(saved) == trainable
    whole = sum(p.numel() * p.element_size() for p in model.parameters())
    assert saved_bytes(model) == sum(v.numel() * v.element_size() for v in saved.values()) < whole / 10


def test_a_checkpoint_of_an_adapter_model_holds_no_base_weights(tiny_llama_dir, cfg, tmp_path):
    model = CausalLM(tiny_llama_dir)
    optimizer = _optimizer(model)
    _step(model, optimizer, 0)
    folder = CheckpointFolder()
    try:
        path = _write_checkpoint(model, optimizer, folder, epoch=1)
        best = torch.load(os.path.join(path, MODEL_FILE), weights_only=True)["state_dict"]
        assert all("lora_" in k for k in best)
        base_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if not p.requires_grad)
        for name in (MODEL_FILE, TRAINER_STATE_FILE):
            size = os.path.getsize(os.path.join(path, name))
            assert size < base_bytes / 4, (name, size, base_bytes)
    finally:
        folder.close()


def test_full_fine_tuning_saves_the_whole_model(tiny_llama_dir):
    model = CausalLM(tiny_llama_dir, lora=False)
    assert not adapter_only(model)
    assert set(saved_state_dict(model)) == set(model.state_dict())


def test_resuming_loads_the_base_then_the_adapter_and_continues_identically(tiny_llama_dir, cfg):
    torch.manual_seed(1)
    model = CausalLM(tiny_llama_dir)
    optimizer = _optimizer(model)
    for seed in range(2):
        _step(model, optimizer, seed)
    folder = CheckpointFolder()
    try:
        path = _write_checkpoint(model, optimizer, folder, epoch=2)
        uninterrupted = [_step(model, optimizer, seed) for seed in (2, 3)]
        torch.manual_seed(99)  # another adapter initialisation: the checkpoint's must replace it
        fresh = CausalLM(tiny_llama_dir)
        fresh_optimizer = _optimizer(fresh)
        state, best = resume(
            path, fresh, fresh_optimizer, torch.amp.GradScaler("cpu", enabled=False), LR, cfg, torch.device("cpu")
        )
        assert state["epoch"] == 2 and best["epoch"] == 2
        continued = [_step(fresh, fresh_optimizer, seed) for seed in (2, 3)]
    finally:
        folder.close()
    assert continued == pytest.approx(uninterrupted, rel=1e-6)
    for (k, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=k)


def test_an_adapter_checkpoint_of_another_rank_is_a_checkpoint_error(tiny_llama_dir, cfg):
    model = CausalLM(tiny_llama_dir, r=4)
    optimizer = _optimizer(model)
    _step(model, optimizer, 0)
    folder = CheckpointFolder()
    try:
        path = _write_checkpoint(model, optimizer, folder, epoch=1)
        other = CausalLM(tiny_llama_dir, r=8)
        with pytest.raises(CheckpointError, match="cannot resume"):
            resume(
                path, other, _optimizer(other), torch.amp.GradScaler("cpu", enabled=False), LR, cfg, torch.device("cpu")
            )
    finally:
        folder.close()


def test_loading_saved_adapter_weights_refuses_foreign_keys_and_missing_ones(tiny_llama_dir):
    model = CausalLM(tiny_llama_dir)
    saved = {k: v.clone() for k, v in saved_state_dict(model).items()}
    with pytest.raises(RuntimeError, match="lack"):
        load_saved_state_dict(model, dict(list(saved.items())[1:]))
    with pytest.raises(RuntimeError, match="has not"):
        load_saved_state_dict(model, {**saved, "not.a.key": torch.zeros(1)})
    load_saved_state_dict(model, saved)


# ---------------------------------------------------------------------- the worker loop's llm trials
def _llm_raw(base, **overrides) -> dict:
    return checkpointed_llm_raw(base, name="llm-artifacts", **{"backend": {"num_workers": 1}, **overrides})


LLM_ROWS = {
    "lemma": [f"word{i}" for i in range(16)],
    "pos": ["noun"] * 16,
    "gloss": [f"the meaning of word {i}" for i in range(16)],
}


def _llm_run(raw: dict, job, keep=None):
    import shutil

    import pandas as pd

    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.data import prepare
    from ludwig_hpo.train.loop import train_loop

    cfg = SweepConfig.model_validate(raw)
    data = prepare(pd.DataFrame(LLM_ROWS), cfg)
    reports, saved = [], {}

    def report(metrics, ckpt):
        reports.append(dict(metrics))
        if ckpt is not None and keep is not None:
            saved[metrics["epoch"]] = shutil.copytree(ckpt, keep / f"epoch_{metrics['epoch']}")

    model = train_loop(cfg, data, job, report)
    return reports, saved, model


def test_an_llm_trial_resumed_from_its_adapter_checkpoint_equals_an_uninterrupted_run(tiny_llama_dir, tmp_path):
    from ludwig_hpo.train.loop import Job

    raw = _llm_raw(tiny_llama_dir)
    whole, saved, model = _llm_run(raw, Job(checkpoint_every=1), keep=tmp_path)
    best = torch.load(saved[1] / MODEL_FILE, weights_only=True)["state_dict"]
    assert best and all("lora_" in k for k in best)
    base_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
    assert os.path.getsize(saved[1] / MODEL_FILE) + os.path.getsize(saved[1] / TRAINER_STATE_FILE) < base_bytes / 4
    rest, _, resumed = _llm_run(raw, Job(checkpoint_every=1, resume_from=str(saved[1])))
    assert [r["epoch"] for r in rest] == [2, 3]
    for a, b in zip(whole[1:], rest, strict=True):
        for key in ("objective", "train/combined/running_loss", "validation/gloss/token_accuracy", "optimizer_steps"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), key
    for (k, a), b in zip(saved_state_dict(model).items(), saved_state_dict(resumed).values(), strict=True):
        torch.testing.assert_close(a, b, msg=k)


def test_a_fully_fine_tuned_llm_trial_checkpoints_the_whole_model(tiny_llama_dir, tmp_path):
    from ludwig_hpo.train.loop import Job

    raw = _llm_raw(tiny_llama_dir, trainer={**_llm_raw(tiny_llama_dir)["trainer"], "epochs": 1})
    del raw["adapter"]
    _, saved, model = _llm_run(raw, Job(checkpoint_every=1), keep=tmp_path)
    best = torch.load(saved[1] / MODEL_FILE, weights_only=True)["state_dict"]
    assert set(best) == set(model.state_dict())
