"""Real public Ludwig ``model_type: llm`` configs (tests/fixtures/ludwig/llm, each naming its
source) through ``hpo validate``'s checks with their ``base_model`` replaced by the tiny local
Llama of ``tests/hf_models.py`` and a small CSV holding the columns they name: those written as
Ludwig runs them are accepted, the ones in :data:`EXPECTED_REFUSED` are refused in one line. The
semantics Ludwig documents for them (trainer, LoRA and generation defaults, prompt rendering,
the default template of ``prompt.task``, lengths longer than the context) are checked on the
loaded configs; two of them train one optimizer step in process."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import yaml

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.llm import DEFAULT_TEMPLATE, PromptConfig
from ludwig_hpo.data.llm import render_prompts
from ludwig_hpo.driver.validate import validate_lines
from ludwig_hpo.errors import UserError

pytest.importorskip("peft")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ludwig" / "llm"
CONFIGS = sorted(FIXTURES.glob("*.yaml"))

#: ``{fixture: text its one-line error holds}``: the configs refused here (on a CPU-only machine
#: for the quantized ones), and why. Every other fixture must be accepted.
EXPECTED_REFUSED: dict[str, str] = {
    "docs_llama2_qlora.yaml": "quantization loads the base model with bitsandbytes, which needs a CUDA GPU",
    "llama2_7b_4bit.yaml": "quantization loads the base model with bitsandbytes, which needs a CUDA GPU",
    "qlora_data_parallel.yaml": "backend.trainer.strategy 'deepspeed' is not supported yet",
    "regex_freezing.yaml": "layers_to_freeze_regex (freezing the layers a regex names) is not supported yet",
    "structured_json_schema.yaml": "decoder type 'text_parser' of an llm's text output is not supported yet",
    "test_llm_finetuning_lora.yaml": "optimizer type 'paged_adamw' needs bitsandbytes and a GPU",
    "zero_shot_category.yaml": "trainer.type zeroshot (Ludwig's old name of type none",
    "prompt_tuning_category.yaml": "an llm's output feature is type text, not category",
    "few_shot_retrieval.yaml": "an llm's output feature is type text, not category",
}

#: Every column a fixture names (feature names, template fields, the fixed split column).
COLUMNS = ("instruction", "input", "output", "response", "Question", "Answer", "review", "label", "text")
COLUMNS += ("prompt", "user_message_1", "body", "split")


def _rows(n: int = 24) -> list[list[Any]]:
    return [
        [f"say {i}", f"the input {i}", f"out {i}", f"resp {i}", f"q {i}?", f"a {i}", f"good {i}"]
        + [("positive", "negative")[i % 2], f"t {i}", f"p {i}", f"m {i}", f"b {i}", (0, 0, 0, 1, 2)[i % 5]]
        for i in range(n)
    ]


@pytest.fixture
def local(tmp_path, monkeypatch, tiny_llama_dir):
    """``local(name)`` -> (the fixture copied with its base model the tiny Llama folder, its CSV)."""
    monkeypatch.chdir(tmp_path)  # the output folder hpo validate names is relative to it
    data = tmp_path / "rows.csv"
    with data.open("w", newline="") as f:
        csv.writer(f).writerows([list(COLUMNS), *_rows()])

    def make(name: str) -> tuple[Path, Path]:
        text = re.sub(
            r"^(base_model|model_name):.*$", rf"\g<1>: {tiny_llama_dir}", (FIXTURES / name).read_text(), flags=re.M
        )
        path = tmp_path / name
        path.write_text(text)
        return path, data

    return make


def test_there_are_enough_fixtures_each_naming_its_source():
    assert len(CONFIGS) >= 10
    assert set(EXPECTED_REFUSED) <= {c.name for c in CONFIGS}
    assert len(CONFIGS) - len(EXPECTED_REFUSED) >= 5
    for config in CONFIGS:
        head = config.read_text().splitlines()[0]
        assert head.startswith("# source: ludwig-ai/ludwig"), (config.name, head)
        assert yaml.safe_load(config.read_text())["model_type"] == "llm"


@pytest.mark.parametrize("name", [c.name for c in CONFIGS])
def test_fixture_is_accepted_unless_listed_refused(name, local):
    if name == "docs_llama2_qlora.yaml" or name == "llama2_7b_4bit.yaml":
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: quantization is accepted")
    path, data = local(name)
    if name not in EXPECTED_REFUSED:
        lines = validate_lines(path, data)
        assert lines[0].startswith(f"{path}: valid"), lines[0]
        assert not any("Traceback" in line for line in lines)
        return
    with pytest.raises(UserError) as info:
        validate_lines(path, data)
    line = info.value.one_line()
    assert "\n" not in line and line.startswith(str(path)), line
    assert EXPECTED_REFUSED[name] in line, line
    assert info.value.fix, line
    assert not (path.parent / "hpo_results").exists()  # nothing half-written


def test_a_file_without_trainer_type_is_fine_tuned_and_says_ludwig_would_not_train(local):
    # Ludwig's llm trainer defaults to type none (evaluation only); ours to finetune
    path, data = local("text_generation.yaml")
    lines = validate_lines(path, data)
    warned = [line for line in lines if "trainer.type is not written" in line]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {path}:8:1: "), lines
    assert "Ludwig's llm default is none (no training" in warned[0]
    assert load_sweep(path, dataset=data, search=False).config.trainer.type == "finetune"
    path, data = local("readme_llama31_lora.yaml")
    assert not any("trainer.type" in line for line in validate_lines(path, data))


def test_ludwigs_finetune_lora_and_generation_defaults(local):
    path, data = local("readme_llama31_lora.yaml")
    cfg = load_sweep(path, dataset=data, search=False).config
    tr = cfg.trainer
    # FineTuneTrainerConfig is Ludwig's ECD trainer with eval_batch_size 2
    assert (tr.type, tr.epochs, tr.learning_rate, tr.batch_size, tr.eval_batch_size) == ("finetune", 3, 1e-3, "auto", 2)
    assert (tr.optimizer.type, tr.early_stop, tr.gradient_accumulation_steps) == ("adam", 5, 1)
    lora = cfg.adapter
    assert lora is not None and lora.peft_class_name == "LoraConfig"
    assert (lora.r, lora.alpha, lora.dropout, lora.bias, lora.target_modules) == (8, 16, 0.05, "none", None)
    gen = cfg.generation
    assert (gen.max_new_tokens, gen.temperature, gen.top_k, gen.top_p, gen.do_sample, gen.num_beams) == (
        32,
        0.1,
        50,
        1.0,
        True,
        1,
    )
    # text_llm_input / text_llm_output: no cut but the context
    assert cfg.input_features[0].preprocessing.max_sequence_length is None
    assert cfg.output_features[0].preprocessing.max_sequence_length is None
    assert cfg.prompt is None  # the input cell is the prompt as it is
    assert cfg.hyperopt is None or cfg.hyperopt.metric == "loss"


def test_the_written_generation_keys_reach_generate(local):
    path, data = local("test_llm_text_to_text.yaml")
    cfg = load_sweep(path, dataset=data, search=False).config
    kwargs = cfg.generation.hf_kwargs()
    assert {k: kwargs[k] for k in ("temperature", "top_p", "top_k", "num_beams", "max_new_tokens")} == {
        "temperature": 0.1,
        "top_p": 0.75,
        "top_k": 40,
        "num_beams": 4,
        "max_new_tokens": 5,
    }
    assert "max_length" not in kwargs  # max_new_tokens overrides it
    assert cfg.adapter is None  # no adapter in Ludwig's file: every weight trains, as Ludwig's finetune


def test_pissa_with_rslora_keeps_its_keys_and_the_context_caps_the_written_length(local):
    path, data = local("pissa_lora.yaml")
    lines = validate_lines(path, data)
    assert any("global_max_sequence_length 512 is longer than base_model's context of 256" in x for x in lines)
    cfg = load_sweep(path, dataset=data, search=False).config
    kwargs = cfg.adapter.peft_kwargs()
    assert (kwargs["r"], kwargs["lora_alpha"], kwargs["init_lora_weights"], kwargs["use_rslora"]) == (
        16,
        32,
        "pissa",
        True,
    )


def _ludwig_format(template: str, row: dict[str, Any], input_column: str, task: str | None) -> str:
    # Ludwig's rendering: str.format over the row's columns, the input cell as __sample__
    return template.format(**row, __sample__=row[input_column], __task__=task)


@pytest.mark.parametrize(
    ("name", "input_column"),
    [
        ("docs_llama2_qlora.yaml", "input"),
        ("qlora_data_parallel.yaml", "instruction"),
        ("regex_freezing.yaml", "prompt"),
        ("structured_json_schema.yaml", "text"),
    ],
)
def test_ludwigs_templates_render_as_ludwig_renders_them(name, input_column):
    section = yaml.safe_load((FIXTURES / name).read_text())["prompt"]
    prompt = PromptConfig(**section)
    df = pd.DataFrame([dict(zip(COLUMNS, r, strict=True)) for r in _rows(3)])
    rendered = render_prompts(df, input_column, prompt.template, prompt.task)
    template = prompt.effective_template
    assert rendered == [_ludwig_format(template, row, input_column, prompt.task) for row in df.to_dict("records")]
    if prompt.template is None:  # prompt.task alone: Ludwig's zero-shot template
        assert template == DEFAULT_TEMPLATE
        assert rendered[0].startswith("SAMPLE INPUT: t 0\n\nUSER: Complete the following task: Extract the named")
        assert rendered[0].endswith("\n\nASSISTANT:\n")


@pytest.mark.parametrize("name", ["readme_llama31_lora.yaml", "pissa_lora.yaml", "oft.yaml"])
def test_fixture_trains_one_step_in_process_and_its_adapter_alone_restores_it(name, local):
    from ludwig_hpo.data.preprocess import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.losses import OutputLosses

    path, data = local(name)
    cfg = load_sweep(path, dataset=data, search=False).config
    prepared = prepare(pd.read_csv(data), cfg)
    model = build_model(cfg, prepared.meta)
    inp, out = cfg.input_features[0].name, cfg.output_features[0].name
    rows = slice(0, 4)
    x = {inp: torch.as_tensor(prepared.inputs[inp][rows])}
    y = {out: torch.as_tensor(prepared.targets[out][rows])}
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(("lora_" in k) or ("oft_" in k) for k in model.trainable_state_dict())
    before = {k: v.clone() for k, v in model.trainable_state_dict().items()}
    opt = torch.optim.Adam(trainable, lr=cfg.trainer.learning_rate)
    loss = OutputLosses(cfg.output_features, prepared.meta)(model.train()(x), y)
    assert torch.isfinite(loss)
    loss.backward()
    opt.step()
    after = model.trainable_state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    # an adapter-only checkpoint on a fresh build of the base computes what the trained model does
    again = build_model(cfg, prepared.meta)
    again.load_trainable_state_dict(after)
    with torch.no_grad():
        torch.testing.assert_close(again.eval()(x)[out], model.eval()(x)[out])


@pytest.mark.parametrize(
    ("kind", "says"), [("hra", "is not supported yet"), ("lorax", "is not an adapter Ludwig or peft names")]
)
def test_an_adapter_type_not_trained_here_is_one_line_listing_those_that_are(kind, says, local):
    path, data = local("readme_llama31_lora.yaml")
    path.write_text(path.read_text().replace("type: lora", f"type: {kind}"))
    with pytest.raises(UserError) as info:
        validate_lines(path, data)
    line = info.value.one_line()
    assert f"adapter.type: adapter type '{kind}' {says}" in line, line
    assert "use one of lora, adalora, ia3, loha, lokr, vera, oft" in line and "prompt_tuning" not in line, line


def test_hpo_validate_accepts_one_exits_0_and_refuses_another_in_one_line_exit_2(local):
    from typer.testing import CliRunner

    from ludwig_hpo.cli import app

    path, data = local("text_to_text_model_name.yaml")
    result = CliRunner().invoke(app, ["validate", str(path), "--dataset", str(data)])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 2 and len(set(warned)) == 2, warned  # trainer.type not written, model_name
    path, data = local("zero_shot_category.yaml")
    result = CliRunner().invoke(app, ["validate", str(path), "--dataset", str(data)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert str(path) in lines[0] and "trainer.type zeroshot" in lines[0]


@pytest.mark.parametrize("init", ["olora", "pissa"])
def test_an_init_that_rewrites_the_base_leaves_the_cached_base_for_the_next_trial(init, local):
    from ludwig_hpo.data.preprocess import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model import llm as llm_model

    path, data = local("pissa_lora.yaml")
    path.write_text(path.read_text().replace("init_lora_weights: pissa", f"init_lora_weights: {init}"))
    cfg = load_sweep(path, dataset=data, search=False).config
    prepared = prepare(pd.read_csv(data), cfg)
    cached = llm_model.base_weights(cfg.base_model).state
    before = {k: v.clone() for k, v in cached.items()}
    first = build_model(cfg, prepared.meta)
    assert not first.shares_base
    assert all(torch.equal(before[k], cached[k]) for k in before)
    second = build_model(cfg, prepared.meta)  # the next trial of a warm worker
    inp, out = cfg.input_features[0].name, cfg.output_features[0].name
    x = {inp: torch.as_tensor(prepared.inputs[inp][:3])}
    with torch.no_grad():
        torch.testing.assert_close(second.eval()(x)[out], first.eval()(x)[out])
