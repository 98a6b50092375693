"""The model of an llm config: a causal LM with its peft adapter, its next-token loss on the
target tokens only, teacher-forced metrics as token sums, and the base model's weights kept per
process (shared by successive trials, freed for another base model).

The tiny random Llama of ``tests/hf_models.py``; one process, no Ray.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.llm import IGNORE_INDEX
from ludwig_hpo.data.preprocess import prepare
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model import build_model
from ludwig_hpo.model import llm as llm_model
from ludwig_hpo.model.llm import LLMModel
from ludwig_hpo.model.llm_metrics import LLMLoss, LLMMetrics
from ludwig_hpo.model.losses import OutputLosses
from tests.llm_configs import LORA, llm_config
from tests.llm_configs import ROWS as WORD_ROWS

pytest.importorskip("peft")

ROWS = WORD_ROWS.drop(columns="pos")


def _cfg(base: str, **extra) -> SweepConfig:
    trainer = {"epochs": 1, "batch_size": 2}
    return llm_config(
        base,
        name="u",
        split=(0.6, 0.2, 0.2, 1),
        template="Define {lemma}:",
        trainer=trainer,
        **{"adapter": LORA, **extra},
    )


@pytest.fixture(scope="module")
def setup(tiny_llama_dir):
    cfg = _cfg(str(tiny_llama_dir))
    return cfg, prepare(ROWS, cfg)


def _batch(data, rows):
    return {"lemma": torch.as_tensor(data.inputs["lemma"][rows])}, {
        "gloss": torch.as_tensor(data.targets["gloss"][rows])
    }


def test_forward_logits_and_only_the_adapter_trains(setup):
    cfg, data = setup
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    assert isinstance(model, LLMModel)
    x, y = _batch(data, [0, 1, 2])
    logits = model(x)["gloss"]
    longest = int((x["lemma"] != model.pad_id).sum(1).max())
    assert logits.shape[0] == 3 and logits.shape[2] == 512
    assert longest <= logits.shape[1] <= x["lemma"].shape[1]  # trailing padding is not computed
    trainable = model.trainable_names()
    assert trainable and all("lora_" in n for n in trainable)
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert any("embed_tokens" in n for n in frozen)


def test_loss_is_mean_cross_entropy_of_target_tokens_only(setup):
    cfg, data = setup
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    x, y = _batch(data, [0, 3])
    logits = model(x)["gloss"]
    loss = OutputLosses(cfg.output_features, data.meta)(model(x), y)
    labels = y["gloss"][:, 1 : logits.shape[1]]
    z = logits[:, :-1]
    mask = labels != IGNORE_INDEX
    logp = torch.log_softmax(z.float(), -1)
    expected = -logp[mask].gather(-1, labels[mask].unsqueeze(-1)).mean()
    assert torch.allclose(loss, expected, atol=1e-5)
    # the prompt's positions do not count: changing the logits there changes nothing
    prompt_pos = (y["gloss"] == IGNORE_INDEX)[:, 1 : logits.shape[1]]
    noisy = logits.clone().detach()
    noisy[:, :-1][prompt_pos] += torch.randn_like(noisy[:, :-1][prompt_pos]) * 5
    assert torch.allclose(LLMLoss(cfg.output_features[0])(noisy, y["gloss"]), loss.detach(), atol=1e-5)


def test_metrics_are_token_sums_that_add_over_shards(setup):
    cfg, data = setup
    torch.manual_seed(0)
    model = build_model(cfg, data.meta).eval()
    metrics = model.output_metrics["gloss"]
    assert isinstance(metrics, LLMMetrics)
    rows = list(range(6))
    with torch.no_grad():
        whole = metrics.sums(model(_batch(data, rows)[0])["gloss"], _batch(data, rows)[1]["gloss"])
        parts = sum(
            metrics.sums(model(_batch(data, r)[0])["gloss"], _batch(data, r)[1]["gloss"])
            for r in ([0, 1], [2, 3, 4], [5])
        )
    assert torch.allclose(whole, parts, atol=1e-6)
    out = metrics.finish(whole.tolist(), 6.0)
    assert set(out) == {"loss", "perplexity", "token_accuracy", "sequence_accuracy"}
    assert math.isclose(out["perplexity"], math.exp(out["loss"]), rel_tol=1e-9)
    # a row whose every target token is the argmax counts as a right sequence
    y = _batch(data, [0])[1]["gloss"]
    perfect = torch.full((1, y.shape[1], 512), -10.0)
    for t in range(y.shape[1] - 1):
        if y[0, t + 1] != IGNORE_INDEX:
            perfect[0, t, y[0, t + 1]] = 10.0
    done = metrics.finish(metrics.sums(perfect, y).tolist(), 1.0)
    assert done["token_accuracy"] == 1.0 and done["sequence_accuracy"] == 1.0


def test_trials_share_the_base_weights_and_a_new_base_frees_them(setup, tmp_path, monkeypatch):
    import tqdm

    from tests.hf_models import save_tiny_llama

    # saving the second model shows a progress bar, whose monitor thread outlives the test
    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)

    cfg, data = setup
    llm_model.clear_cache()
    reads = len(llm_model.READS)
    torch.manual_seed(1)
    first = build_model(cfg, data.meta)
    torch.manual_seed(1)
    second = build_model(cfg, data.meta)
    assert len(llm_model.READS) == reads + 1  # read once for both trials
    cached = llm_model._CACHE[0].state
    key = "model.layers.0.mlp.up_proj.weight"
    base_of = {n: p for n, p in first.model.get_base_model().named_parameters()}
    assert base_of[key].data_ptr() == cached[key].data_ptr()  # frozen: the cache's storage, no copy
    assert first is not second and first.model is not second.model
    # each trial's adapter is its own, drawn from the trial seed
    a1, a2 = first.trainable_state_dict(), second.trainable_state_dict()
    assert all(torch.equal(a1[k], a2[k]) for k in a1)
    assert all(
        p1.data_ptr() != p2.data_ptr()
        for p1, p2 in zip(first.parameters(), second.parameters(), strict=True)
        if p1.requires_grad
    )
    # full fine-tuning writes its weights: they are a copy
    full = build_model(_cfg(cfg.base_model, adapter=None), data.meta)
    assert dict(full.model.named_parameters())[key].data_ptr() != cached[key].data_ptr()
    # another base model: the old weights go first, then the new ones are read
    other = save_tiny_llama(tmp_path / "other")
    build_model(_cfg(str(other)), data.meta)
    assert [b.key[0] for b in llm_model._CACHE] == [str(other.resolve())]
    assert llm_model.READS[-1] == str(other.resolve())
    llm_model.clear_cache()


def test_trainable_state_dict_round_trip_and_generate(setup, monkeypatch):
    import tqdm

    # peft's merge loop makes a (disabled) progress bar, whose monitor thread outlives the test
    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)
    cfg, data = setup
    torch.manual_seed(0)
    a = build_model(cfg, data.meta)
    for p in a.parameters():
        if p.requires_grad:
            p.data.add_(0.5)
    torch.manual_seed(3)
    b = build_model(cfg, data.meta)
    b.load_trainable_state_dict(a.trainable_state_dict())
    assert all(torch.equal(v, b.trainable_state_dict()[k]) for k, v in a.trainable_state_dict().items())
    with pytest.raises(KeyError):
        b.load_trainable_state_dict({})
    prompt = torch.tensor([[0, 2, 40, 41], [2, 42, 43, 44]])
    mask = (prompt != 0).long()
    out = b.eval().generate(prompt, mask, max_new_tokens=3, do_sample=False)
    assert out.shape[0] == 2 and 4 < out.shape[1] <= 7
    assert torch.equal(out[:, :4], prompt)
    merged = a.merged()
    assert not hasattr(merged, "peft_config")
    # merging a copy leaves the shared base weights as they were
    key = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(
        llm_model._CACHE[0].state[key],
        dict(b.model.get_base_model().named_parameters())[key.replace("q_proj.weight", "q_proj.base_layer.weight")],
    )


def test_target_modules_not_in_the_model_are_one_line(setup):
    cfg, data = setup
    bad = _cfg(cfg.base_model, adapter={"type": "lora", "target_modules": ["query_key_value"]})
    with pytest.raises(ConfigError) as e:
        build_model(bad, data.meta)
    assert e.value.key == "adapter.target_modules"
    assert "q_proj" in str(e.value)  # the modules it has


def test_gradient_checkpointing_recomputes_each_decoder_block_with_the_same_gradients(setup):
    from ludwig_hpo.train.recompute import enable_gradient_checkpointing

    cfg, data = setup
    x, y = _batch(data, [0, 1, 3])
    grads = []
    for recompute in (False, True):
        torch.manual_seed(0)
        model = build_model(cfg, data.meta).train()
        if recompute:
            assert enable_gradient_checkpointing(model) == 2  # the tiny Llama's 2 decoder layers
        OutputLosses(cfg.output_features, data.meta)(model(x), y).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    for k, g in grads[0].items():
        torch.testing.assert_close(grads[1][k], g, rtol=1e-5, atol=1e-6)


def test_fsdp_units_are_the_decoder_blocks_and_probes_include_the_longest_row(setup):
    from ludwig_hpo.train.lengths import longest_rows
    from ludwig_hpo.train.strategy import transformer_blocks

    cfg, data = setup
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    blocks = transformer_blocks(model)
    assert [type(b).__name__ for b in blocks] == ["LlamaDecoderLayer", "LlamaDecoderLayer"]
    rows = data.splits["train"]
    longest = longest_rows(data.inputs, data.meta, rows)
    lengths = (data.inputs["lemma"][rows] != model.pad_id).sum(1)
    assert len(longest) == 1 and (data.inputs["lemma"][longest[0]] != model.pad_id).sum() == lengths.max()


def test_bf16_autocast_loss_is_finite_and_close_to_fp32(setup):
    from ludwig_hpo.train.strategy import autocast

    cfg, data = setup
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    x, y = _batch(data, [0, 1])
    losses = OutputLosses(cfg.output_features, data.meta)
    fp32 = losses(model(x), y)
    with autocast(torch.device("cpu"), "bf16"):
        bf16 = losses(model(x), y)
    assert torch.isfinite(bf16) and abs(bf16.item() - fp32.item()) < 0.1


def test_quantization_without_a_gpu_is_one_line(setup):
    cfg, data = setup
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: quantization may load")
    from ludwig_hpo.config.llm import QuantizationConfig

    quantized = cfg.model_copy(update={"quantization": QuantizationConfig(bits=4)})
    with pytest.raises(ConfigError) as e:
        build_model(quantized, data.meta)
    assert e.value.key == "quantization" and "GPU" in str(e.value)


def test_the_forward_keeps_the_column_that_predicts_the_final_eos(setup):
    cfg, data = setup
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    pad, eos = model.pad_id, model.eos_id
    ids = torch.tensor([[2, 40, 41, eos, pad, pad], [2, 40, eos, pad, pad, pad]])
    assert model.width(ids) == 4  # up to the longest row's EOS
    # a tokenizer without a pad token pads with its EOS (Ludwig's rule): the final EOS reads as
    # padding, and the column whose logit predicts it is still computed
    model.pad_id = eos
    same = torch.tensor([[2, 40, 41, eos, eos, eos]])
    assert model.width(same) == 4
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, 41, eos, IGNORE_INDEX, IGNORE_INDEX]])
    logits = model({"lemma": same})["gloss"]
    from ludwig_hpo.model.llm_metrics import shifted

    _, y = shifted(logits, labels)
    assert (y == eos).any()  # the EOS label is scored


def test_successive_trials_of_a_process_read_the_base_once_and_train_their_own_adapter(setup):
    from ludwig_hpo.train.loop import Job, train_loop

    cfg, data = setup
    llm_model.clear_cache()
    reads = len(llm_model.READS)
    trial = cfg.model_copy(
        update={"trainer": cfg.trainer.model_copy(update={"epochs": 1, "eval_generation_samples": 0})}
    )
    adapters, reports = [], []
    for lr in (0.05, 0.01):  # a warm worker's two trials, one after the other
        run = trial.model_copy(update={"trainer": trial.trainer.model_copy(update={"learning_rate": lr})})
        model = train_loop(run, data, Job(), lambda m, c: reports.append(m))
        adapters.append(model.trainable_state_dict())
    assert len(llm_model.READS) == reads + 1
    assert any(not torch.equal(adapters[0][k], adapters[1][k]) for k in adapters[0])
    assert all(r["validation/gloss/perplexity"] > 1 for r in reports)
    llm_model.clear_cache()


def test_full_fine_tuning_trains_every_weight_and_leaves_the_cached_base_as_read(setup):
    from ludwig_hpo.train.loop import Job, train_loop

    cfg, data = setup
    llm_model.clear_cache()
    full = _cfg(cfg.base_model, adapter=None)
    full = full.model_copy(
        update={
            "trainer": full.trainer.model_copy(
                update={"epochs": 1, "eval_generation_samples": 0, "learning_rate": 0.05}
            )
        }
    )
    model = train_loop(full, data, Job(), lambda m, c: None)
    assert set(model.trainable_names()) == {n for n, _ in model.named_parameters()}
    key = "model.layers.0.mlp.up_proj.weight"
    cached = llm_model._CACHE[0].state[key]
    trained = dict(model.named_parameters())[f"model.{key}"]
    assert not torch.equal(trained.detach(), cached)  # it trained its own copy
    from safetensors.torch import load_file

    on_disk = load_file(str(Path(cfg.base_model) / "model.safetensors"))[key]
    assert torch.equal(cached, on_disk)  # the cache still holds the weights as read
    llm_model.clear_cache()


def test_a_base_model_folder_without_a_tokenizer_is_one_line(tmp_path, tiny_llama_dir):
    import shutil

    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(Path(tiny_llama_dir) / "config.json", bare / "config.json")
    from ludwig_hpo.errors import DataError

    with pytest.raises(DataError) as e:
        prepare(ROWS, _cfg(str(bare)))
    assert e.value.key == "base_model" and "\n" not in str(e.value)


@pytest.mark.parametrize("tied", [False, True])
def test_a_base_built_from_the_cache_is_the_pretrained_model(tmp_path, monkeypatch, tied):
    import tqdm
    from transformers import AutoModelForCausalLM

    from tests.hf_models import save_tiny_llama

    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)  # saving shows a progress bar
    folder = save_tiny_llama(tmp_path / "m", tie_word_embeddings=tied)
    llm_model.clear_cache()
    ids = torch.tensor([[2, 40, 41, 42, 43]])
    reference = AutoModelForCausalLM.from_pretrained(str(folder))(ids).logits
    for share in (True, False):
        base = llm_model.fresh_base(str(folder), share=share)
        torch.testing.assert_close(base(ids).logits, reference, rtol=1e-5, atol=1e-5)
        # tied input and output embeddings stay one parameter (SmolLM2 and many small models tie them)
        assert (base.lm_head.weight is base.model.embed_tokens.weight) == tied
    llm_model.clear_cache()


def test_adalora_reallocates_its_ranks_each_step_and_adds_its_orthogonal_penalty(setup):
    from ludwig_hpo.model.combiners import AUX_LOSS
    from ludwig_hpo.train.loop import Job, train_loop

    cfg, data = setup
    adapter = {"type": "adalora", "init_r": 4, "target_r": 1, "tinit": 1, "tfinal": 1, "delta_t": 1, "total_step": 6}
    ada = _cfg(cfg.base_model, adapter=adapter)
    ada = ada.model_copy(
        update={"trainer": ada.trainer.model_copy(update={"epochs": 2, "batch_size": 2, "eval_generation_samples": 0})}
    )
    torch.manual_seed(0)
    model = build_model(ada, data.meta).train()
    out = model(_batch(data, [0, 1])[0])
    assert out[AUX_LOSS].requires_grad and float(out[AUX_LOSS]) > 0
    assert AUX_LOSS not in model.eval()(_batch(data, [0, 1])[0])  # a training term only
    trained = train_loop(ada, data, Job(), lambda m, c: None)
    # the budget fell from 4 ranks per matrix towards 1: update_and_allocate masked singular values
    masked = [(p == 0).sum().item() for n, p in trained.named_parameters() if "lora_E" in n]
    assert masked and sum(masked) > 0


def test_adalora_under_fsdp_is_refused_in_one_line(setup):
    cfg, data = setup
    raw_backend = {"num_workers": 2, "strategy": "fsdp"}
    ada = _cfg(cfg.base_model, adapter={"type": "adalora", "total_step": 10}, backend=raw_backend)
    with pytest.raises(ConfigError) as e:
        build_model(ada, data.meta)
    assert e.value.key == "adapter.type" and "fsdp" in str(e.value).lower()
