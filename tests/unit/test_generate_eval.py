"""Generated-output metrics: ROUGE-L and exact match, the prompts and references recovered from
the prepared rows, the sample's determinism, and two gloo ranks counting every sampled row once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

from ludwig_hpo.train.generate_eval import (
    IGNORE,
    exact_match,
    generated_scores,
    left_padded,
    new_tokens,
    prompt_and_reference,
    rouge_l,
    sample_rows,
    sample_text,
    words,
)
from tests.llm_configs import LORA, llm_config
from tests.ranks import spawn_ranks

PAD, EOS = 0, 3
#: (prompt, reference) pairs of the prepared rows the oracle tests score
PAIRS = [(f"define word{i}:", f"a thing number {i} of many") for i in range(11)]


# ------------------------------------------------------------------------------ the scores
def test_rouge_l_is_the_f_measure_of_the_longest_common_word_subsequence():
    assert rouge_l("the cat sat on the mat", "the cat sat on the mat") == 1.0
    # LCS 5 of 5 candidate and 6 reference words: P = 1, R = 5/6
    assert rouge_l("the cat on the mat", "the cat sat on the mat") == pytest.approx(10 / 11)
    # a subsequence, not a substring: "a c" in "a b c" and "a x c"
    assert rouge_l("a x c", "a b c") == pytest.approx(2 / 3)
    assert rouge_l("dog", "the cat") == 0.0
    # symmetric in its F-measure
    assert rouge_l("a b c d", "a c") == pytest.approx(rouge_l("a c", "a b c d"))


def test_rouge_l_counts_words_as_rouge_score_does():
    assert words("The Cat, sat-on  the MAT!") == ["the", "cat", "sat", "on", "the", "mat"]
    assert rouge_l("The cat.", "the CAT") == 1.0
    assert rouge_l("", "") == 1.0
    assert rouge_l("...", "a word") == 0.0
    assert rouge_l("a word", "") == 0.0


def test_exact_match_ignores_surrounding_whitespace_only():
    assert exact_match("  a thing\n", "a thing") == 1.0
    assert exact_match("a  thing", "a thing") == 0.0
    assert exact_match("A thing", "a thing") == 0.0


# ------------------------------------------------------------------------------ rows and batches
def test_prompt_and_reference_come_from_the_labels():
    ids = [2, 10, 11, 12, 20, 21, EOS, PAD, PAD]
    labels = [IGNORE, IGNORE, IGNORE, IGNORE, 20, 21, EOS, IGNORE, IGNORE]
    assert prompt_and_reference(ids, labels, PAD) == ([2, 10, 11, 12], [20, 21, EOS])
    # a row whose target was cut off entirely: the prompt without its padding
    assert prompt_and_reference([2, 10, 11, PAD], [IGNORE] * 4, PAD) == ([2, 10, 11], [])


def test_prompts_are_left_padded_with_a_mask():
    ids, mask = left_padded([[5, 6, 7], [8]], PAD)
    assert ids.tolist() == [[5, 6, 7], [PAD, PAD, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_new_tokens_stop_at_the_first_eos_or_padding():
    out = torch.tensor([[PAD, 5, 30, 31, EOS, 40], [9, 9, 32, PAD, PAD, PAD]])
    assert new_tokens(out, 2, {EOS, PAD}) == [[30, 31], [32]]


def test_the_sample_is_the_first_rows_of_the_split():
    rows = np.array([7, 3, 9, 1])
    assert sample_rows(rows, 2).tolist() == [7, 3]
    assert sample_rows(rows, 10).tolist() == [7, 3, 9, 1]
    assert sample_rows(rows, 0).tolist() == []


# ------------------------------------------------------------------------------ an oracle model
@pytest.fixture(scope="module")
def tokenizer():
    from tests.hf_models import train_byte_bpe_tokenizer

    return train_byte_bpe_tokenizer([p + " " + r for p, r in PAIRS])


def _prepared(tok) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, L) input ids and labels laid out as the LLM data preparation lays them out."""
    rows = []
    for prompt, ref in PAIRS:
        p = tok(prompt)["input_ids"]
        t = tok(" " + ref, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((p + t, [IGNORE] * len(p) + t))
    width = max(len(i) for i, _ in rows) + 2
    ids = torch.tensor([i + [tok.pad_token_id] * (width - len(i)) for i, _ in rows])
    labels = torch.tensor([lab + [IGNORE] * (width - len(lab)) for _, lab in rows])
    return ids, labels


class Oracle:
    """Answers the prompts of even-numbered words with their reference and the others with a
    wrong text; counts its ``generate`` calls and keeps the keyword arguments it was given."""

    def __init__(self, tok):
        self.tokenizer, self.calls, self.kwargs = tok, 0, []
        ids, labels = _prepared(tok)
        self.answers = {}
        for i, (a, b) in enumerate(zip(ids.tolist(), labels.tolist(), strict=True)):
            prompt, ref = prompt_and_reference(a, b, tok.pad_token_id)
            self.answers[tuple(prompt)] = ref if i % 2 == 0 else tok(" a thing", add_special_tokens=False)["input_ids"]

    def generate(self, prompt_ids, attention_mask, **kwargs):
        self.calls += 1
        self.kwargs.append(kwargs)
        rows = []
        for ids, mask in zip(prompt_ids.tolist(), attention_mask.tolist(), strict=True):
            prompt = tuple(v for v, m in zip(ids, mask, strict=True) if m)
            rows.append(ids + list(self.answers[prompt]) + [self.tokenizer.eos_token_id])
        width = max(len(r) for r in rows)
        return torch.tensor([r + [self.tokenizer.pad_token_id] * (width - len(r)) for r in rows])


def test_scores_and_kept_rows_of_one_process(tokenizer):
    ids, labels = _prepared(tokenizer)
    model = Oracle(tokenizer)
    sample = sample_rows(np.arange(len(PAIRS)), 9)
    scores, kept = generated_scores(
        model, ids, labels, sample, batch_size=4, generate_kwargs={"max_new_tokens": 8}, seed=1, keep=3
    )
    # rows 0, 2, 4, 6, 8 answered exactly: 5 of 9
    assert scores["exact_match"] == pytest.approx(5 / 9)
    wrong = rouge_l("a thing", "a thing number 1 of many")
    assert scores["rouge_l"] == pytest.approx((5 + 4 * wrong) / 9)
    assert [r.position for r in kept] == [0, 1, 2]
    assert kept[0].prompt == PAIRS[0][0] and kept[0].reference.strip() == PAIRS[0][1]
    assert kept[1].generated.strip() == "a thing"
    assert model.calls == 3 and model.kwargs[0] == {"max_new_tokens": 8}


def _rank(rank: int, world: int, folder: str) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        from tests.hf_models import train_byte_bpe_tokenizer

        tok = train_byte_bpe_tokenizer([p + " " + r for p, r in PAIRS])
        ids, labels = _prepared(tok)
        model = Oracle(tok)
        sample = sample_rows(np.arange(len(PAIRS)), 9)  # shards of 5 and 4 rows
        scores, kept = generated_scores(
            model, ids, labels, sample, batch_size=2, generate_kwargs={}, seed=1, lockstep=True, keep=4
        )
        out = {
            "scores": scores,
            "kept": json.loads(sample_text(kept)),
            "positions": [r.position for r in kept],
            "calls": model.calls,
            "synced": [k.get("synced_gpus") for k in model.kwargs],
        }
        Path(folder, f"rank{rank}.json").write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(240)
def test_two_ranks_count_every_sampled_row_once_in_lockstep(tmp_path, tokenizer):
    spawn_ranks(_rank, (2, str(tmp_path)), 2)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    ids, labels = _prepared(tokenizer)
    alone, kept = generated_scores(
        Oracle(tokenizer), ids, labels, sample_rows(np.arange(len(PAIRS)), 9), batch_size=2, generate_kwargs={}, seed=1
    )
    for r in ranks:
        assert r["scores"] == pytest.approx(alone)
        assert r["positions"] == [0, 1, 2, 3]  # both ranks' rows, in sample order
        assert r["kept"] == json.loads(sample_text(kept[:4]))
        # 5 rows in batches of 2 is 3 calls; the rank with 4 rows adds a filler call
        assert r["calls"] == 3
        assert r["synced"] == [True] * 3
    assert alone["exact_match"] == pytest.approx(5 / 9)


# ------------------------------------------------------------------------------ a real tiny causal LM
class _TinyLM:
    """The LLM model's generate contract over a tiny random Llama (greedy or sampling)."""

    def __init__(self, folder: Path):
        from transformers import AutoTokenizer, LlamaForCausalLM

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.lm = LlamaForCausalLM.from_pretrained(folder).eval()

    def generate(self, prompt_ids, attention_mask, **kwargs):
        return self.lm.generate(
            input_ids=prompt_ids, attention_mask=attention_mask, pad_token_id=self.tokenizer.pad_token_id, **kwargs
        )


def test_sampled_generation_is_reproducible_and_leaves_the_random_state(tiny_llama_dir):
    model = _TinyLM(tiny_llama_dir)
    tok = model.tokenizer
    ids, labels = _prepared(tok)
    sample = sample_rows(np.arange(len(PAIRS)), 4)
    kwargs = {"max_new_tokens": 6, "do_sample": True, "temperature": 1.0, "top_k": 0}

    def run(seed):
        return generated_scores(model, ids, labels, sample, batch_size=2, generate_kwargs=kwargs, seed=seed)

    torch.manual_seed(123)
    first = run(7)
    after = torch.rand(3)
    torch.manual_seed(123)
    second = run(7)
    assert torch.equal(torch.rand(3), after)  # the training's random stream is untouched
    assert first == second
    assert len(first[1]) == 4 and all(r.prompt == PAIRS[r.position][0] for r in first[1])
    assert 0.0 <= first[0]["rouge_l"] <= 1.0
    # a random model sampling freely: another seed answers something else somewhere
    others = [run(s)[1] for s in (8, 9, 10)]
    assert any([r.generated for r in o] != [r.generated for r in first[1]] for o in others)


def test_the_kept_rows_read_back_as_the_report_reads_them():
    from ludwig_hpo.results.records import GeneratedOutput, parse_generated
    from ludwig_hpo.train.generate_eval import GeneratedRow

    rows = [GeneratedRow(0, "define <b>x</b>:", 'a "thing"', "a thing"), GeneratedRow(1, "p", "", "")]
    assert parse_generated(sample_text(rows)) == (
        GeneratedOutput("define <b>x</b>:", 'a "thing"', "a thing"),
        GeneratedOutput("p", "", ""),
    )


# ------------------------------------------------------------------------------ the worker loop
def _llm_cfg(base: str, metric: str = "rouge_l", **trainer):
    import pandas as pd

    rows = pd.DataFrame({"lemma": [f"word{i}" for i in range(12)], "gloss": [r for _, r in PAIRS] + ["a last one"]})
    cfg = llm_config(
        base,
        name="g",
        split=(0.5, 0.34, 0.16, 1),
        template="define {lemma}:",
        trainer={"epochs": 2, "batch_size": 4, "learning_rate": 0.01, **trainer},
        metric=metric,
        goal="maximize" if metric == "rouge_l" else "minimize",
        adapter={**LORA, "r": 2, "alpha": 4},
        generation={"max_new_tokens": 4},
    )
    return cfg, rows


def test_the_loop_ranks_by_rouge_l_and_reports_the_best_epochs_sample(tiny_llama_dir):
    pytest.importorskip("peft")
    from ludwig_hpo.data.preprocess import prepare
    from ludwig_hpo.results.records import parse_generated
    from ludwig_hpo.train.loop import Job, train_loop
    from ludwig_hpo.train.report_keys import GENERATED_SAMPLE, OBJECTIVE

    cfg, rows = _llm_cfg(str(tiny_llama_dir), eval_generation_samples=3)
    data = prepare(rows, cfg)
    reports: list[dict] = []
    train_loop(cfg, data, Job(), lambda metrics, ckpt: reports.append(dict(metrics)))
    assert len(reports) == 2
    for r in reports:
        assert r[OBJECTIVE] == r["validation/gloss/rouge_l"]
        assert 0.0 <= r["validation/gloss/exact_match"] <= 1.0
        assert "validation/gloss/perplexity" in r
    # the first epoch is the best so far; the second carries its rows only when it is as good
    first = parse_generated(reports[0][GENERATED_SAMPLE])
    assert len(first) == 3 and all(g.prompt.startswith("define word") for g in first)
    assert (GENERATED_SAMPLE in reports[1]) == (reports[1][OBJECTIVE] >= reports[0][OBJECTIVE])


def test_no_generated_metrics_without_a_sample(tiny_llama_dir):
    pytest.importorskip("peft")
    from ludwig_hpo.data.preprocess import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    cfg, rows = _llm_cfg(str(tiny_llama_dir), "loss", eval_generation_samples=0)
    data = prepare(rows, cfg)
    kept: list = []
    out = evaluate(
        build_model(cfg, data.meta),
        cfg,
        DeviceData(data, torch.device("cpu")),
        data.splits["validation"],
        "validation",
        4,
        kept=kept,
    )
    assert "validation/gloss/loss" in out and not any(k.endswith(("/exact_match", "/rouge_l")) for k in out)
    assert kept == []


@pytest.mark.parametrize("where", ["hyperopt", "validation_metric"])
def test_ranking_by_a_generated_metric_needs_a_sample(tiny_llama_dir, where):
    trainer: dict = {"eval_generation_samples": 0}
    if where == "validation_metric":  # what early stopping watches
        trainer.update(validation_field="gloss", validation_metric="exact_match")
    with pytest.raises(ValueError, match="is scored on generated outputs, but trainer.eval_generation_samples is 0"):
        _llm_cfg(str(tiny_llama_dir), "rouge_l" if where == "hyperopt" else "loss", **trainer)
