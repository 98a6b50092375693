"""``hpo validate`` of ``model_type: llm`` files, offline (:mod:`ludwig_hpo.model.llm_checks`):
a local base model is built on the meta device with its adapter, a hub id not cached is a note,
and each bad input (base model, target_modules, template column, lengths, quantization without a
GPU) is one line naming the file, the key and the fix, before anything is created."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.driver.validate import validate_lines
from ludwig_hpo.errors import ConfigError, UserError
from ludwig_hpo.model.llm_checks import check_base_model

SWEEP = """\
name: gloss
model_type: llm
base_model: {model}
dataset: {{source: rows.csv}}
input_features:
  - {{name: word, type: text}}
output_features:
  - {{name: gloss, type: text}}
prompt:
  template: "Define {{word}}:"
adapter: {{type: lora, r: 4}}
trainer: {{epochs: 1}}
hyperopt:
  parameters:
    adapter.r: {{space: choice, categories: [2, 4]}}
"""


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the output folder hpo validate names is relative to it
    with (tmp_path / "rows.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["word", "gloss"])
        for i in range(30):
            w.writerow([f"word{i}", f"a thing numbered {i}"])
    return tmp_path


#: The search of a file whose adapter has no ``r``.
NO_RANK = (
    "    adapter.r: {space: choice, categories: [2, 4]}",
    "    trainer.learning_rate: {space: choice, categories: [0.01]}",
)


def sweep(folder: Path, model: str | Path, extra: str = "", edit: tuple[str, str] = ("", "")) -> Path:
    text = SWEEP.format(model=model).replace(*edit) + extra
    if "type: lora" not in text:
        text = text.replace(*NO_RANK)
    path = folder / "sweep.yaml"
    path.write_text(text)
    return path


def refused(path: Path) -> UserError:
    with pytest.raises(UserError) as info:
        validate_lines(path)
    line = info.value.one_line()
    # the sweep file, or the dataset file for what its rows break
    assert "\n" not in line and line.startswith((str(path), str(path.parent / "rows.csv"))), line
    assert info.value.fix, line
    assert not (path.parent / "hpo_results").exists()  # nothing half-written
    return info.value


def test_a_local_base_model_validates_with_its_adapter(folder, tiny_llama_dir):
    lines = validate_lines(sweep(folder, tiny_llama_dir))
    assert lines[0].endswith(": valid")
    assert any(line.startswith("data: 30 rows") and "preprocessed without error" in line for line in lines)
    assert not any("not checked offline" in line for line in lines)
    assert (
        f"llm: base_model {tiny_llama_dir}; adapter lora (r 4, alpha 16, dropout 0.05, target_modules peft defaults)"
        in lines
    )
    assert "llm: prompt 'Define {word}:'; generation max_new_tokens 32, do_sample true" in lines


def test_target_modules_not_in_the_model_lists_the_ones_it_has(folder, tiny_llama_dir):
    path = sweep(folder, tiny_llama_dir, edit=("{type: lora, r: 4}", "{type: lora, r: 4, target_modules: [qkv]}"))
    err = refused(path)
    assert err.key == "adapter.target_modules" and "'qkv'" in err.message
    assert "q_proj" in err.fix and "v_proj" in err.fix and "down_proj" in err.fix


def test_peft_refuses_an_adapter_the_model_cannot_take(folder, tiny_llama_dir):
    extra = "{type: ia3, target_modules: [q_proj], feedforward_modules: [down_proj]}"
    err = refused(sweep(folder, tiny_llama_dir, edit=("{type: lora, r: 4}", extra)))
    assert err.key == "adapter.feedforward_modules" and "subset" in err.message


def test_every_adapter_type_fits_the_tiny_llama(folder, tiny_llama_dir):
    for kind in ("lora", "adalora", "ia3", "loha", "lokr", "vera"):
        path = sweep(folder, tiny_llama_dir, edit=("{type: lora, r: 4}", f"{{type: {kind}}}"))
        assert check_base_model(load_sweep(path).config, str(path), network=False) == [], kind


def test_a_hub_id_not_cached_is_a_note_and_the_template_is_still_checked(folder, monkeypatch):
    # hpo validate asks no hub: without HF_HUB_OFFLINE it still reads only the local cache
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(folder / "hf"))
    lines = validate_lines(sweep(folder, "some-org/some-tiny-model"))
    assert lines[0].endswith(": valid")
    assert any("columns and prompt template checked; not tokenized" in line for line in lines)
    note = [line for line in lines if line.startswith("note: base_model:")]
    assert len(note) == 1 and "not checked offline" in note[0] and "target_modules" in note[0]
    path = sweep(folder, "some-org/some-tiny-model", edit=("Define {word}:", "Define {lemma}:"))
    err = refused(path)
    assert err.key == "prompt.template" and "lemma" in err.message


def test_a_hub_id_not_cached_under_hf_hub_offline_is_refused_at_validate(folder, monkeypatch):
    # the sweep could never download it here: validate says so rather than "valid"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = refused(sweep(folder, "some-org/some-tiny-model"))
    assert err.key == "base_model" and "HF_HUB_OFFLINE" in err.message and "save_pretrained" in err.fix


def test_a_hub_id_not_cached_needs_the_hub_for_a_sweep(folder, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = sweep(folder, "some-org/some-tiny-model")
    with pytest.raises(ConfigError) as info:
        check_base_model(load_sweep(path).config, str(path), network=True)
    assert info.value.key == "base_model" and "needs a network" in info.value.message


@pytest.mark.parametrize(
    ("model", "message"),
    [("./no-such-folder", "no-such-folder"), ("not a hub id!", "not a hub id!")],
)
def test_a_base_model_that_is_neither_a_folder_nor_a_hub_id(folder, model, message):
    err = refused(sweep(folder, model))
    assert err.key == "base_model" and message in err.message


def test_a_folder_without_a_causal_lm_config(folder):
    (folder / "empty").mkdir()
    err = refused(sweep(folder, folder / "empty"))
    assert err.key == "base_model"


def test_a_template_column_the_data_lacks(folder, tiny_llama_dir):
    err = refused(sweep(folder, tiny_llama_dir, edit=("Define {word}:", "Define {word} as a {pos}:")))
    assert err.key == "prompt.template" and "pos" in err.message and "word" in err.message


def test_written_lengths_longer_than_the_context_are_a_note_rows_are_cut_to_it(folder, tiny_llama_dir):
    # Ludwig caps global_max_sequence_length at the model's context length rather than refusing it
    context = json.loads((tiny_llama_dir / "config.json").read_text())["max_position_embeddings"]
    path = sweep(folder, tiny_llama_dir, extra=f"preprocessing: {{global_max_sequence_length: {context + 1}}}\n")
    lines = validate_lines(path)
    assert lines[0].startswith(f"{path}: valid"), lines[0]
    notes = [line for line in lines if line.startswith("note: preprocessing.global_max_sequence_length")]
    assert notes == [
        f"note: preprocessing.global_max_sequence_length {context + 1} is longer than base_model's context of "
        f"{context} tokens: rows are cut to {context} (as Ludwig does)"
    ]
    lengths = (
        "{name: word, type: text}",
        f"{{name: word, type: text, preprocessing: {{max_sequence_length: {context - 30}}}}}",
    )
    path = sweep(folder, tiny_llama_dir, edit=lengths)
    path.write_text(
        path.read_text().replace(
            "{name: gloss, type: text}", "{name: gloss, type: text, preprocessing: {max_sequence_length: 30}}"
        )
    )
    lines = validate_lines(path)
    assert lines[0].startswith(f"{path}: valid"), lines[0]
    assert any(f"note: a row of max_sequence_length {context - 30} (prompt) + 30 (target)" in line for line in lines)


def test_quantization_without_a_gpu_at_validate(folder, tiny_llama_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the plan gives the trials one")
    err = refused(sweep(folder, tiny_llama_dir, extra="quantization: {bits: 4}\n"))
    assert err.key == "quantization" and "CUDA" in err.message


def test_a_cached_hub_id_is_checked_as_a_local_model(folder, monkeypatch, tiny_llama_dir):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(folder / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = "0" * 40  # laid out as huggingface_hub's cache holds a downloaded model
    repo = folder / "hub" / "models--tiny--llama"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(tiny_llama_dir, repo / "snapshots" / commit)
    lines = validate_lines(sweep(folder, "tiny/llama"))
    assert lines[0].endswith(": valid") and not any("not checked offline" in line for line in lines)
    path = sweep(folder, "tiny/llama", edit=("{type: lora, r: 4}", "{type: lora, r: 4, target_modules: [attn]}"))
    err = refused(path)
    assert err.key == "adapter.target_modules" and "q_proj" in err.fix


def test_quantization_on_a_cluster_without_gpus_is_refused_before_it_starts(folder, tiny_llama_dir):
    from ludwig_hpo.errors import ResourceError
    from ludwig_hpo.execution.cluster import NodeShape, cluster_plan

    path = sweep(folder, tiny_llama_dir, extra="quantization: {bits: 8}\n")
    cfg = load_sweep(path).config
    with pytest.raises(ResourceError) as info:
        cluster_plan(cfg, [NodeShape(8, 0)], existing=True, sweep_file=path)
    assert info.value.key == "quantization" and "the cluster has none" in info.value.message
    assert cluster_plan(cfg, [NodeShape(8, 1)], existing=True, sweep_file=path).use_gpu


def test_a_base_model_that_cannot_be_had_is_the_sweep_files_line_before_the_rows(folder, monkeypatch, tiny_llama_dir):
    # hpo sweep asks this before its tokenizer reads the rows, so the line names the sweep file
    from ludwig_hpo.model.llm_checks import check_base_model_reachable

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = sweep(folder, "some-org/some-tiny-model")
    with pytest.raises(ConfigError) as info:
        check_base_model_reachable(load_sweep(path).config, str(path))
    assert info.value.one_line().startswith(f"{path}: base_model: ") and "HF_HUB_OFFLINE" in info.value.message
    with pytest.raises(ConfigError) as info:
        check_base_model_reachable(load_sweep(sweep(folder, "./no-such-folder")).config, str(path))
    assert info.value.key == "base_model" and "no-such-folder" in info.value.message
    assert check_base_model_reachable(load_sweep(sweep(folder, tiny_llama_dir)).config, str(path)) is None


def test_a_target_modules_string_matching_no_module_says_it_is_a_regular_expression(folder, tiny_llama_dir):
    # peft reads a string as one regex full-matched against dotted names: "q_proj" matches none
    path = sweep(folder, tiny_llama_dir, edit=("{type: lora, r: 4}", "{type: lora, r: 4, target_modules: q_proj}"))
    err = refused(path)
    assert err.key == "adapter.target_modules" and "regular expression" in err.fix and "list" in err.fix
    ok = sweep(folder, tiny_llama_dir, edit=("{type: lora, r: 4}", "{type: lora, r: 4, target_modules: '.*q_proj'}"))
    assert validate_lines(ok)[0].endswith(": valid")
