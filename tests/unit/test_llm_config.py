"""The sweep-file language of ``model_type: llm`` (:mod:`ludwig_hpo.config.llm`): every key with
Ludwig's default, the peft and generation keyword arguments the libraries accept, the
upgrades of Ludwig's old names, the searchable paths, and each bad input as one located line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.llm import DEFAULT_TEMPLATE, PromptConfig, template_fields
from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.config.metrics import METRICS
from ludwig_hpo.errors import ConfigError

LLM = """\
name: gloss
model_type: llm
base_model: ./tiny-llama
dataset: {source: rows.csv}
input_features:
  - {name: word, type: text}
output_features:
  - {name: gloss, type: text}
prompt:
  template: "Define {word}:"
hyperopt:
  parameters:
    trainer.learning_rate: {space: loguniform, lower: 0.0001, upper: 0.01}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str = LLM):
    return load_sweep(write(tmp_path, text)).config


def error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_sweep(write(tmp_path, text))
    assert len(str(info.value).splitlines()) == 1
    return info.value


# ---------------------------------------------------------------------------- keys and defaults
def test_an_llm_config_loads_with_ludwigs_defaults(tmp_path):
    cfg = load(tmp_path)
    assert cfg.is_llm and cfg.model_type == "llm" and cfg.base_model == "./tiny-llama"
    assert cfg.adapter is None and cfg.quantization is None  # Ludwig: no adapter is full fine-tuning
    assert cfg.trainer.type == "finetune" and cfg.trainer.eval_batch_size == 2  # Ludwig's finetune trainer
    assert cfg.trainer.eval_generation_samples == 32
    out = cfg.llm_output
    assert (out.type, out.loss.type, out.decoder.type) == ("text", "next_token_softmax_cross_entropy", "text_extractor")
    assert out.preprocessing.max_sequence_length is None and out.preprocessing.missing_value_strategy == "drop_row"
    assert cfg.input_features[0].preprocessing.max_sequence_length is None  # Ludwig's text_llm_input
    assert cfg.prompt is not None and cfg.prompt.template == "Define {word}:" and cfg.prompt.task is None
    assert cfg.hyperopt.metric_key == "validation/combined/loss"


def test_an_ecd_config_is_not_an_llm(tmp_path):
    text = LLM.replace("model_type: llm\nbase_model: ./tiny-llama\n", "").replace(
        'prompt:\n  template: "Define {word}:"\n', ""
    )
    text = text.replace("{name: gloss, type: text}", "{name: gloss, type: category}")
    cfg = load(tmp_path, text)
    assert not cfg.is_llm and cfg.model_type == "ecd"
    with pytest.raises(TypeError):
        cfg.llm_output  # noqa: B018 (the property raises)


def test_generation_defaults_are_ludwigs_and_transformers_accepts_them(tmp_path):
    from transformers import GenerationConfig

    gen = load(tmp_path).generation
    assert (gen.max_new_tokens, gen.temperature, gen.top_k, gen.top_p, gen.num_beams, gen.do_sample) == (
        32,
        0.1,
        50,
        1.0,
        1,
        True,
    )
    kwargs = gen.hf_kwargs()
    assert "max_length" not in kwargs and kwargs["max_new_tokens"] == 32  # max_new_tokens overrides it
    assert all(v is not None for v in kwargs.values())
    GenerationConfig(**kwargs).validate(strict=True)


def test_greedy_generation_leaves_the_sampling_options_out(tmp_path):
    from transformers import GenerationConfig

    kwargs = load(tmp_path, LLM + "generation: {do_sample: false, num_beams: 2}\n").generation.hf_kwargs()
    assert kwargs["do_sample"] is False and not {"temperature", "top_k", "top_p", "typical_p"} & set(kwargs)
    GenerationConfig(**kwargs).validate(strict=True)  # Ludwig's temperature 0.1 would be flagged with greedy search


