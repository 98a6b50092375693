"""On CUDA: the ``model_type: llm`` path with a LoRA adapter on a tiny random Llama
(:func:`tests.hf_models.save_tiny_llama`) and the WordNet lemma -> gloss rows of
``sweeps/llm_lora.yaml``: bf16 training with gradient checkpointing through the worker loop,
checkpointing's gradients and memory, FSDP's units as the decoder blocks, NCCL DDP and FSDP
through the worker loop (1 rank on any GPU machine, 2 ranks where 2 GPUs exist), 4-bit
quantization where bitsandbytes is importable, and a real CUDA out-of-memory error caught by
the batch-size search over the longest rows. Needs torch, pandas, pydantic, transformers and
peft, not Ray, Optuna or MLflow: ``tests/gpu/run_all.sh`` on a bare GPU machine.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from tests.ranks import free_port, spawn_ranks

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = ROOT / "sweeps" / "data" / "wordnet_definitions.csv"
TEMPLATE = "Define the {pos} '{lemma}':"
LORA = {"type": "lora", "r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
#: A Llama big enough on a GPU that checkpointing's saving and an out-of-memory error show.
WIDE = {"hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512, "num_attention_heads": 4}


def llm_config(model_dir: Path, trainer: dict[str, Any], backend: dict[str, Any] | None = None, **top: Any):
    """A validated ``model_type: llm`` trial config on the definitions rows (``top``: more
    top-level keys, e.g. ``quantization``)."""
    from ludwig_hpo.config.schema import SweepConfig

    raw: dict[str, Any] = {
        "name": "gpu-llm",
        "model_type": "llm",
        "base_model": str(model_dir),
        "dataset": {"source": "rows.csv", "split": {"train": 0.8, "validation": 0.1, "test": 0.1, "seed": 1}},
        "prompt": {"template": TEMPLATE},
        "input_features": [{"name": "lemma", "type": "text"}],
        "output_features": [{"name": "gloss", "type": "text"}],
        "adapter": LORA,
        "trainer": {
            "type": "finetune",
            "epochs": 3,
            "batch_size": 16,
            "learning_rate": 3e-3,
            "eval_generation_samples": 0,
            **trainer,
        },
        "hyperopt": {
            "goal": "minimize",
            "metric": "loss",
            "output_feature": "gloss",
            "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}},
        },
        **top,
    }
    if backend:
        raw["backend"] = backend
    return SweepConfig.model_validate(raw)


def rows(n: int = 256) -> pd.DataFrame:
    """The first ``n`` definitions rows (lemma, pos, gloss, label)."""
    return pd.read_csv(DEFINITIONS).head(n)


@pytest.fixture(scope="module")
def llama_dirs(tmp_path_factory) -> dict[str, Path]:
    """``tiny``: save_tiny_llama's defaults; ``wide``: :data:`WIDE`."""
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from ..hf_models import save_tiny_llama

    root = tmp_path_factory.mktemp("llama")
    return {"tiny": save_tiny_llama(root / "tiny"), "wide": save_tiny_llama(root / "wide", **WIDE)}


def _train(cfg, data, device: torch.device) -> tuple[list[dict], torch.nn.Module]:
    from ludwig_hpo.train.loop import Job, train_loop

    reports: list[dict] = []
    model = train_loop(cfg, data, Job(), lambda m, c: reports.append(m), device=device)
    return reports, model


def _trainable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapter's weights, on the CPU in float32."""
    inner = getattr(model, "module", model)  # a DDP-wrapped model's own module
    return {k: v.detach().float().cpu() for k, v in inner.trainable_state_dict().items()}


def test_lora_bf16_with_gradient_checkpointing_trains_on_one_gpu(llama_dirs):
    from ludwig_hpo.data import prepare

    cfg = llm_config(llama_dirs["tiny"], {"precision": "bf16", "enable_gradient_checkpointing": True})
    reports, model = _train(cfg, prepare(rows(), cfg), torch.device("cuda", 0))
    losses = [m["train/combined/running_loss"] for m in reports]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses
    perplexity = reports[-1]["validation/gloss/perplexity"]
    assert math.isfinite(perplexity) and perplexity >= 1.0
    adapter = _trainable(model)
    assert adapter and all("lora_" in k for k in adapter), sorted(adapter)[:5]
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert all(p.is_cuda and p.dtype == torch.float32 for p in trainable)  # autocast, not a cast adapter


