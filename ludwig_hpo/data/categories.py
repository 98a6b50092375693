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


def category_fill(s: pd.Series, prep: CategoryPreprocessing, train: np.ndarray) -> Any:
    """The value a category column's missing cells take, from its ``train`` rows (constant,
    training mode; None for ``bfill`` / ``ffill`` / ``drop_row``), as text. Pure."""
    return _category_fill(_as_text(s, prep), prep, train)


def _as_text(s: pd.Series, prep: CategoryPreprocessing) -> pd.Series:
    values = s.astype(str).where(s.notna(), None)
    return values.str.lower() if prep.lowercase else values


def category_values(
    s: pd.Series,
    prep: CategoryPreprocessing,
    name: str,
    train: np.ndarray | None,
    *,
    fill: Any = None,
    before: Any = None,
) -> PreparedColumn:
    """The column as strings with missing values filled (``PreparedColumn.values`` an object
    array; no vocabulary yet), for inputs and outputs alike. The fill value is the ``train``
    rows' (:func:`category_fill`), or ``fill`` when ``train`` is None (a fitted model's new
    rows, where ``bfill`` / ``ffill`` start from ``before``, the training split's last value)."""
    values = _as_text(s, prep)
    out = PreparedColumn(values.to_numpy(object))
    strategy = prep.missing_value_strategy
    if values.isna().any() and strategy != "drop_row":
        value = _category_fill(values, prep, train) if train is not None else fill
        if strategy in ("bfill", "ffill") and train is None and before is not None:
            filled, note = _fill(pd.concat([pd.Series([before]), values], ignore_index=True), strategy, value, name)
            filled = filled.iloc[1:].reset_index(drop=True)
            note = FilledValues(note.feature, str(s.name), int(values.isna().sum()), note.how, note.value)
        else:
            filled, note = _fill(values, strategy, value, name)
        out.values, out.filled = filled.to_numpy(object), [note]
    return out


def last_present(s: pd.Series, prep: CategoryPreprocessing, train: np.ndarray) -> Any:
    """The ``train`` rows' last present value as text (where ``bfill`` / ``ffill`` of new
    rows start), None when none is. Pure."""
    present = _as_text(s, prep).iloc[train].dropna()
    return None if present.empty else present.iloc[-1]


def fit_category_input(
    s: pd.Series, prep: CategoryPreprocessing, key: str, train: np.ndarray, origin: DataOrigin
) -> PreparedColumn:
    """The vocabulary of a category input (``PreparedColumn.vocab``): ``<UNK>`` then the
    training split's values by falling frequency, at most ``most_common`` of them. Pure.

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
    out = category_values(s, prep, "", train)
    values = pd.Series(out.values).where(pd.notna(out.values), UNKNOWN)
    counts = values.iloc[train].value_counts()
    kept = [v for v in counts.index if v != UNKNOWN][: prep.most_common]
    return PreparedColumn(np.zeros(0, np.int64), (UNKNOWN, *kept))


def apply_category_input(
    s: pd.Series, prep: CategoryPreprocessing, name: str, vocab: tuple[Any, ...], fill: Any, before: Any = None
) -> PreparedColumn:
    """A category input as (N,) int64 ids of a fitted ``vocab`` (missing cells take
    ``fill``; rarer, unseen and missing-as-``<UNK>`` values are 0). Pure; new rows
    (``before``: see :func:`category_values`) cost nothing per training row."""
    out = category_values(s, prep, name, None, fill=fill, before=before)
    values = pd.Series(out.values).where(pd.notna(out.values), UNKNOWN)
    lookup = {v: i for i, v in enumerate(vocab)}
    out.values = values.map(lookup).fillna(0).to_numpy(np.int64)
    out.vocab = tuple(vocab)
    return out


def prepare_category_input(
    s: pd.Series, prep: CategoryPreprocessing, name: str, key: str, train: np.ndarray, origin: DataOrigin
) -> PreparedColumn:
    """A category input as (N,) int64 ids: :func:`fit_category_input` on the ``train`` rows,
    then :func:`apply_category_input` to every row; missing values follow
    ``missing_value_strategy``.

    Raises:
        DataError: every training value is missing.
    """
    vocab = fit_category_input(s, prep, key, train, origin).vocab
    return apply_category_input(s, prep, name, vocab, category_fill(s, prep, train))


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


@dataclass(frozen=True)
class FittedBinary:
    """What a binary column keeps of the rows it was fitted on (JSON-serialisable, saved as
    ``FeatureMeta.fitted``): ``fill`` the value missing cells take (a label, the constant or
    the training mode; None for ``bfill`` / ``ffill``), ``last`` the training split's last
    present value (where ``bfill`` / ``ffill`` of new rows start), ``labels`` the column's
    distinct values as text in first-seen order (empty for a numeric or boolean column)."""

    fill: Any
    last: Any
    labels: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The JSON record :meth:`of_record` reads back."""
        return {"fill": _plain(self.fill), "last": _plain(self.last), "labels": list(self.labels)}

    @classmethod
    def of_record(cls, record: dict[str, Any]) -> FittedBinary:
        """The fitted column saved as :meth:`record`."""
        return cls(record["fill"], record["last"], tuple(record["labels"]))


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _binary_text(s: pd.Series) -> pd.Series:
    return s.map(lambda v: str(v).strip() if not isinstance(v, bool) else str(v).lower())


