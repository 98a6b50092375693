"""Preparation of set, bag, vector, timeseries, date, sequence and h3 inputs and of set and
vector targets, with Ludwig's semantics; vocabularies, lengths and sizes from the training
split only. Runs in the driver, once per sweep (called by :func:`ludwig_hpo.data.preprocess.prepare`).

Prepared arrays (the model's, batching's and serving's contract):

| type | array | :class:`FeatureMeta` |
|---|---|---|
| set input | (N, V) float32 multi-hot, index 0 = unknown tokens | ``vocab`` (index 0 ``<UNK>``), ``shape`` (V,) |
| bag input | (N, V) float32 token counts, index 0 = unknown tokens | as a set |
| sequence | (N, L) int64 token ids: 0 padding, 1 unknown, 2 ``<SOS>``, 3 ``<EOS>`` around each row (Ludwig's) | ``vocab``, ``shape`` (L,) |
| timeseries | (N, L) float32, padded with ``padding_value`` | ``shape`` (L,) |
| vector | (N, D) float32 | ``shape`` (D,) |
| date | (N, 9) int64 (:data:`~ludwig_hpo.data.components.DATE_COMPONENTS`) | ``shape`` (9,) |
| h3 | (N, 19) int64 (:data:`~ludwig_hpo.data.components.H3_COMPONENTS`) | ``shape`` (19,) |
| set target | (N, V) float32 multi-hot (no unknown index) | ``vocab``, ``shape`` (V,) |
| vector target | (N, D) float32 | ``shape`` (D,) |

Missing values take Ludwig's default for the type (:func:`fill_missing`, the one place).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.type_preprocessing import START_SYMBOL, STOP_SYMBOL, UNKNOWN_SYMBOL, SetPreprocessing
from ludwig_hpo.data.components import (
    DATE_COMPONENTS,
    H3_COMPONENTS,
    date_components,
    h3_components,
    to_datetime,
    to_h3,
)
from ludwig_hpo.data.missing import fill_from_neighbours
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.data.tokenize import tokenizer, vocabulary
from ludwig_hpo.errors import DataError

Encoded = tuple[np.ndarray, FeatureMeta]


class _Column:
    """One column being prepared: its cells, where errors point, and the training rows."""

    def __init__(self, series: pd.Series, key: str, train: np.ndarray, origin: DataOrigin) -> None:
        self.s, self.key, self.train, self.origin = series, key, np.asarray(train), origin

    def refuse(self, positions: list[int] | np.ndarray, what: str, fix: str) -> DataError:
        """The one-line error of the cells at ``positions`` (0-based, ascending): ``what`` names
        the fault (``"values are not dates"``), the first cell is quoted."""
        pos = [int(p) for p in positions]
        return DataError(
            f"column {self.s.name!r}: {len(pos)} {what} (e.g. {self.s.iloc[pos[0]]!r}; {self.origin.rows(pos)})",
            source=self.origin.source,
            key=self.key,
            fix=fix,
        )


def _missing(cells: pd.Series) -> np.ndarray:
    return np.array([c is None or (isinstance(c, float) and np.isnan(c)) or c is pd.NA for c in cells], dtype=bool)


def fill_missing(col: _Column, prep: Any, *, empty: str) -> pd.Series:
    """The column with its missing cells filled by the feature's ``missing_value_strategy``:
    ``fill_with_const`` puts ``prep.fill_value`` (Ludwig's default strategy for every type
    here), ``fill_with_mode`` the training split's most frequent cell, ``bfill`` / ``ffill``
    the next / previous row's cell (:func:`~ludwig_hpo.data.missing.fill_from_neighbours`);
    ``drop_row`` rows were dropped before (:func:`~ludwig_hpo.data.rows.missing_drops`).

    ``empty`` says what a constant of ``""`` means for the type: ``"keep"`` (an empty
    series / token list), ``"now"`` (a date: the time preparation runs, as Ludwig), or
    ``"refuse"`` (a vector has no empty form).

    Raises:
        DataError: a missing vector without a fill value; every training cell missing for
            ``fill_with_mode``, every cell for ``bfill`` / ``ffill``.
    """
    s = col.s.astype(object)
    missing = _missing(s)
    if not missing.any():
        return s
    strategy = prep.missing_value_strategy
    if strategy in ("bfill", "ffill"):
        out = fill_from_neighbours(s.where(~missing, None), strategy)
        if not _missing(out).any():
            return out
        raise col.refuse(np.flatnonzero(missing), "cells are missing, every one", "drop this feature")
    if strategy == "fill_with_mode":
        present = s.iloc[col.train][~missing[col.train]]
        if present.empty:
            raise col.refuse(np.flatnonzero(missing), "cells are missing, every training cell", "drop this feature")
        value: Any = _mode(present)
    else:
        value = prep.fill_value
    if value == "" and empty == "refuse":
        raise col.refuse(
            np.flatnonzero(missing),
            "rows have no value",
            "fill or drop those rows, or set preprocessing.fill_value to a row of numbers",
        )
    if value == "" and empty == "now":
        value = datetime.now()
    out = s.copy()
    out[missing] = [value] * int(missing.sum())
    return out


def _mode(cells: pd.Series) -> Any:
    """The most frequent cell (compared as text, so list cells count too; the first seen on a tie)."""
    codes = pd.factorize(cells.astype(str))[0]
    return cells.iloc[int(np.argmax(codes == np.bincount(codes).argmax()))]


def _tokens(cells: pd.Series, prep: Any) -> list[list[str]]:
    split = tokenizer(prep.tokenizer, getattr(prep, "ngram_size", 2))
    out = []
    for c in cells:
        if isinstance(c, (list, tuple, set, np.ndarray)):
            toks = [str(t) for t in c]
        else:
            toks = split(str(c))
        out.append([t.lower() for t in toks] if prep.lowercase else toks)
    return out


def _counts(col: _Column, prep: Any, *, distinct: bool, unknown: bool) -> Encoded:
    """A set (``distinct``: multi-hot) or bag (counts) column over the training vocabulary;
    ``unknown``: index 0 holds tokens outside it (inputs)."""
    rows = _tokens(fill_missing(col, prep, empty="keep"), prep)
    vocab = vocabulary((rows[i] for i in col.train), prep.most_common, distinct=distinct)
    if unknown:
        vocab = [UNKNOWN_SYMBOL, *[t for t in vocab if t != UNKNOWN_SYMBOL]]
    if not vocab:
        raise col.refuse(col.train[:1], "training rows hold no tokens", "check preprocessing.tokenizer")
    index = {t: i for i, t in enumerate(vocab)}
    x = np.zeros((len(rows), len(vocab)), dtype=np.float32)
    for r, toks in enumerate(rows):
        for t in toks:
            j = index.get(t, 0 if unknown else -1)
            if j < 0:
                continue
            x[r, j] = 1.0 if distinct else x[r, j] + 1.0
    return x, FeatureMeta("", "", vocab=tuple(vocab), shape=(len(vocab),))


def _floats(col: _Column, cells: pd.Series, split: Callable[[str], list[str]] | None) -> list[np.ndarray]:
    """Each cell as a float array: a list / array as is, a string split by ``split`` (spaces
    when None). Raises DataError naming the cells that are not numbers."""
    out: list[np.ndarray] = []
    bad: list[int] = []
    for i, c in enumerate(cells):
        try:
            if isinstance(c, (list, tuple, np.ndarray)):
                out.append(np.asarray(c, dtype=np.float64).reshape(-1))
            elif isinstance(c, (int, float)) and not isinstance(c, bool):
                out.append(np.array([float(c)]))
            else:
                toks = split(str(c)) if split is not None else str(c).split()
                out.append(np.array([float(t) for t in toks], dtype=np.float64))
        except (TypeError, ValueError):
            bad.append(i)
            out.append(np.zeros(0))
    if bad:
        raise col.refuse(bad, "cells are not lists of numbers", "write each cell as numbers separated by spaces")
    return out


def _vector(col: _Column, prep: Any, size: int | None) -> Encoded:
    cells = fill_missing(col, prep, empty="refuse") if prep is not None else col.s
    values = _floats(col, cells, None)
    d = size or (len(values[int(col.train[0])]) if len(col.train) else len(values[0]))
    wrong = [i for i, v in enumerate(values) if len(v) != d]
    if wrong:
        where = "preprocessing.vector_size" if size else "the first training row"
        raise col.refuse(
            wrong,
            f"rows do not hold {d} numbers ({where} holds {d})",
            "give every row the same number of values" + ("" if size else " or set preprocessing.vector_size"),
        )
    x = np.stack(values).astype(np.float64) if values else np.zeros((0, d))
    if not np.isfinite(x).all():
        rows = np.flatnonzero(~np.isfinite(x).all(axis=1))
        raise col.refuse(rows, "rows hold NaN or infinite values", "clean those rows")
    return x.astype(np.float32), FeatureMeta("", "", shape=(d,))


def _timeseries(col: _Column, prep: Any) -> Encoded:
    split = tokenizer(prep.tokenizer)
    values = _floats(col, fill_missing(col, prep, empty="keep"), split)
    longest = max((len(values[int(i)]) for i in col.train), default=1)
    length = max(1, min(prep.timeseries_length_limit, longest))
    x = np.full((len(values), length), prep.padding_value, dtype=np.float64)
    for r, v in enumerate(values):
        v = v[:length]
        v = np.where(np.isnan(v), prep.padding_value, v)
        if prep.padding == "right":
            x[r, : len(v)] = v
        else:
            x[r, length - len(v) :] = v
    if np.isinf(x).any():
        raise col.refuse(np.flatnonzero(np.isinf(x).any(axis=1)), "rows hold infinite values", "clean those rows")
    return x.astype(np.float32), FeatureMeta("", "", shape=(length,), stats={"padding_value": prep.padding_value})


def _sequence(col: _Column, prep: Any) -> Encoded:
    """Token ids as Ludwig builds them: ``<SOS>`` + the tokens + ``<EOS>``, cut to the length
    (which counts both symbols), then padded."""
    rows = _tokens(fill_missing(col, prep, empty="keep"), prep)
    special = (prep.padding_symbol, prep.unknown_symbol, START_SYMBOL, STOP_SYMBOL)
    common = vocabulary(([t for t in rows[i] if t not in special] for i in col.train), prep.most_common)
    vocab = [*special, *common]
    index = {t: i for i, t in enumerate(vocab)}
    longest = max((len(rows[int(i)]) for i in col.train), default=0) + 2
    length = prep.sequence_length or min(prep.max_sequence_length, longest)
    x = np.zeros((len(rows), length), dtype=np.int64)
    for r, toks in enumerate(rows):
        ids = [index[START_SYMBOL], *(index.get(t, 1) for t in toks), index[STOP_SYMBOL]][:length]
        if prep.padding == "right":
            x[r, : len(ids)] = ids
        else:
            x[r, length - len(ids) :] = ids
    return x, FeatureMeta("", "", vocab=tuple(vocab), shape=(length,))


def _date(col: _Column, prep: Any) -> Encoded:
    cells = fill_missing(col, prep, empty="now")
    out, bad = [], []
    for i, c in enumerate(cells):
        try:
            out.append(date_components(to_datetime(c, prep.datetime_format)))
        except (ValueError, OverflowError, TypeError):
            bad.append(i)
    if bad:
        fmt = f"the datetime_format {prep.datetime_format!r}" if prep.datetime_format else "any date form"
        raise col.refuse(
            bad,
            f"values are not dates in {fmt}",
            "set preprocessing.datetime_format to the column's form (strptime codes, e.g. '%d/%m/%Y') or clean the cells",
        )
    return np.asarray(out, dtype=np.int64).reshape(len(cells), len(DATE_COMPONENTS)), FeatureMeta(
        "", "", shape=(len(DATE_COMPONENTS),)
    )


def _h3(col: _Column, prep: Any) -> Encoded:
    cells = fill_missing(col, prep, empty="keep")
    out, bad = [], []
    for i, c in enumerate(cells):
        try:
            out.append(h3_components(to_h3(c)))
        except (ValueError, OverflowError, TypeError):
            bad.append(i)
    if bad:
        raise col.refuse(
            bad, "values are not h3 indexes", "write each cell as a 64-bit h3 index (integer or hexadecimal)"
        )
    return np.asarray(out, dtype=np.int64).reshape(len(cells), len(H3_COMPONENTS)), FeatureMeta(
        "", "", shape=(len(H3_COMPONENTS),)
    )


_INPUTS: dict[str, Callable[[_Column, Any], Encoded]] = {
    "set": lambda col, prep: _counts(col, prep, distinct=True, unknown=True),
    "bag": lambda col, prep: _counts(col, prep, distinct=False, unknown=True),
    "vector": lambda col, prep: _vector(col, prep, prep.vector_size),
    "timeseries": _timeseries,
    "sequence": _sequence,
    "date": _date,
    "h3": _h3,
}


def _named(encoded: Encoded, name: str, kind: str) -> Encoded:
    x, m = encoded
    return x, FeatureMeta(name, kind, vocab=m.vocab, shape=m.shape, stats=m.stats)


def encode_input(feat: Any, series: pd.Series, key: str, train_rows: np.ndarray, origin: DataOrigin) -> Encoded:
    """One input feature of a type other than number, binary, category and image, prepared
    (see the module's table), with its :class:`FeatureMeta`.

    Args:
        feat: the feature's config (``type``, ``preprocessing``); series: its column, every row;
        key: where errors point (``input_features[name]``); train_rows: the training split's
        row positions; origin: the dataset file, for the rows errors name.

    Raises:
        DataError: a cell that does not read as the type (a vector of the wrong length, an
            unparsable date, ...), naming the file, the column, the first rows and the fix.
        ValueError: a type without preparation (the schema prevents it).
    """
    if feat.type not in _INPUTS:
        raise ValueError(f"no preparation for input type {feat.type!r}")
    col = _Column(series.reset_index(drop=True), key, train_rows, origin)
    return _named(_INPUTS[feat.type](col, feat.preprocessing), feat.name, feat.type)


def encode_output(out: Any, series: pd.Series, key: str, train_rows: np.ndarray, origin: DataOrigin) -> Encoded:
    """One set or vector target, prepared: set (N, V) float32 multi-hot over the training
    split's tokens (no unknown index; a token outside it is dropped), vector (N, D) float32
    (``vector_size`` when given). Arguments and errors as :func:`encode_input`."""
    col = _Column(series.reset_index(drop=True), key, train_rows, origin)
    if out.type == "set":
        prep = getattr(out, "preprocessing", None) or SetPreprocessing()
        return _named(_counts(col, prep, distinct=True, unknown=False), out.name, "set")
    if out.type == "vector":
        return _named(_vector(col, None, getattr(out, "vector_size", None)), out.name, "vector")
    raise ValueError(f"no preparation for output type {out.type!r}")