def test_gradient_checkpointing_gives_the_same_lora_gradients_with_less_memory(llama_dirs):
    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.losses import OutputLosses
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.recompute import enable_gradient_checkpointing
    from ludwig_hpo.train.step import combined_loss
    from ludwig_hpo.train.strategy import autocast

    device = torch.device("cuda", 0)
    cfg = llm_config(llama_dirs["wide"], {"precision": "bf16"})
    data = prepare(rows(), cfg)
    dd = DeviceData(data, device)
    x, y = dd.batch(torch.arange(64, device=device))
    losses = OutputLosses(cfg.output_features, data.meta)
    grads, peaks = [], []
    for recompute in (False, True):
        torch.manual_seed(0)
        model = build_model(cfg, data.meta).to(device).train()
        if recompute:
            assert enable_gradient_checkpointing(model) >= WIDE["num_hidden_layers"]
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        with autocast(device, "bf16"):
            loss = combined_loss(cfg, model(x), y, losses)
        loss.backward()
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated(device) - base)
        grads.append({k: p.grad.float().clone() for k, p in model.named_parameters() if p.grad is not None})
    assert grads[0] and set(grads[1]) == set(grads[0])  # the adapter gets gradients through recomputed blocks
    assert all("lora_" in k for k in grads[0]), sorted(grads[0])[:5]
    assert peaks[1] < peaks[0], peaks  # the decoder blocks' activations were not kept
    for k in grads[0]:
        torch.testing.assert_close(grads[1][k], grads[0][k], rtol=2e-2, atol=2e-3, msg=k)


def _fsdp_one_rank(rank: int, port: int, model_dir: str, out: str) -> None:
    """One NCCL rank: the LoRA model sharded by the product's units (``fsdp_units``), trained a
    few bf16 steps with gradient checkpointing, against the same steps unsharded."""
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule, fully_shard
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.losses import OutputLosses
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.recompute import enable_gradient_checkpointing
    from ludwig_hpo.train.step import combined_loss
    from ludwig_hpo.train.strategy import autocast, fsdp_units, full_state_dict

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    results: dict[str, Any] = {}
    try:
        cfg = llm_config(Path(model_dir), {"precision": "bf16"})
        data = prepare(rows(), cfg)
        dd = DeviceData(data, device)
        losses = OutputLosses(cfg.output_features, data.meta)
        states = []
        for shard in (False, True):
            torch.manual_seed(0)
            model = build_model(cfg, data.meta).to(device).train()
            enable_gradient_checkpointing(model)
            if shard:
                units = list(fsdp_units(model))
                for unit in units:
                    fully_shard(unit)
                fully_shard(model)
                blocks = [m for m in model.modules() if isinstance(m, LlamaDecoderLayer)]
                results["blocks"] = len(blocks)
                results["blocks_sharded"] = all(isinstance(b, FSDPModule) for b in blocks)
            opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
            for step in range(3):
                x, y = dd.batch(torch.arange(step * 16, step * 16 + 16, device=device))
                with autocast(device, "bf16"):
                    loss = combined_loss(cfg, model(x), y, losses)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            states.append({k: v.float().cpu() for k, v in full_state_dict(model).items() if "lora_" in k})
        results["adapter_keys"] = len(states[0])
        results["max_diff"] = max(float((states[1][k] - v).abs().max()) for k, v in states[0].items())
        torch.save(results, os.path.join(out, "fsdp.pt"))
    finally:
        dist.destroy_process_group()


