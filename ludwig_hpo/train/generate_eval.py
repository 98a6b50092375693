"""Generated-output metrics of an LLM: a bounded sample of the scored split answered by
``model.generate`` and scored against its reference (``exact_match``, ``rouge_l``).

The sample is the first ``trainer.eval_generation_samples`` rows of the scored split, so every
epoch and every trial of a sweep answers the same prompts. Each rank generates for its share
(``sample[rank::world]``); the sums are all-reduced, so every sampled row counts once and every
rank returns the same scores. Sampling (when ``generation`` asks for it) draws from a generator
seeded with ``trainer.seed`` inside a forked random state: the scores are reproducible and the
training's random stream is left as it was. Runs on every rank of a trial, inside
:func:`~ludwig_hpo.train.evaluate.evaluate`.

A row's prompt and reference come from the prepared data alone (see ``data/llm``): the input
ids hold prompt + target + EOS, right-padded, and the labels are -100 at the prompt and the
padding; the prompt is the ids before the first label, the reference the labelled ids.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ludwig_hpo.train.data import DeviceData
from ludwig_hpo.train.report_keys import GENERATED_FIELDS
from ludwig_hpo.train.strategy import autocast
from ludwig_hpo.train.strategy import world as _world

#: Label of positions that carry no target (the prompt, the padding): PyTorch's ignore index.
IGNORE = -100
#: The generated metrics' names (beside the teacher-forced ones of the text output).
EXACT_MATCH, ROUGE_L = "exact_match", "rouge_l"
#: Rows of the sample whose prompt, reference and generated text a trial keeps (its best epoch's).
KEPT_ROWS = 8

_NOT_WORD = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class GeneratedRow:
    """One sampled row: its prompt, its reference and what the model generated (decoded text,
    special tokens skipped), and its position in the sample (0-based)."""

    position: int
    prompt: str
    reference: str
    generated: str


def words(text: str) -> list[str]:
    """``text`` as ROUGE counts it: lower-cased, every run of characters other than ``a-z`` and
    ``0-9`` a separator (the default tokenizer of ``rouge_score`` and torchmetrics' ROUGE)."""
    return _NOT_WORD.sub(" ", text.lower()).split()


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F-measure (β = 1) of ``candidate`` against ``reference``, in [0, 1]: from the
    length of the longest common subsequence of their :func:`words`, precision = LCS / candidate
    words, recall = LCS / reference words, F = 2PR / (P + R). Two texts without words score 1
    (both empty), one without words 0. Pure; O(len(candidate) * len(reference))."""
    c, r = words(candidate), words(reference)
    if not c or not r:
        return float(not c and not r)
    prev = [0] * (len(r) + 1)  # one row of the LCS table at a time
    for cw in c:
        row = [0]
        for j, rw in enumerate(r):
            row.append(prev[j] + 1 if cw == rw else max(prev[j + 1], row[j]))
        prev = row
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(c), lcs / len(r)
    return 2 * precision * recall / (precision + recall)


def exact_match(candidate: str, reference: str) -> float:
    """1.0 when ``candidate`` equals ``reference`` once leading and trailing whitespace is
    stripped from both, else 0.0. Pure."""
    return float(candidate.strip() == reference.strip())


def sample_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """The sampled rows of a split: its first ``n`` rows in split order (all when fewer)."""
    return rows[: max(n, 0)]


def prompt_and_reference(ids: Sequence[int], labels: Sequence[int], pad_id: int | None) -> tuple[list[int], list[int]]:
    """One prepared row's ``(prompt ids, reference ids)``.

    Args:
        ids: (L,) input ids: prompt + target + EOS, right-padded.
        labels: (L,) labels: the target ids (and EOS), -100 at the prompt and the padding.
        pad_id: the tokenizer's pad id; used only for a row whose target was cut off entirely
            (no label at all): its prompt is then its ids without the trailing padding.

    Returns:
        The ids before the first labelled position, and the labelled ids in order.
    """
    ids, labels = list(ids), list(labels)
    first = next((i for i, v in enumerate(labels) if v != IGNORE), None)
    if first is None:
        end = len(ids)
        while end and pad_id is not None and ids[end - 1] == pad_id:
            end -= 1
        return ids[:end], []
    return ids[:first], [v for v in labels if v != IGNORE]


def left_padded(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``prompts`` as one left-padded (B, P) int64 batch and its (B, P) attention mask (1 at
    the prompt's ids, 0 at the padding); P is the longest prompt (at least 1)."""
    width = max([len(p) for p in prompts] + [1])
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.int64)
    mask = torch.zeros((len(prompts), width), dtype=torch.int64)
    for i, p in enumerate(prompts):
        if len(p):
            ids[i, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.int64)
            mask[i, width - len(p) :] = 1
    return ids, mask