def test_generation_keys_are_read(tmp_path):
    text = LLM + "generation: {max_new_tokens: 8, do_sample: false, num_beams: 2, repetition_penalty: 1.3}\n"
    kwargs = load(tmp_path, text).generation.hf_kwargs()
    assert (kwargs["max_new_tokens"], kwargs["do_sample"], kwargs["num_beams"], kwargs["repetition_penalty"]) == (
        8,
        False,
        2,
        1.3,
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{temperature: 0}", "temperature 0 with do_sample: true"),
        ("{num_beams: 3, num_beam_groups: 2}", "must be a multiple of num_beam_groups"),
        ("{forced_decoder_ids: [[1, 2]]}", "generation.forced_decoder_ids is not supported"),
        ("{top_p: 1.5}", "less than or equal to 1"),
        ("{max_new_tokenz: 4}", "unknown key"),
    ],
)
def test_bad_generation_keys_are_one_line(tmp_path, section, message):
    err = error(tmp_path, LLM + f"generation: {section}\n")
    assert err.key.startswith("generation") and message in err.message


def test_lora_defaults_and_its_peft_kwargs(tmp_path):
    import peft

    adapter = load(tmp_path, LLM + "adapter: {type: lora}\n").adapter
    assert adapter is not None and adapter.type == "lora" and adapter.peft_class_name == "LoraConfig"
    assert (adapter.r, adapter.alpha, adapter.dropout, adapter.bias, adapter.target_modules) == (
        8,
        16,
        0.05,
        "none",
        None,
    )
    assert adapter.postprocessor.merge_adapter_into_base_model is False
    kwargs = adapter.peft_kwargs()
    assert kwargs["task_type"] == "CAUSAL_LM" and (kwargs["r"], kwargs["lora_alpha"], kwargs["lora_dropout"]) == (
        8,
        16,
        0.05,
    )
    made = peft.LoraConfig(**kwargs)
    assert (made.r, made.lora_alpha, made.bias, made.target_modules) == (8, 16, "none", None)


@pytest.mark.parametrize(
    ("written", "kind"),
    [("lora", "lora"), ("{r: 4}", "lora"), ("{type: ia3}", "ia3"), ("{type: adalora, init_r: 6}", "adalora")],
)
def test_ludwigs_short_forms_of_adapter(tmp_path, written, kind):
    assert load(tmp_path, LLM + f"adapter: {written}\n").adapter.type == kind


@pytest.mark.parametrize("kind", ["lora", "adalora", "ia3", "loha", "lokr", "vera"])
def test_every_adapter_type_builds_its_peft_config(tmp_path, kind):
    import peft

    adapter = load(tmp_path, LLM + f"adapter: {{type: {kind}, target_modules: [q_proj, v_proj]}}\n").adapter
    made = getattr(peft, adapter.peft_class_name)(**adapter.peft_kwargs())
    assert set(made.target_modules) == {"q_proj", "v_proj"} and made.task_type == "CAUSAL_LM"


def test_ludwigs_bias_type_and_postprocessor_are_read(tmp_path):
    text = LLM + "adapter: {type: lora, bias_type: lora_only, postprocessor: {merge_adapter_into_base_model: true}}\n"
    adapter = load(tmp_path, text).adapter
    assert adapter.bias == "lora_only" and adapter.peft_kwargs()["bias"] == "lora_only"
    assert adapter.postprocessor.merge_adapter_into_base_model is True


def test_adalora_keys_in_peft_spelling(tmp_path):
    import peft

    adapter = load(tmp_path, LLM + "adapter: {type: adalora, delta_t: 3, total_step: 500, tinit: 10}\n").adapter
    made = peft.AdaLoraConfig(**adapter.peft_kwargs())
    assert (made.deltaT, made.total_step, made.tinit, made.init_r, made.target_r) == (3, 500, 10, 12, 8)


