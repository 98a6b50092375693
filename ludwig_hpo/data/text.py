"""Preparation of text inputs with Ludwig's semantics (``ludwig/features/text_feature.py``,
``create_vocabulary`` and ``build_sequence_matrix`` of ``ludwig/utils/strings_utils.py``),
fitted on the training split. Runs in the driver, once per sweep.

The prepared array is (N, L) int64 token ids; :class:`~ludwig_hpo.data.preprocess.FeatureMeta`
holds ``vocab`` (id -> token), ``shape`` (L,) and ``stats``: ``padding_id`` (the id rows are padded
with: what an encoder masks), ``vocab_size``, ``length_p50`` / ``length_p90`` / ``length_p99`` /
``length_max`` (training rows' token counts, special tokens included, before the cut), and
``truncated`` (training rows longer than L).

Built-in tokenizers: the vocabulary is Ludwig's four special symbols, ``<EOS>`` 0, ``<SOS>`` 1,
``padding_symbol`` 2, ``unknown_symbol`` 3, then the ``most_common`` training tokens (or the words
of ``vocab_file``, one per line, up to the first space); a row is ``<SOS>`` + its ids + ``<EOS>``,
L = min(``max_sequence_length``, the longest training row with both symbols), cut from the end.
``hf_tokenizer``: the pretrained tokenizer's vocabulary, ids and special tokens, its padding id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.text import HF_TOKENIZER, text_preprocessing
from ludwig_hpo.config.type_preprocessing import START_SYMBOL, STOP_SYMBOL, UNKNOWN_SYMBOL
from ludwig_hpo.data.feature_types import _Column, fill_missing
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.data.tokenize import tokenizer, vocabulary
from ludwig_hpo.errors import DataError

Encoded = tuple[np.ndarray, FeatureMeta]

#: Ludwig's ids of its special symbols (``SpecialSymbol`` in ``ludwig/utils/strings_utils.py``).
STOP_ID, START_ID, PADDING_ID, UNKNOWN_ID = 0, 1, 2, 3


def load_vocab_file(path: Path) -> list[str]:
    """Ludwig's ``load_vocabulary``: each line stripped, up to its first space (blank lines
    skipped). Raises OSError / UnicodeDecodeError as reading the file does."""
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            words.append(line.split(" ")[0].split("\t")[0])
    return words


def ludwig_vocabulary(common: Sequence[str], padding_symbol: str, unknown_symbol: str) -> list[str]:
    """``common`` (most frequent first, or a vocab file's words) with Ludwig's special symbols
    put at their ids, each moved there when ``common`` holds it already: ``<EOS>`` 0, ``<SOS>``
    1, ``padding_symbol`` 2, ``unknown_symbol`` 3 (``add_or_move_symbol``, in that order). Pure."""
    vocab = list(dict.fromkeys(common))
    specials = (
        (STOP_SYMBOL, STOP_ID),
        (START_SYMBOL, START_ID),
        (padding_symbol, PADDING_ID),
        (unknown_symbol, UNKNOWN_ID),
    )
    for symbol, index in specials:
        if symbol in vocab:
            vocab.remove(symbol)
        vocab.insert(index, symbol)
    return vocab


def length_percentiles(lengths: np.ndarray, truncated: int) -> dict[str, float]:
    """The feature stats of the training rows' token counts ``lengths`` (N,): ``length_p50``,
    ``length_p90``, ``length_p99``, ``length_max`` (all 0 when N is 0) and ``truncated`` (the
    count of rows cut, as given). Pure; driver."""
    if len(lengths) == 0:
        return {"length_p50": 0.0, "length_p90": 0.0, "length_p99": 0.0, "length_max": 0.0, "truncated": 0.0}
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {
        "length_p50": float(p50),
        "length_p90": float(p90),
        "length_p99": float(p99),
        "length_max": float(lengths.max()),
        "truncated": float(truncated),
    }


def length_stats(lengths: np.ndarray, length: int) -> dict[str, float]:
    """Percentiles of the training rows' token counts and how many exceed ``length``. Pure."""
    return length_percentiles(lengths, int((lengths > length).sum()) if len(lengths) else 0)


def _pad(rows: list[list[int]], length: int, pad_id: int, padding: str) -> np.ndarray:
    x = np.full((len(rows), length), pad_id, dtype=np.int64)
    for r, ids in enumerate(rows):
        ids = ids[:length]
        if padding == "right":
            x[r, : len(ids)] = ids
        elif ids:
            x[r, length - len(ids) :] = ids
    return x


def _cells(col: _Column, prep: Any) -> list[str]:
    if prep.fill_value == UNKNOWN_SYMBOL:  # Ludwig's default fill follows a renamed unknown_symbol
        prep = prep.model_copy(update={"fill_value": prep.unknown_symbol})
    filled = fill_missing(col, prep, empty="keep")
    return [str(c).lower() if prep.lowercase else str(c) for c in filled]


def _empty(col: _Column, what: str) -> DataError:
    return DataError(
        f"column {col.s.name!r}: {what} in every one of the {len(col.train)} training rows",
        source=col.origin.source,
        key=col.key,
        fix="check the column name and preprocessing.tokenizer, or drop this feature",
    )


def _refuse_blank(col: _Column) -> None:
    """Refuse a column whose training cells are all missing or blank (before the fill value,
    which would make every row the same token)."""
    cells = col.s.iloc[col.train] if len(col.train) else col.s.iloc[:0]
    if len(cells) and all(c is None or (isinstance(c, float) and np.isnan(c)) or not str(c).strip() for c in cells):
        raise _empty(col, "the text is missing or blank")


def _refuse_empty(col: _Column, counts: np.ndarray, what: str) -> None:
    if len(col.train) and not counts[col.train].any():
        raise _empty(col, f"the {what} finds no token")


def _builtin(col: _Column, prep: Any, vocab_file: Path | None) -> Encoded:
    split = tokenizer(prep.tokenizer, prep.ngram_size)
    rows = [split(c) for c in _cells(col, prep)]
    counts = np.array([len(r) for r in rows], dtype=np.int64)
    _refuse_empty(col, counts, f"tokenizer {prep.tokenizer}")
    if vocab_file is not None:
        common = _vocab_words(vocab_file, prep, col)
    else:
        common = vocabulary((rows[i] for i in col.train), prep.most_common)
    vocab = ludwig_vocabulary(common, prep.padding_symbol, prep.unknown_symbol)
    index = {t: i for i, t in enumerate(vocab)}
    with_symbols = counts + 2
    longest = max((int(with_symbols[i]) for i in col.train), default=2)
    length = int(min(prep.max_sequence_length or longest, longest))  # null: the longest row
    ids = [[START_ID, *(index.get(t, UNKNOWN_ID) for t in toks), STOP_ID] for toks in rows]
    x = _pad(ids, length, PADDING_ID, prep.padding)
    stats = {
        "padding_id": float(PADDING_ID),
        "vocab_size": float(len(vocab)),
        **length_stats(with_symbols[col.train], length),
    }
    return x, FeatureMeta("", "text", vocab=tuple(vocab), shape=(length,), stats=stats)


def hf_ids(texts: list[str], tok: Any) -> list[list[int]]:
    """Each text's ids by a Hugging Face tokenizer, its special tokens included (``[CLS] ...
    [SEP]``, as Ludwig's ``HFTokenizer``), not cut. Pure but for the tokenizer's own state."""
    # verbose=False: rows longer than the model are cut afterwards, so transformers' warning
    # that such ids would overflow the position embeddings does not apply
    return [list(ids) for ids in tok(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]]


def hf_vocab(tok: Any) -> list[str]:
    """A Hugging Face tokenizer's tokens by id (added tokens included; a gap reads ``""``)."""
    vocab = tok.get_vocab()
    out = [""] * (max(vocab.values()) + 1 if vocab else 0)
    for token, i in vocab.items():
        out[i] = token
    return out


def _hf(col: _Column, prep: Any, load: Callable[[str], Any], name_key: str) -> Encoded:
    """``name_key``: the section that named the model (``encoder`` when a pretrained encoder
    imposed its tokenizer, else ``preprocessing``), where the errors point."""
    name = prep.pretrained_model_name_or_path
    try:
        tok = load(name)
    except (OSError, ValueError) as e:
        raise DataError(
            f"the tokenizer of {name!r} cannot be loaded: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
            source=col.origin.source,
            key=f"{col.key}.{name_key}.pretrained_model_name_or_path",
            fix=getattr(e, "fix", None) or "give a folder saved with save_pretrained, or a hub id reachable from here",
        ) from e
    ids = hf_ids(_cells(col, prep), tok)
    special = set(getattr(tok, "all_special_ids", ()))
    content = np.array([sum(1 for i in row if i not in special) for row in ids], dtype=np.int64)
    _refuse_empty(col, content, f"tokenizer of {prep.pretrained_model_name_or_path}")
    pad_id = tok.pad_token_id
    if pad_id is None:
        raise DataError(
            f"the tokenizer of {prep.pretrained_model_name_or_path!r} has no padding token",
            source=col.origin.source,
            key=f"{col.key}.{name_key}.pretrained_model_name_or_path",
            fix="use a model whose tokenizer defines pad_token, or tokenizer space_punct",
        )
    counts = np.array([len(r) for r in ids], dtype=np.int64)
    longest = max((int(counts[i]) for i in col.train), default=1)
    cap = prep.max_sequence_length or longest  # null: the longest training row
    model_max = getattr(tok, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < cap:
        cap = model_max  # the model's position embeddings end there
    length = int(min(cap, max((int(counts[i]) for i in col.train), default=1)))
    vocab = hf_vocab(tok)
    stats = {"padding_id": float(pad_id), "vocab_size": float(len(vocab)), **length_stats(counts[col.train], length)}
    return _pad(ids, length, int(pad_id), prep.padding), FeatureMeta(
        "", "text", vocab=tuple(vocab), shape=(length,), stats=stats
    )


def _vocab_path(prep: Any, col: _Column, data_dir: Path | None) -> Path | None:
    if prep.vocab_file is None:
        return None
    path = Path(prep.vocab_file).expanduser()
    if not path.is_absolute() and data_dir is not None:
        path = data_dir / path
    if not path.is_file():
        raise DataError(
            f"vocab_file {prep.vocab_file!r} not found ({path})",
            source=col.origin.source,
            key=f"{col.key}.preprocessing.vocab_file",
            fix="give the file's path (a relative path starts at the dataset file's folder)",
        )
    return path


def _vocab_words(path: Path, prep: Any, col: _Column) -> list[str]:
    """The words of ``vocab_file``; one line for a file that is not UTF-8 text or holds no word
    (every token would read as ``unknown_symbol``)."""
    key, fix = f"{col.key}.preprocessing.vocab_file", "give a UTF-8 text file of one token per line"
    try:
        words = load_vocab_file(path)
    except (OSError, UnicodeDecodeError) as e:
        why = "is not UTF-8 text" if isinstance(e, UnicodeDecodeError) else f"cannot be read ({e.strerror})"
        raise DataError(f"vocab_file {prep.vocab_file!r} {why}", source=col.origin.source, key=key, fix=fix) from e
    if not words:
        raise DataError(f"vocab_file {prep.vocab_file!r} holds no token", source=col.origin.source, key=key, fix=fix)
    return words


def encode_text(
    feat: Any,
    series: pd.Series,
    key: str,
    train_rows: np.ndarray,
    origin: DataOrigin,
    data_dir: Path | None = None,
    load_tokenizer: Callable[[str], Any] | None = None,
) -> Encoded:
    """One text input, prepared (see the module docstring), with its :class:`FeatureMeta`.

    Args:
        feat: the feature's config (``name``, ``encoder``, ``preprocessing``); series: its column,
            every row; key: where errors point (``input_features[name]``); train_rows: the
            training split's row positions; origin: the dataset file, for the rows errors name;
            data_dir: where a relative ``vocab_file`` starts (the dataset file's folder);
            load_tokenizer: hub id or folder -> a Hugging Face tokenizer (for ``hf_tokenizer``;
            None: :func:`ludwig_hpo.data.hf_loader.load_tokenizer`).

    Raises:
        DataError: no training row holds a token (every one missing or blank, or the tokenizer
            finds none), a ``vocab_file`` that is not there, not UTF-8 text or without a
            token, a Hugging Face tokenizer without a padding token (or one that cannot be loaded, as
            ``load_tokenizer`` raises it).
    """
    col = _Column(series.reset_index(drop=True), key, train_rows, origin)
    _refuse_blank(col)
    prep = text_preprocessing(feat)
    if prep.tokenizer == HF_TOKENIZER:
        if load_tokenizer is None:  # imported here: a sweep without it never imports transformers
            from ludwig_hpo.data import hf_loader

            load_tokenizer = hf_loader.load_tokenizer
        imposed = prep is not feat.preprocessing
        x, m = _hf(col, prep, load_tokenizer, "encoder" if imposed else "preprocessing")
    else:
        x, m = _builtin(col, prep, _vocab_path(prep, col, data_dir))
    return x, FeatureMeta(feat.name, "text", vocab=m.vocab, shape=m.shape, stats=m.stats)