def new_tokens(out: torch.Tensor, prompt_width: int, stop_ids: set[int]) -> list[list[int]]:
    """The generated ids of each row of ``out`` ((B, P + new) from ``generate``): the ids after
    the prompt, up to (not including) the first of ``stop_ids`` (EOS; the padding a finished
    row is filled with)."""
    rows = []
    for row in out[:, prompt_width:].tolist():
        cut = next((i for i, v in enumerate(row) if v in stop_ids), len(row))
        rows.append(row[:cut])
    return rows


def sample_text(rows: Sequence[GeneratedRow]) -> str:
    """``rows`` as the epoch report's ``generated_sample``: a JSON list of objects with the
    report's generated fields (prompt, reference, generated), in order."""
    return json.dumps([dict(zip(GENERATED_FIELDS, (r.prompt, r.reference, r.generated), strict=True)) for r in rows])


def _all_reduce(t: torch.Tensor) -> torch.Tensor:
    if _world()[1] > 1:
        dist.all_reduce(t)
    return t


@torch.no_grad()
def generated_scores(
    model: Any,
    ids: torch.Tensor,
    labels: torch.Tensor,
    sample: np.ndarray,
    *,
    batch_size: int,
    generate_kwargs: Mapping[str, Any],
    seed: int,
    lockstep: bool = False,
    keep: int = KEPT_ROWS,
) -> tuple[dict[str, float], list[GeneratedRow]]:
    """Generate for this rank's share of ``sample`` and score it; every rank of the group calls it.

    Args:
        model: has ``tokenizer`` (a Hugging Face tokenizer) and ``generate(prompt_ids,
            attention_mask, **generate_kwargs)`` -> (B, P + new) ids (the LLM model).
        ids, labels: (N, L) int64 input ids and labels of every prepared row, on the device.
        sample: the sampled row indices (:func:`sample_rows`), the same on every rank.
        batch_size: prompts per ``generate`` call.
        generate_kwargs: passed to every ``generate`` call (``generation.hf_kwargs()``).
        seed: seeds the random state the calls draw from (it matters only when sampling).
        lockstep: every rank runs the same number of ``generate`` calls, each with
            ``synced_gpus=True`` (an FSDP forward is a collective, and Hugging Face's
            ``synced_gpus`` keeps a rank that finished generating stepping with the others);
            a rank with fewer prompts answers a filler batch and discards it.
        keep: the first ``keep`` rows of the sample are returned with their texts.

    Returns:
        ``({"exact_match": mean, "rouge_l": mean}`` over every sampled row of every rank (NaN
        for an empty sample), ``the kept rows`` in sample order, the same on every rank).
    """
    rank, world = _world()
    tok = model.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    stop = {v for v in (tok.eos_token_id, tok.pad_token_id) if v is not None}
    positions = list(range(rank, len(sample), world))
    device = ids.device
    kwargs = dict(generate_kwargs)
    if lockstep and world > 1:
        kwargs["synced_gpus"] = True
    calls = math.ceil(math.ceil(len(sample) / world) / batch_size) if lockstep else None
    sums = torch.zeros(3, dtype=torch.float64)  # exact matches, ROUGE-L, rows
    kept: list[GeneratedRow] = []
    ran = 0
    cuda = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        for start in range(0, len(positions), batch_size):
            chunk = positions[start : start + batch_size]
            idx = torch.as_tensor(sample[chunk], dtype=torch.int64, device=device)
            pairs = [
                prompt_and_reference(a, b, pad_id)
                for a, b in zip(ids.index_select(0, idx).tolist(), labels.index_select(0, idx).tolist(), strict=True)
            ]
            prompt_ids, mask = left_padded([p for p, _ in pairs], pad_id)
            out = model.generate(prompt_ids.to(device), mask.to(device), **kwargs)
            ran += 1
            for pos, (prompt, ref), gen in zip(chunk, pairs, new_tokens(out, prompt_ids.shape[1], stop), strict=True):
                generated = tok.decode(gen, skip_special_tokens=True)
                reference = tok.decode(ref, skip_special_tokens=True)
                sums += torch.tensor([exact_match(generated, reference), rouge_l(generated, reference), 1.0])
                if pos < keep:
                    kept.append(GeneratedRow(pos, tok.decode(prompt, skip_special_tokens=True), reference, generated))
        if calls is not None and ran < calls:
            filler_ids, filler_mask = _filler(ids, labels, sample, pad_id)
            for _ in range(calls - ran):
                model.generate(filler_ids.to(device), filler_mask.to(device), **kwargs)
    total = _all_reduce(sums.to(device)).tolist()
    n = total[2]
    scores = {EXACT_MATCH: total[0] / n if n else math.nan, ROUGE_L: total[1] / n if n else math.nan}
    return scores, _gathered(kept, world)