@pytest.mark.parametrize(
    ("section", "key", "message"),
    [
        ("{type: prompt_tuning}", "adapter", "adapter type 'prompt_tuning' is not supported yet"),
        ("{type: lorax}", "adapter", "lorax"),
        ("{type: lora, r: 0}", "adapter.r", "greater than or equal to 1"),
        ("{type: lora, dropout: 1.5}", "adapter.dropout", "less than or equal to 1"),
        ("{type: lora, pretrained_adapter_weights: x/y}", "adapter", "pretrained_adapter_weights"),
        ("{type: lora, init_lora_weights: loftq}", "adapter", "init_lora_weights: loftq is not supported yet"),
        ("{type: lora, target_modules: []}", "adapter", "empty list"),
        ("{type: lora, bias: all, bias_type: none}", "adapter", "set twice"),
        ("{type: adalora, tinit: 5, tfinal: 5, total_step: 10}", "adapter", "must be below total_step"),
    ],
)
def test_bad_adapter_keys_are_one_line(tmp_path, section, key, message):
    err = error(tmp_path, LLM + f"adapter: {section}\n")
    assert err.key.startswith(key) and message in err.message, err
    assert err.fix, err  # every line says how to fix it (a number out of range: its range)


def test_quantization_defaults_are_ludwigs(tmp_path):
    text = LLM + "quantization: {bits: 8}\nbackend: {use_gpu: auto}\n"
    q = load(tmp_path, text).quantization
    assert q is not None and (q.bits, q.llm_int8_threshold, q.bnb_4bit_quant_type, q.bnb_4bit_compute_dtype) == (
        8,
        6.0,
        "nf4",
        "float16",
    )
    assert q.bnb_kwargs()["load_in_8bit"] is True and q.bnb_kwargs()["load_in_4bit"] is False
    import torch
    from transformers import BitsAndBytesConfig

    made = BitsAndBytesConfig(**q.bnb_kwargs())  # built without bitsandbytes; loading needs it and CUDA
    assert made.load_in_8bit and made.llm_int8_threshold == 6.0 and made.bnb_4bit_compute_dtype == torch.float16


def test_quantization_without_a_gpu_is_refused_at_the_config(tmp_path):
    err = error(tmp_path, LLM + "quantization: {bits: 4}\nbackend: {use_gpu: false}\n")
    assert err.key == "quantization" and "needs a GPU" in err.message and "use_gpu" in err.fix


def test_quantization_bits_are_4_or_8(tmp_path):
    err = error(tmp_path, LLM + "quantization: {bits: 2}\n")
    assert err.key == "quantization.bits"


# ---------------------------------------------------------------------------- prompt
def test_template_fields_are_read_as_str_format_reads_them():
    assert template_fields("Q: {q} {a:.2f} {q} {{literal}}") == ["q", "a"]


def test_a_task_without_template_uses_ludwigs_default_template():
    prompt = PromptConfig(task="define the word")
    assert prompt.effective_template == DEFAULT_TEMPLATE and prompt.columns == []
    assert "{__sample__}" in DEFAULT_TEMPLATE and "{__task__}" in DEFAULT_TEMPLATE


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{}", "prompt needs a template or a task"),
        ('{template: "no fields"}', "names no column"),
        ('{template: "{__task__}", task: t}', "names no column"),
        ('{template: "{word}", task: t}', "has no {__task__} field"),
        ('{template: "{__context__} {word}"}', "{__context__}"),
        ('{template: "{word:>10}"}', "format spec"),
        ('{template: "{word"}', "cannot be read as a template"),
        ('{template: "{} x"}', "empty {} placeholder"),
        ('{template: "{word!x}"}', "conversion str.format does not know"),
        ("{task: t, retrieval: {type: random, k: 2}}", "prompt.retrieval"),
    ],
)
def test_bad_prompts_are_one_line(tmp_path, section, message):
    text = LLM.replace('prompt:\n  template: "Define {word}:"\n', f"prompt: {section}\n")
    err = error(tmp_path, text)
    assert err.key.startswith("prompt") and message in err.message, err


def test_an_llm_without_prompt_reads_the_input_cell_as_the_prompt(tmp_path):
    assert load(tmp_path, LLM.replace('prompt:\n  template: "Define {word}:"\n', "")).prompt is None


# ---------------------------------------------------------------------------- features and lengths
def test_written_lengths_are_kept_and_defaults_apply(tmp_path):
    text = LLM.replace("{name: word, type: text}", "{name: word, type: text, preprocessing: {max_sequence_length: 12}}")
    assert load(tmp_path, text).input_features[0].preprocessing.max_sequence_length == 12
    text = (
        LLM
        + "defaults: {text: {preprocessing: {max_sequence_length: 20}}}\npreprocessing: {global_max_sequence_length: 64}\n"
    )
    cfg = load(tmp_path, text)
    assert cfg.input_features[0].preprocessing.max_sequence_length == 20
    assert cfg.preprocessing is not None and cfg.preprocessing.global_max_sequence_length == 64