def _is_number_column(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _binary_fill(s: pd.Series, prep: BinaryPreprocessing, train: np.ndarray) -> Any:
    strategy = prep.missing_value_strategy
    if strategy in ("fill_with_false", "fill_with_true"):
        return _label_of(list(s.dropna().unique()), strategy == "fill_with_true", prep.fallback_true_label)
    if strategy == "fill_with_const":
        return prep.fill_value
    if strategy == "fill_with_mode":
        return training_mode(s, train)
    return None


def fit_binary(s: pd.Series, prep: BinaryPreprocessing, train: np.ndarray) -> FittedBinary:
    """A binary column's fill value and labels, from its ``train`` rows (the mode) and its
    distinct values (the label ``fill_with_false`` / ``fill_with_true`` fill in, Ludwig's
    choice among every row's). Pure."""
    fill = _binary_fill(s, prep, train)
    present = s.iloc[train].dropna()
    last = present.iloc[-1] if len(present) else None
    if s.isna().any() and prep.missing_value_strategy != "drop_row":
        s = fill_missing(s, prep.missing_value_strategy, fill)
    # a numeric or boolean column reads without its labels (they name no class)
    labels = () if pd.api.types.is_numeric_dtype(s) else tuple(dict.fromkeys(_binary_text(s)))
    return FittedBinary(fill, last, labels)


def apply_binary(
    s: pd.Series,
    prep: BinaryPreprocessing,
    fitted: FittedBinary,
    name: str,
    key: str,
    origin: DataOrigin,
    *,
    alone: bool = False,
) -> PreparedColumn:
    """``s`` as (N,) float32 of 0 and 1 with a fitted column's fill value and labels (see
    :func:`prepare_binary`). ``alone``: ``s`` holds new rows only (a served model's): its
    ``bfill`` / ``ffill`` start from ``fitted.last``, and its labels count with the fitted
    ones. Pure.

    Raises:
        DataError: more than two distinct values (with the fitted labels).
    """
    out = PreparedColumn(np.zeros(0))
    missing = s.isna()
    strategy = prep.missing_value_strategy
    if missing.any() and strategy != "drop_row":
        if alone and strategy in ("bfill", "ffill") and fitted.last is not None:
            both = pd.concat([pd.Series([fitted.last]), s], ignore_index=True).rename(s.name)
            filled, note = _fill(both, strategy, fitted.fill, name)
            s = filled.iloc[1:].reset_index(drop=True)
            note = FilledValues(note.feature, note.column, int(missing.sum()), note.how, note.value)
        else:
            s, note = _fill(s, strategy, fitted.fill, name)
        out.filled.append(note)
    if _is_number_column(s):
        out.values = (s.to_numpy(np.float64) != 0).astype(np.float32)
        return out
    text = _binary_text(s)
    seen = list(dict.fromkeys([*fitted.labels, *text]))
    uniq = sorted(seen)
    if len(uniq) > 2 and not all(_is_word(v) for v in uniq):
        third = np.flatnonzero(~text.isin(seen[:2]).to_numpy())[0]
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


def prepare_binary(
    s: pd.Series, prep: BinaryPreprocessing, name: str, key: str, train: np.ndarray, origin: DataOrigin
) -> PreparedColumn:
    """A binary column as (N,) float32 of 0 and 1 (inputs and targets): :func:`fit_binary`
    on the column, then :func:`apply_binary` to every row.

    A numeric column is true where non-zero. Text is read as Ludwig reads it: boolean words
    (true/false, yes/no, y/n, t/f, 1/0, case and surrounding spaces ignored); two other labels
    read as true when equal to ``fallback_true_label`` (default: the first in sorted order).
    Missing values follow ``missing_value_strategy`` first (``fill_with_false`` by default).

    Raises:
        DataError: more than two distinct values.
    """
    return apply_binary(s, prep, fit_binary(s, prep, train), name, key, origin)