def _filler(
    ids: torch.Tensor, labels: torch.Tensor, sample: np.ndarray, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A one-prompt batch (the sample's first row) for a rank that has run out of prompts."""
    prompt, _ = prompt_and_reference(ids[int(sample[0])].tolist(), labels[int(sample[0])].tolist(), pad_id)
    return left_padded([prompt], pad_id)


def _gathered(kept: list[GeneratedRow], world: int) -> list[GeneratedRow]:
    """Every rank's kept rows, in sample order (a collective when ``world`` > 1)."""
    if world > 1:
        parts: list[Any] = [None] * world
        dist.all_gather_object(parts, kept)
        kept = [row for part in parts for row in part]
    return sorted(kept, key=lambda r: r.position)


def generation_metrics(
    model: Any,
    cfg: Any,
    dd: DeviceData,
    rows: np.ndarray,
    split: str,
    batch_size: int,
    *,
    lockstep: bool = False,
    kept: list[GeneratedRow] | None = None,
) -> dict[str, float]:
    """The generated-output metrics of an llm config's text output on ``split``, keyed
    ``<split>/<output>/exact_match`` and ``<split>/<output>/rouge_l``; empty when
    ``trainer.eval_generation_samples`` is 0. Every rank calls it and gets the same values.

    Args:
        model: the LLM model (unwrapped; FSDP's sharded module with ``lockstep``), which
            generates with ``generation``'s settings (greedy unless they sample).
        cfg: the trial's :class:`~ludwig_hpo.config.schema.SweepConfig` (``model_type: llm``).
        dd: the prepared rows on the device (the first input feature holds the ids).
        rows: the split's rows in split order; the first ``eval_generation_samples`` are sampled.
        batch_size: prompts per ``generate`` call (the evaluation batch size).
        lockstep: see :func:`generated_scores`.
        kept: when given, receives the sample's first :data:`KEPT_ROWS` rows with their texts.
    """
    n = cfg.trainer.eval_generation_samples
    if n <= 0:
        return {}
    out_name, in_name = cfg.output_features[0].name, cfg.input_features[0].name
    with autocast(dd.device, cfg.trainer.precision):  # as the evaluation's forward passes run
        scores, rows_kept = generated_scores(
            model,
            dd.inputs[in_name],
            dd.targets[out_name],
            sample_rows(rows, n),
            batch_size=max(batch_size, 1),
            generate_kwargs={},  # the model generates with the config's generation settings
            seed=cfg.trainer.seed,
            lockstep=lockstep,
        )
    if kept is not None:
        kept[:] = rows_kept
    return {f"{split}/{out_name}/{m}": v for m, v in scores.items()}