def test_an_ecd_text_input_keeps_its_default_length(tmp_path):
    text = LLM.replace("model_type: llm\nbase_model: ./tiny-llama\n", "").replace(
        'prompt:\n  template: "Define {word}:"\n', ""
    )
    cfg = load(tmp_path, text.replace("{name: gloss, type: text}", "{name: gloss, type: category}"))
    assert cfg.input_features[0].preprocessing.max_sequence_length == 256


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ("base_model: ./tiny-llama\n", "", "base_model", "needs base_model"),
        ("{name: gloss, type: text}", "{name: gloss, type: category}", "output_features[gloss].type", "is type text"),
        ("{name: word, type: text}", "{name: word, type: number}", "input_features[word].type", "is type text"),
        (
            "  - {name: word, type: text}\n",
            "  - {name: word, type: text}\n  - {name: pos, type: text}\n",
            "input_features[pos]",
            "exactly one input feature",
        ),
        (
            "{name: word, type: text}",
            "{name: word, type: text, encoder: {type: bert}}",
            "input_features[word].encoder",
            "has no encoder",
        ),
        (
            "{name: word, type: text}",
            "{name: word, type: text, preprocessing: {tokenizer: space}}",
            "input_features[word].preprocessing.tokenizer",
            "base model's tokenizer",
        ),
        ("{name: word, type: text}", "{name: adapter, type: text}", "input_features[adapter].name", "llm section"),
        ("hyperopt:\n", "combiner: {type: concat}\nhyperopt:\n", "combiner", "has no combiner"),
        ("hyperopt:\n", "model_parameters: {rope_scaling: {}}\nhyperopt:\n", "model_parameters", "not supported yet"),
        ("hyperopt:\n", "trainer: {type: none}\nhyperopt:\n", "trainer.type", "in-context learning"),
        ("hyperopt:\n", "trainer: {type: trainer}\nhyperopt:\n", "trainer.type", "not a trainer of model_type llm"),
        (
            "hyperopt:\n",
            "trainer: {base_learning_rate: 0.1}\nhyperopt:\n",
            "trainer.base_learning_rate",
            "not supported",
        ),
        (
            "hyperopt:\n",
            "trainer: {layers_to_freeze_regex: x}\nhyperopt:\n",
            "trainer.layers_to_freeze_regex",
            "not supported",
        ),
        (
            "{name: gloss, type: text}",
            "{name: gloss, type: text, loss: {type: x}}",
            "output_features[gloss].loss",
            "next_token_softmax_cross_entropy",
        ),
    ],
)
def test_bad_llm_files_are_one_line_at_the_key(tmp_path, old, new, key, message):
    assert old in LLM
    err = error(tmp_path, LLM.replace(old, new, 1))
    assert err.key.startswith(key) and message in err.message, err


def test_ludwigs_passthrough_encoder_of_an_llm_input_is_accepted(tmp_path):
    text = LLM.replace("{name: word, type: text}", "{name: word, type: text, encoder: {type: passthrough}}")
    assert load(tmp_path, text).input_features[0].name == "word"


def test_a_text_output_of_an_ecd_model_names_model_type_llm(tmp_path):
    text = LLM.replace("model_type: llm\nbase_model: ./tiny-llama\n", "").replace(
        'prompt:\n  template: "Define {word}:"\n', ""
    )
    err = error(tmp_path, text)
    assert err.key == "output_features[gloss].type" and "model_type: llm" in err.fix


def test_eval_generation_samples_is_an_llm_key(tmp_path):
    text = LLM.replace("model_type: llm\nbase_model: ./tiny-llama\n", "").replace(
        'prompt:\n  template: "Define {word}:"\n', ""
    )
    text = text.replace("{name: gloss, type: text}", "{name: gloss, type: category}")
    err = error(tmp_path, text + "trainer: {eval_generation_samples: 4}\n")
    assert err.key == "trainer.eval_generation_samples"
    assert load(tmp_path, LLM + "trainer: {eval_generation_samples: 0}\n").trainer.eval_generation_samples == 0


