"""Preparation of an llm config's rows: Ludwig's prompt templates, prompt + target + EOS ids,
labels masked at the prompt and padding, Ludwig's cuts, and the hook into ``prepare``.

The tiny random Llama's byte-level BPE tokenizer (``tests/hf_models.py``); no model is run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.hf_loader import load_tokenizer
from ludwig_hpo.data.llm import (
    DEFAULT_TEMPLATE,
    IGNORE_INDEX,
    Limits,
    encode_rows,
    prompt_ids,
    reference_ids,
    render_prompts,
)
from ludwig_hpo.data.preprocess import prepare
from ludwig_hpo.errors import DataError
from tests.llm_configs import ROWS, llm_config

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok(tiny_llama_dir):
    return load_tokenizer(str(tiny_llama_dir))


def _cfg(base: str, **extra) -> SweepConfig:
    return llm_config(base, name="u", split=(0.6, 0.2, 0.2, 1), trainer={"epochs": 1, "batch_size": 2}, **extra)


def test_template_fields_are_columns_sample_and_task():
    assert render_prompts(ROWS[:2], "lemma", "Define the {pos} {lemma}:", None) == [
        "Define the noun cat:",
        "Define the noun dog:",
    ]
    # {__sample__} is the input cell as Ludwig writes it (json.dumps without its outer quotes)
    assert render_prompts(ROWS[:1], "lemma", "[{__sample__}] {__task__}", "define") == ["[cat] define"]
    # a task without a template: Ludwig's default zero-shot template
    assert render_prompts(ROWS[:1], "lemma", None, "define it") == [
        DEFAULT_TEMPLATE.format(__sample__="cat", __task__="define it")
    ]
    # neither: the input column's text as it is
    assert render_prompts(ROWS[:2], "lemma", None, None) == ["cat", "dog"]


def test_float_format_reads_the_cell_as_a_number():
    df = pd.DataFrame({"x": ["a"], "price": ["1.5"]})
    assert render_prompts(df, "x", "{x} costs {price:.2f}", None) == ["a costs 1.50"]


@pytest.mark.parametrize(
    ("template", "task", "words"),
    [
        ("Define {lemma} ({colour}):", None, "{colour}, which is not a column"),
        ("Define {lemma}:", "define", "no {__task__} field"),
        ("Define it:", None, "neither {__sample__} nor any dataset column"),
        ("Define {lemma:d}:", None, "only a float format"),
        ("{__context__} {lemma}", None, "retrieval"),
    ],
)
def test_bad_templates_are_one_line_at_prompt_template(template, task, words):
    with pytest.raises(DataError) as e:
        render_prompts(ROWS, "lemma", template, task)
    assert words in str(e.value)
    assert e.value.key == "prompt.template"
    assert "\n" not in str(e.value)


def test_rows_are_prompt_target_eos_and_labels_mask_the_prompt_and_padding(tok):
    prompts = ["Define cat:", "Define rain:"]
    targets = ["a small animal", "water falling from the sky"]
    enc = encode_rows(prompts, targets, tok, Limits())
    p0 = tok(prompts[0])["input_ids"]
    t0 = tok(targets[0], add_special_tokens=False)["input_ids"]
    row = [*p0, *t0, tok.eos_token_id]
    assert p0[0] == tok.bos_token_id  # the prompt keeps the tokenizer's special tokens
    assert enc.ids[0, : len(row)].tolist() == row
    assert (enc.ids[0, len(row) :] == tok.pad_token_id).all()  # right padding
    assert enc.labels[0, : len(p0)].tolist() == [IGNORE_INDEX] * len(p0)
    assert enc.labels[0, len(p0) : len(row)].tolist() == [*t0, tok.eos_token_id]
    assert (enc.labels[0, len(row) :] == IGNORE_INDEX).all()
    assert enc.ids.shape == enc.labels.shape == (2, max(enc.lengths))
    # the contract other modules read rows by
    assert prompt_ids(enc.ids, enc.labels, enc.pad_id)[0] == p0
    assert tok.decode(reference_ids(enc.labels)[1], skip_special_tokens=True) == targets[1]


def test_cuts_prompt_target_then_the_whole_row(tok):
    prompts, targets = ["Define the word rain please:"], ["water falling from the sky at night"]
    full = encode_rows(prompts, targets, tok, Limits())
    p_len, t_len = int(full.prompt_lengths[0]), int(full.target_lengths[0])
    cut = encode_rows(prompts, targets, tok, Limits(prompt=3, target=4))
    assert (cut.prompt_lengths[0], cut.target_lengths[0]) == (3, 4)
    assert cut.ids[0, :3].tolist() == full.ids[0, :3].tolist()  # the start is kept
    # the whole row is cut from its end: a long prompt leaves less of the target
    total = encode_rows(prompts, targets, tok, Limits(total=p_len + 2))
    assert total.ids.shape[1] == p_len + 2
    assert int(total.target_lengths[0]) == 2
    assert int(total.lengths[0]) == p_len + t_len  # before the cut
    none_left = encode_rows(prompts, targets, tok, Limits(total=p_len))
    assert (none_left.labels == IGNORE_INDEX).all()


def test_prepare_an_llm_config(tiny_llama_dir):
    cfg = _cfg(str(tiny_llama_dir), prompt={"template": "Define the {pos} {lemma}:"})
    data = prepare(ROWS, cfg)
    ids, labels = data.inputs["lemma"], data.targets["gloss"]
    assert ids.dtype == labels.dtype == np.int64 and ids.shape == labels.shape
    assert set(data.splits) == {"train", "validation", "test"}
    meta = data.meta["gloss"]
    assert meta.type == "text"
    assert {"pad_id", "eos_id", "vocab_size", "length_p50", "length_max"} <= set(meta.stats)
    assert meta.fitted["base_model"] == str(tiny_llama_dir)
    assert meta.fitted["template"] == "Define the {pos} {lemma}:"
    # every row: its target tokens, then EOS, are labelled; the prompt is not
    eos = int(meta.stats["eos_id"])
    for row in labels:
        kept = row[row != IGNORE_INDEX]
        assert len(kept) > 1 and kept[-1] == eos


def test_prepare_names_a_missing_template_column(tiny_llama_dir):
    cfg = _cfg(str(tiny_llama_dir), prompt={"template": "Define {lemmas}:"})
    with pytest.raises(DataError, match="lemmas"):
        prepare(ROWS, cfg)


def test_global_max_sequence_length_that_leaves_no_target_is_refused(tiny_llama_dir):
    cfg = _cfg(
        str(tiny_llama_dir),
        prompt={"template": "Define the {pos} {lemma} in a few words please:"},
        preprocessing={"global_max_sequence_length": 3},
    )
    with pytest.raises(DataError) as e:
        prepare(ROWS, cfg)
    assert e.value.key == "preprocessing.global_max_sequence_length"


def test_rows_without_targets_are_their_prompts_alone(tok):
    enc = encode_rows(["Define cat:", "Define a bird:"], None, tok, Limits(prompt=4))
    assert (enc.labels == IGNORE_INDEX).all()
    assert enc.ids[0, 0] == tok.bos_token_id and enc.target_lengths.tolist() == [0, 0]
    assert enc.ids.shape[1] == 4 and enc.prompt_lengths.max() == 4


@pytest.mark.parametrize("lowercase", [True, False])
def test_prompt_and_target_are_lower_cased_as_ludwig_does_unless_told_not_to(tiny_llama_dir, lowercase):
    rows = ROWS.assign(gloss=[g.capitalize() for g in ROWS["gloss"]], lemma=[w.upper() for w in ROWS["lemma"]])
    prep = {"lowercase": lowercase}
    cfg = _cfg(
        str(tiny_llama_dir),
        prompt={"template": "Define {lemma}:"},
        input_features=[{"name": "lemma", "type": "text", "preprocessing": prep}],
        output_features=[{"name": "gloss", "type": "text", "preprocessing": prep}],
    )
    data = prepare(rows, cfg)
    tok = load_tokenizer(str(tiny_llama_dir))
    ids, labels = data.inputs["lemma"], data.targets["gloss"]
    pad = int(data.meta["gloss"].stats["pad_id"])
    prompt = tok.decode(prompt_ids(ids, labels, pad)[0], skip_special_tokens=True)
    target = tok.decode(reference_ids(labels)[0], skip_special_tokens=True)
    expected_prompt, expected_target = f"Define {rows['lemma'][0]}:", rows["gloss"][0]
    if lowercase:
        expected_prompt, expected_target = expected_prompt.lower(), expected_target.lower()
    assert (prompt, target) == (expected_prompt, expected_target)