def test_fsdp_units_are_the_decoder_blocks_and_train_as_the_unsharded_lora_model(tmp_path, llama_dirs):
    spawn_ranks(_fsdp_one_rank, (free_port(), str(llama_dirs["tiny"]), str(tmp_path)), 1)
    results = torch.load(tmp_path / "fsdp.pt")
    assert results["blocks"] == 2 and results["blocks_sharded"], results
    assert results["adapter_keys"] > 0, results
    assert results["max_diff"] < 1e-2, results


def _loop_rank(rank: int, world: int, port: int, strategy: str, model_dir: str, out: str) -> None:
    import torch.distributed as dist

    from ludwig_hpo.data import prepare

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    try:
        trainer = {"precision": "bf16", "enable_gradient_checkpointing": True}
        cfg = llm_config(Path(model_dir), trainer, {"num_workers": world, "strategy": strategy})
        reports, model = _train(cfg, prepare(rows(), cfg), device)
        # FSDP's sharded parameters: the full state dict gathers them (a collective, every rank)
        from ludwig_hpo.train.strategy import full_state_dict

        state = {k: v.float().cpu() for k, v in full_state_dict(model).items() if "lora_" in k}
        torch.save({"reports": reports, "state": state}, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_nccl_lora_bf16_through_the_worker_loop(tmp_path, strategy, world, llama_dirs):
    if torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} GPUs for {world} NCCL ranks")
    spawn_ranks(_loop_rank, (world, free_port(), strategy, str(llama_dirs["tiny"]), str(tmp_path)), world)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    r0 = ranks[0]
    assert r0["state"], "no adapter weights"
    for other in ranks[1:]:
        for k in r0["state"]:
            torch.testing.assert_close(other["state"][k], r0["state"][k], rtol=0, atol=0, msg=k)
        assert other["reports"][-1]["objective"] == r0["reports"][-1]["objective"]
    losses = [m["train/combined/running_loss"] for m in r0["reports"]]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses


def test_4bit_quantized_base_trains_a_lora_adapter(llama_dirs):
    bnb = pytest.importorskip("bitsandbytes")
    from ludwig_hpo.data import prepare

    cfg = llm_config(
        llama_dirs["wide"],
        {"precision": "bf16", "epochs": 2},
        quantization={"bits": 4, "bnb_4bit_compute_dtype": "bfloat16"},
    )
    reports, model = _train(cfg, prepare(rows(), cfg), torch.device("cuda", 0))
    losses = [m["train/combined/running_loss"] for m in reports]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses
    quantized = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert quantized, "no 4-bit linear layer in the trained model"
    assert all("lora_" in k for k in _trainable(model))


def test_real_cuda_oom_in_the_llm_batch_size_search_is_caught_and_the_chosen_size_trains(tmp_path):
    """A 32,000-token vocabulary makes the logits of long rows large: a few dozen 200-token rows
    exceed a 3 GB share of the GPU, so the search meets a real out-of-memory error."""
    pytest.importorskip("peft")
    from ludwig_hpo.data import prepare

    from ..hf_models import save_tiny_llama

    model_dir = save_tiny_llama(tmp_path / "big-vocab", vocab_size=32000, max_position_embeddings=512, **WIDE)
    frame = pd.concat([rows(600)] * 4, ignore_index=True)  # a cap (rows / 20 steps) above what fits
    # long targets: the search probes at the longest row a batch can hold
    frame["gloss"] = (frame["gloss"] + " ") * 12
    cfg = llm_config(
        model_dir,
        {"epochs": 1, "batch_size": "auto", "max_batch_size": 4096, "eval_batch_size": 8},
        preprocessing={"global_max_sequence_length": 256},
    )
    data = prepare(frame, cfg)
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(3e9 / torch.cuda.get_device_properties(0).total_memory)
    try:
        reports, _ = _train(cfg, data, torch.device("cuda", 0))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    tried = reports[0]["batch_size_tried"]
    assert "oom" in tried, tried  # a real CUDA out-of-memory error happened and was caught
    assert reports[0]["epoch"] == 1 and math.isfinite(reports[0]["objective"])  # the full epoch trained
    oom_sizes = [int(p.split(":")[0]) for p in tried.split(";") if p.endswith("oom")]
    assert reports[0]["batch_size"] < min(oom_sizes)