# ---------------------------------------------------------------------------- metrics
def test_the_text_output_reports_teacher_forced_and_generated_metrics():
    assert METRICS["text"] == {
        "loss": False,
        "perplexity": False,
        "token_accuracy": True,
        "sequence_accuracy": True,
        "exact_match": True,
        "rouge_l": True,
    }


def test_a_sweep_can_rank_by_rouge_l(tmp_path):
    text = LLM.replace("hyperopt:\n", "hyperopt:\n  output_feature: gloss\n  metric: rouge_l\n  goal: maximize\n")
    hp = load(tmp_path, text).hyperopt
    assert (hp.metric_key, hp.goal) == ("validation/gloss/rouge_l", "maximize")
    err = error(tmp_path, text.replace("metric: rouge_l", "metric: accuracy"))
    assert err.key == "hyperopt.metric" and "rouge_l" in err.message
    err = error(tmp_path, text.replace("  output_feature: gloss\n", ""))  # the combined output has a loss only
    assert err.key == "hyperopt.metric" and err.fix == "set hyperopt.output_feature: gloss to rank by its rouge_l"


# ---------------------------------------------------------------------------- upgrades
def test_ludwigs_old_names_of_base_model_and_generation_are_upgraded(tmp_path):
    text = (
        LLM.replace("base_model: ./tiny-llama", "model_name: ./tiny-llama") + "generation_config: {max_new_tokens: 5}\n"
    )
    loaded = load_sweep(write(tmp_path, text))
    assert loaded.config.base_model == "./tiny-llama" and loaded.config.generation.max_new_tokens == 5
    assert any("model_name: is Ludwig's old name of base_model:" in w for w in loaded.warnings)
    assert any("generation_config: is Ludwig's old name of generation:" in w for w in loaded.warnings)
    assert any(w.startswith(f"{tmp_path / 'sweep.yaml'}:3:1: model_name:") for w in loaded.warnings)


def test_trainer_type_finetune_stays_for_an_llm(tmp_path):
    loaded = load_sweep(write(tmp_path, LLM + "trainer: {type: finetune, epochs: 2}\n"))
    assert loaded.config.trainer.type == "finetune" and not any("trainer.type" in w for w in loaded.warnings)


# ---------------------------------------------------------------------------- searched parameters
SEARCHED = """\
    adapter.r: {space: choice, categories: [4, 16]}
    adapter.alpha: {space: randint, lower: 8, upper: 33}
    adapter.dropout: {space: uniform, lower: 0.0, upper: 0.2}
    trainer.gradient_accumulation_steps: {space: choice, categories: [1, 2]}
    generation.temperature: {space: uniform, lower: 0.1, upper: 0.9}
"""


def test_adapter_trainer_and_generation_keys_are_searchable(tmp_path):
    text = LLM + "adapter: {type: lora}\n"
    text = text.replace("  parameters:\n", "  parameters:\n" + SEARCHED)
    loaded = load_sweep(write(tmp_path, text))
    params = {
        "adapter.r": 16,
        "adapter.alpha": 20,
        "adapter.dropout": 0.1,
        "trainer.learning_rate": 0.002,
        "trainer.gradient_accumulation_steps": 2,
        "generation.temperature": 0.5,
    }
    trial = resolve_trial_config(loaded.raw, params)
    assert (trial.adapter.r, trial.adapter.alpha, trial.adapter.dropout) == (16, 20, 0.1)
    assert trial.adapter.peft_kwargs()["lora_alpha"] == 20
    assert (trial.trainer.learning_rate, trial.trainer.gradient_accumulation_steps) == (0.002, 2)
    assert trial.generation.temperature == 0.5 and trial.trainer.type == "finetune"


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("adapter.dropout: {space: uniform, lower: 0.0, upper: 2.0}", "less than or equal to 1"),
        ("adapter.rank: {space: choice, categories: [4]}", "not a field"),
        ("prompt.template: {space: choice, categories: ['{word}']}", "neither a section"),
    ],
)
def test_a_bad_searched_llm_parameter_is_one_line(tmp_path, param, message):
    text = (LLM + "adapter: {type: lora}\n").replace("  parameters:\n", f"  parameters:\n    {param}\n")
    err = error(tmp_path, text)
    assert err.key.startswith("hyperopt.parameters") and message in err.message, err


