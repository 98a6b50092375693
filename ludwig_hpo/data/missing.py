"""Missing values, as Ludwig's ``missing_value_strategy`` handles them, with the fill values
computed on the training split; and the record of what was done (:class:`FilledValues`), which
``hpo validate`` and ``hpo sweep`` print. Runs in the driver, once per sweep.

``drop_row`` is not here: the rows are dropped before the split
(:func:`ludwig_hpo.data.preprocess.prepare`), from every feature at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

#: How missing values (or outliers) were handled, as :class:`FilledValues` says it.
How = Literal[
    "training mean",
    "training mode",
    "constant",
    "unknown category",
    "false",
    "true",
    "next value",
    "previous value",
    "dropped",
]

_STRATEGY_HOW: dict[str, How] = {
    "fill_with_mean": "training mean",
    "fill_with_mode": "training mode",
    "fill_with_const": "constant",
    "fill_with_false": "false",
    "fill_with_true": "true",
    "bfill": "next value",
    "ffill": "previous value",
    "drop_row": "dropped",
}


@dataclass(frozen=True)
class FilledValues:
    """Missing values (or outliers) of one feature that preparation filled in or whose rows it
    dropped (nothing is silent).

    Attributes:
        feature: the feature's name; column: the dataset column it reads.
        count: how many rows had no value (of every split), or how many rows were dropped.
        how: the strategy, in words: ``"training mean"`` / ``"training mode"`` (of the
            training split's values), ``"constant"`` (``fill_value``), ``"unknown category"``
            (a category's index 0), ``"false"`` / ``"true"`` (a binary feature's label),
            ``"next value"`` (``bfill``) / ``"previous value"`` (``ffill``), ``"dropped"``.
        value: the value filled in (mean, mode, constant, label), None otherwise.
        what: ``"missing"`` values or ``"outlier"`` values (beyond ``outlier_threshold``).
    """

    feature: str
    column: str
    count: int
    how: How
    value: Any = None
    what: Literal["missing", "outlier"] = "missing"

    def text(self) -> str:
        """One line for a person, e.g. ``3 missing values in x2 filled with the training mean (0.41)``."""
        kind = "missing values" if self.what == "missing" else "outliers"
        if self.how == "dropped":
            why = "no value" if self.what == "missing" else "an outlier"
            return f"{self.count} rows dropped: {why} in {self.column} (drop_row)"
        head = f"{self.count} {kind} in {self.column}"
        if self.how == "unknown category":
            return f"{head} read as the unknown category"
        if self.how in ("next value", "previous value"):
            return f"{head} filled with the {self.how} in the column"
        shown = f"{self.value:.4g}" if isinstance(self.value, float) else repr(self.value)
        if self.how in ("training mean", "training mode"):
            return f"{head} filled with the {self.how} ({shown})"
        if self.how in ("false", "true"):
            return f"{head} filled with {self.how} ({shown})"
        return f"{head} filled with {shown}"


def how_of(strategy: str) -> How:
    """The :class:`FilledValues` wording of a ``missing_value_strategy`` / ``outlier_strategy``."""
    return _STRATEGY_HOW[strategy]


def training_mode(s: pd.Series, train: np.ndarray) -> Any:
    """The most frequent present value of ``s`` among the training rows (the first seen on a
    tie), or None when none is present."""
    counts = s.iloc[train].dropna().value_counts()
    return None if counts.empty else counts.index[0]


def fill_from_neighbours(s: pd.Series, strategy: str) -> pd.Series:
    """``bfill`` (the next present value) or else ``ffill`` (the previous one), in dataset order;
    the values still missing at the column's end (start) then take the other direction, as
    Ludwig does."""
    if strategy == "bfill":
        return s.bfill().ffill()
    return s.ffill().bfill()


def fill_missing(s: pd.Series, strategy: str, value: Any) -> pd.Series:
    """``s`` with its missing values filled: from the neighbouring rows (``bfill`` / ``ffill``)
    or with ``value`` (the constant, training mean / mode or label the caller computed). Pure."""
    if strategy in ("bfill", "ffill"):
        return fill_from_neighbours(s, strategy)
    if pd.api.types.is_numeric_dtype(s) and not isinstance(value, str | bool):
        return s.fillna(value)
    # an object column takes a value of any type (a text column a boolean fill_value)
    return s.astype(object).where(s.notna(), value)
