"""Category and binary features, with Ludwig's preprocessing: missing values, the vocabulary
(``most_common`` most frequent training values; index 0 is ``<UNK>``), ``lowercase``, and
Ludwig's reading of boolean words (``fallback_true_label``). Runs in the driver, once per sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.preprocessing import UNKNOWN_SYMBOL, BinaryPreprocessing, CategoryPreprocessing
from ludwig_hpo.data.missing import FilledValues, fill_missing, how_of, training_mode
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.errors import DataError

UNKNOWN = UNKNOWN_SYMBOL
#: Ludwig's boolean words (``strings_utils``), compared lower-cased.
TRUE_WORDS = frozenset({"yes", "y", "true", "t", "1", "1.0"})
FALSE_WORDS = frozenset({"no", "n", "false", "f", "0", "0.0", "-1", "-1.0"})


@dataclass
class PreparedColumn:
    """One prepared column: ``values`` (category ids (N,) int64 or binary (N,) float32),
    ``vocab`` (category: index -> value), ``filled``: what was done to missing values."""

    values: np.ndarray
    vocab: tuple[Any, ...] = ()
    filled: list[FilledValues] = field(default_factory=list)


def _fill(s: pd.Series, strategy: str, value: Any, name: str, how_value: Any = None) -> tuple[pd.Series, FilledValues]:
    missing = int(s.isna().sum())
    how = how_of(strategy)
    if strategy == "fill_with_const" and value == UNKNOWN:
        how = "unknown category"
    filled = fill_missing(s, strategy, value)
    return filled, FilledValues(name, str(s.name), missing, how, value if how_value is None else how_value)


def _category_fill(s: pd.Series, prep: CategoryPreprocessing, train: np.ndarray) -> Any:
    if prep.missing_value_strategy == "fill_with_const":
        return prep.fill_value
    if prep.missing_value_strategy == "fill_with_mode":
        return training_mode(s, train)
    return None


def category_values(s: pd.Series, prep: CategoryPreprocessing, name: str, train: np.ndarray) -> PreparedColumn:
    """The column as strings with missing values filled (``PreparedColumn.values`` an object
    array; no vocabulary yet), for inputs and outputs alike."""
    values = s.astype(str).where(s.notna(), None)
    if prep.lowercase:
        values = values.str.lower()
    out = PreparedColumn(values.to_numpy(object))
    if values.isna().any() and prep.missing_value_strategy != "drop_row":
        filled, note = _fill(values, prep.missing_value_strategy, _category_fill(values, prep, train), name)
        out.values, out.filled = filled.to_numpy(object), [note]
    return out


def prepare_category_input(
    s: pd.Series, prep: CategoryPreprocessing, name: str, key: str, train: np.ndarray, origin: DataOrigin
) -> PreparedColumn:
    """A category input as (N,) int64 ids: the vocabulary is ``<UNK>`` then the training
    split's values by falling frequency, at most ``most_common`` of them; missing values follow
    ``missing_value_strategy``; rarer, unseen and missing-as-``<UNK>`` values are 0.

    Raises:
        DataError: every training value is missing.
    """
    if s.iloc[train].isna().all():
        raise DataError(
            f"column {s.name!r}: every training value is missing",
            source=origin.source,
            key=key,
            fix="drop this feature",
        )
    out = category_values(s, prep, name, train)
    values = pd.Series(out.values).where(pd.notna(out.values), UNKNOWN)
    counts = values.iloc[train].value_counts()
    kept = [v for v in counts.index if v != UNKNOWN][: prep.most_common]
    vocab = (UNKNOWN, *kept)
    lookup = {v: i for i, v in enumerate(vocab)}
    out.values = values.map(lookup).fillna(0).to_numpy(np.int64)
    out.vocab = vocab
    return out


def _is_word(v: str) -> bool:
    return v.lower() in TRUE_WORDS or v.lower() in FALSE_WORDS


def _label_of(distinct: list[Any], wanted: bool, fallback: str | None) -> Any:
    """Ludwig's choice of the label that reads as ``wanted`` (for ``fill_with_false`` /
    ``fill_with_true``): the first such value in reverse sorted order; else the boolean."""
    for v in sorted(distinct, key=str, reverse=True):
        if _to_bool(str(v).strip(), fallback if fallback is not None else "true") is wanted:
            return v
    return wanted


def _to_bool(v: str, fallback: str | None) -> bool:
    low = v.lower()
    if low in TRUE_WORDS:
        return True
    if low in FALSE_WORDS:
        return False
    return v == fallback


def prepare_binary(
    s: pd.Series, prep: BinaryPreprocessing, name: str, key: str, train: np.ndarray, origin: DataOrigin
) -> PreparedColumn:
    """A binary column as (N,) float32 of 0 and 1 (inputs and targets).

    A numeric column is true where non-zero. Text is read as Ludwig reads it: boolean words
    (true/false, yes/no, y/n, t/f, 1/0, case and surrounding spaces ignored); two other labels
    read as true when equal to ``fallback_true_label`` (default: the first in sorted order).
    Missing values follow ``missing_value_strategy`` first (``fill_with_false`` by default).

    Raises:
        DataError: more than two distinct values.
    """
    out = PreparedColumn(np.zeros(0))
    missing = s.isna()
    strategy = prep.missing_value_strategy
    if missing.any() and strategy != "drop_row":
        distinct = list(s.dropna().unique())
        if strategy in ("fill_with_false", "fill_with_true"):
            label = _label_of(distinct, strategy == "fill_with_true", prep.fallback_true_label)
            value: Any = label
        elif strategy == "fill_with_const":
            value = prep.fill_value
        elif strategy == "fill_with_mode":
            value = training_mode(s, train)
        else:
            value = None
        s, note = _fill(s, strategy, value, name)
        out.filled.append(note)
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        out.values = (s.to_numpy(np.float64) != 0).astype(np.float32)
        return out
    text = s.map(lambda v: str(v).strip() if not isinstance(v, bool) else str(v).lower())
    uniq = sorted(set(text))
    if len(uniq) > 2 and not all(_is_word(v) for v in uniq):
        first_two = list(dict.fromkeys(text))[:2]
        third = np.flatnonzero(~text.isin(first_two).to_numpy())[0]
        raise DataError(
            f"column {s.name!r}: a binary column needs 2 distinct values, but has {len(uniq)}: {uniq[:5]} "
            f"({origin.rows(third)} holds {s.iloc[third]!r})",
            source=origin.source,
            key=key,
            fix="use type: category for more than two classes",
        )
    if all(_is_word(v) for v in uniq):
        fallback = prep.fallback_true_label
    else:
        fallback = prep.fallback_true_label if prep.fallback_true_label is not None else uniq[0]
    out.values = np.fromiter((_to_bool(v, fallback) for v in text), dtype=np.float32, count=len(text))
    return out