def test_the_finetune_trainer_belongs_to_an_llm(tmp_path):
    from ludwig_hpo.config.overrides import with_overrides

    text = LLM.replace("model_type: llm\nbase_model: ./tiny-llama\n", "").replace(
        'prompt:\n  template: "Define {word}:"\n', ""
    )
    text = text.replace("{name: gloss, type: text}", "{name: gloss, type: category}")
    loaded = load_sweep(write(tmp_path, text))
    with pytest.raises(ConfigError) as info:
        with_overrides(loaded, [("trainer.type", "finetune")])
    assert "trainer.type finetune is the trainer of model_type llm" in info.value.message


def test_a_null_max_sequence_length_of_an_ecd_text_input_is_the_longest_training_row(make_config):
    import pandas as pd

    from ludwig_hpo.data import prepare

    words = [" ".join(["w"] * (1 + i % 7)) for i in range(60)]  # 1 to 7 tokens
    frame = pd.DataFrame({"text": words, "y": [float(i) for i in range(60)]})
    prep = {"max_sequence_length": None}
    cfg = make_config([{"name": "text", "type": "text", "preprocessing": prep}], [{"name": "y", "type": "number"}])
    data = prepare(frame, cfg)
    longest = max(len(words[i].split()) for i in data.splits["train"]) + 2  # with <SOS>, <EOS>
    assert data.meta["text"].shape == (longest,) and data.inputs["text"].shape == (60, longest)


def test_the_adapter_type_is_searchable_with_keys_only_some_types_have(tmp_path):
    text = (LLM + "adapter: {type: lora}\n").replace(
        "  parameters:\n",
        "  parameters:\n    adapter.type: {space: choice, categories: [lora, ia3]}\n"
        "    adapter.r: {space: choice, categories: [4, 8]}\n",
    )
    loaded = load_sweep(write(tmp_path, text))
    lora = resolve_trial_config(loaded.raw, {"adapter.type": "lora", "adapter.r": 4, "trainer.learning_rate": 0.001})
    ia3 = resolve_trial_config(loaded.raw, {"adapter.type": "ia3", "adapter.r": 4, "trainer.learning_rate": 0.001})
    assert (lora.adapter.type, lora.adapter.r) == ("lora", 4)
    assert ia3.adapter.type == "ia3" and not hasattr(ia3.adapter, "r")  # ia3 has no rank: left out, as Ludwig does


@pytest.mark.parametrize("written", ["", "adapter: null\n"])
def test_an_adapter_field_searched_without_an_adapter_is_one_line(tmp_path, written):
    # every trial would train a LoRA adapter while the config says every weight trains
    text = (LLM + written).replace(
        "  parameters:\n", "  parameters:\n    adapter.r: {space: choice, categories: [4, 8]}\n"
    )
    err = error(tmp_path, text)
    assert (
        err.key == 'hyperopt.parameters."adapter.r"'
        and "has none" in err.message
        and "adapter: {type: lora}" in err.fix
    )
    both = text.replace(
        "  parameters:\n", "  parameters:\n    adapter.type: {space: choice, categories: [lora, loha]}\n"
    )
    assert load(tmp_path, both).adapter is None  # the trials' adapter is searched explicitly


def test_a_searched_adapter_type_without_a_written_field_names_that_field(tmp_path):
    # ia3 has no rank: the config's written adapter.r, not adapter.type, is what does not fit
    text = (LLM + "adapter: {type: lora, r: 8}\n").replace(
        "  parameters:\n", "  parameters:\n    adapter.type: {space: choice, categories: [lora, ia3]}\n"
    )
    err = error(tmp_path, text)
    assert (
        err.key == 'hyperopt.parameters."adapter.type"'
        and err.message == "value 'ia3' is a type without the config's adapter.r"
    )
    assert "search adapter.r in hyperopt.parameters" in err.fix
