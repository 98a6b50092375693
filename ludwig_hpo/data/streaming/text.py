"""A text input fitted on a streamed training split in one pass, and applied batch by batch:
the streamed twin of :func:`~ludwig_hpo.data.text.encode_text`, whose cells, tokens, ids and
padding it reuses, so a row is prepared alike on either path.

Each batch becomes a :class:`TextPartial`: the training rows' token counts in first-seen order
(a built-in tokenizer without ``vocab_file``), a histogram of their token counts (special
tokens included, before the cut) and how many training rows hold text and tokens. Merged in
dataset order, the counts give the vocabulary :func:`~ludwig_hpo.data.tokenize.vocabulary`
gives on the whole column (ties of equal counts in first-seen order, as ``Counter``), the
histogram gives the width L and the length stats (numpy's ``linear`` percentiles, computed from
the counts). The driver holds one count per distinct training token and one per distinct row
length, never a row.

A Hugging Face tokenizer (``tokenizer: hf_tokenizer``, or the one a pretrained encoder imposes)
has no vocabulary to fit: each process that maps a batch loads it once (:func:`hf_tokenizer`).

Missing cells take ``fill_value`` as in memory; ``fill_with_mode`` (a count of every distinct
cell: as many as rows) and ``bfill`` / ``ffill`` are refused before any row is read
(:mod:`ludwig_hpo.data.streaming.checks`). Pure but for the tokenizer's loading;
:func:`text_partial` and :func:`apply_text` run wherever Ray Data maps a batch,
:func:`text_meta` in the driver.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.text import HF_TOKENIZER, text_preprocessing
from ludwig_hpo.data.feature_types import _Column
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.data.streaming.number_counts import _percentile
from ludwig_hpo.data.text import (
    PADDING_ID,
    START_ID,
    STOP_ID,
    UNKNOWN_ID,
    _cells,
    _empty,
    _pad,
    _vocab_path,
    _vocab_words,
    hf_ids,
    hf_vocab,
    ludwig_vocabulary,
)
from ludwig_hpo.data.tokenize import tokenizer
from ludwig_hpo.errors import DataError


@dataclass
class TextPartial:
    """One text input's column in one batch (or merged over batches, in dataset order).

    Attributes:
        tokens: training rows' token counts, keys in first-seen order (empty with a
            ``vocab_file`` or a Hugging Face tokenizer).
        lengths: (M,) int64, ``lengths[n]`` training rows of ``n`` ids (special tokens included).
        train_rows: training rows.
        with_text: training rows whose cell is present and not blank (before the fill).
        with_tokens: training rows in which the tokenizer finds a token (after the fill; a
            Hugging Face tokenizer's special tokens do not count).
    """

    tokens: Counter[str] = field(default_factory=Counter)
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    train_rows: int = 0
    with_text: int = 0
    with_tokens: int = 0

    def merge(self, other: TextPartial, offset: int) -> None:
        """Add ``other``, the partial of the next batch (``offset``: its first row, unused: the
        merge order alone keeps the first-seen order)."""
        del offset
        self.tokens.update(other.tokens)
        if len(other.lengths) > len(self.lengths):
            self.lengths, other_lengths = other.lengths.copy(), self.lengths
        else:
            other_lengths = other.lengths
        self.lengths[: len(other_lengths)] += other_lengths
        self.train_rows += other.train_rows
        self.with_text += other.with_text
        self.with_tokens += other.with_tokens


@functools.lru_cache(maxsize=4)
def hf_tokenizer(name: str) -> Any:
    """The Hugging Face tokenizer of ``name`` (hub id or folder), loaded once per process.

    Raises:
        OSError, ValueError, HFModelError: as :func:`ludwig_hpo.data.hf_loader.load_tokenizer`.
    """
    from ludwig_hpo.data import hf_loader  # imported here: a sweep without it never imports transformers

    return hf_loader.load_tokenizer(name)


def _name_key(feat: Any, prep: Any) -> str:
    """The section that named the Hugging Face model, where errors point (as in memory)."""
    return "encoder" if prep is not feat.preprocessing else "preprocessing"


def _load(feat: Any, prep: Any, key: str, source: str | None) -> Any:
    name = prep.pretrained_model_name_or_path
    try:
        return hf_tokenizer(name)
    except (OSError, ValueError) as e:
        raise DataError(
            f"the tokenizer of {name!r} cannot be loaded: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
            source=source,
            key=f"{key}.{_name_key(feat, prep)}.pretrained_model_name_or_path",
            fix=getattr(e, "fix", None) or "give a folder saved with save_pretrained, or a hub id reachable from here",
        ) from e


def _blank(cells: pd.Series) -> np.ndarray:
    return np.array(
        [c is None or (isinstance(c, float) and np.isnan(c)) or not str(c).strip() for c in cells], dtype=bool
    )


def text_partial(feat: Any, s: pd.Series, train: np.ndarray, key: str, origin: DataOrigin) -> TextPartial:
    """The :class:`TextPartial` of one batch's column ``s``; ``train`` (N,) marks its training rows.

    Raises:
        DataError: a Hugging Face tokenizer that cannot be loaded, naming the key of its model.
    """
    prep = text_preprocessing(feat)
    rows = np.flatnonzero(train)
    present = s.iloc[rows].reset_index(drop=True)
    # only the training rows: a constant fill does not depend on the other rows
    cells = _cells(_Column(present, key, np.arange(len(rows)), origin), prep)
    if prep.tokenizer == HF_TOKENIZER:
        tok = _load(feat, prep, key, origin.source)
        ids = hf_ids(cells, tok) if cells else []
        special = set(getattr(tok, "all_special_ids", ()))
        lengths = np.array([len(r) for r in ids], dtype=np.int64)
        content = sum(1 for r in ids if any(i not in special for i in r))
        counts: Counter[str] = Counter()
    else:
        split = tokenizer(prep.tokenizer, prep.ngram_size)
        token_rows = [split(c) for c in cells]
        lengths = np.array([len(t) + 2 for t in token_rows], dtype=np.int64)  # <SOS> and <EOS>
        content = sum(1 for t in token_rows if t)
        counts = Counter()
        if prep.vocab_file is None:
            for t in token_rows:
                counts.update(t)
    return TextPartial(
        tokens=counts,
        lengths=np.bincount(lengths, minlength=0).astype(np.int64),
        train_rows=len(rows),
        with_text=int((~_blank(present)).sum()),
        with_tokens=content,
    )


def _length_stats(hist: np.ndarray, length: int) -> dict[str, float]:
    """:func:`~ludwig_hpo.data.text.length_stats` of the rows ``hist`` counts (equal floats)."""
    keys = np.flatnonzero(hist).astype(np.int64)
    if len(keys) == 0:
        return {"length_p50": 0.0, "length_p90": 0.0, "length_p99": 0.0, "length_max": 0.0, "truncated": 0.0}
    cum = np.cumsum(hist[keys])
    n = int(cum[-1])
    p50, p90, p99 = (_percentile(keys, cum, n, q) for q in (50, 90, 99))
    return {
        "length_p50": p50,
        "length_p90": p90,
        "length_p99": p99,
        "length_max": float(keys[-1]),
        "truncated": float(hist[length + 1 :].sum()),
    }


def text_meta(feat: Any, part: TextPartial, key: str, source: str | None, data_dir: Path | None = None) -> FeatureMeta:
    """The text input's :class:`FeatureMeta` from the merged partial of the whole stream (what
    :func:`~ludwig_hpo.data.text.encode_text` fits on the same rows). ``data_dir``: where a
    relative ``vocab_file`` starts. Runs in the driver.

    Raises:
        DataError: as :func:`~ludwig_hpo.data.text.encode_text`: every training cell missing or
            blank, no training row with a token, a ``vocab_file`` not there, not UTF-8 text or
            without a token, a Hugging Face tokenizer that cannot be loaded or has no padding token.
    """
    prep = text_preprocessing(feat)
    # the errors name the column, count the training rows and name the dataset, as in memory
    col = _Column(
        pd.Series([], name=feat.source_column, dtype=object), key, np.arange(part.train_rows), DataOrigin(source)
    )
    if part.train_rows and not part.with_text:
        raise _empty(col, "the text is missing or blank")
    hist = part.lengths
    if prep.tokenizer == HF_TOKENIZER:
        tok = _load(feat, prep, key, source)
        what = f"tokenizer of {prep.pretrained_model_name_or_path}"
    else:
        what = f"tokenizer {prep.tokenizer}"
    if part.train_rows and not part.with_tokens:
        raise _empty(col, f"the {what} finds no token")
    longest = int(len(hist) - 1) if len(hist) else 0
    if prep.tokenizer == HF_TOKENIZER:
        pad_id = tok.pad_token_id
        if pad_id is None:
            raise DataError(
                f"the tokenizer of {prep.pretrained_model_name_or_path!r} has no padding token",
                source=source,
                key=f"{key}.{_name_key(feat, prep)}.pretrained_model_name_or_path",
                fix="use a model whose tokenizer defines pad_token, or tokenizer space_punct",
            )
        longest = longest or 1
        cap = prep.max_sequence_length or longest
        model_max = getattr(tok, "model_max_length", None)
        if isinstance(model_max, int) and 0 < model_max < cap:
            cap = model_max  # the model's position embeddings end there
        length = int(min(cap, longest))
        vocab = hf_vocab(tok)
    else:
        pad_id = PADDING_ID
        longest = longest or 2
        length = int(min(prep.max_sequence_length or longest, longest))
        path = _vocab_path(prep, col, data_dir)
        common = _vocab_words(path, prep, col) if path is not None else _most_common(part.tokens, prep.most_common)
        vocab = ludwig_vocabulary(common, prep.padding_symbol, prep.unknown_symbol)
    stats = {"padding_id": float(pad_id), "vocab_size": float(len(vocab)), **_length_stats(hist, length)}
    return FeatureMeta(feat.name, "text", vocab=tuple(vocab), shape=(length,), stats=stats)


def _most_common(counts: Counter[str], most_common: int | None) -> list[str]:
    # Counter.most_common is a stable sort: ties keep the insertion (first-seen) order
    return [tok for tok, _ in counts.most_common(most_common)]


@functools.lru_cache(maxsize=8)
def _index(vocab: tuple[str, ...]) -> dict[str, int]:
    return {t: i for i, t in enumerate(vocab)}


def apply_text(feat: Any, s: pd.Series, meta: FeatureMeta, key: str, origin: DataOrigin) -> np.ndarray:
    """The text input's cells ``s`` (N,) as (N, L) int64 ids with its fitted ``meta``
    (:func:`text_meta`), as :func:`~ludwig_hpo.data.text.encode_text` prepares them. Pure
    but for the tokenizer's loading; runs wherever a batch is mapped.

    Raises:
        DataError: a Hugging Face tokenizer that cannot be loaded.
    """
    prep = text_preprocessing(feat)
    col = _Column(s.reset_index(drop=True), key, np.zeros(0, np.int64), origin)
    cells = _cells(col, prep)
    (length,) = meta.shape
    if prep.tokenizer == HF_TOKENIZER:
        ids = hf_ids(cells, _load(feat, prep, key, origin.source)) if cells else []
        return _pad(ids, length, int(meta.stats["padding_id"]), prep.padding)
    split = tokenizer(prep.tokenizer, prep.ngram_size)
    index = _index(tuple(meta.vocab))
    rows = [[START_ID, *(index.get(t, UNKNOWN_ID) for t in split(c)), STOP_ID] for c in cells]
    return _pad(rows, length, PADDING_ID, prep.padding)
