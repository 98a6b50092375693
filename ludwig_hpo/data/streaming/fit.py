"""Preprocessing fitted on a streamed training split in one pass: each batch becomes a small
:class:`BatchPartial` (counts of values with where each was first seen, row counts, the last
value), the partials are merged in dataset order, and the merged partial becomes the same
:class:`~ludwig_hpo.data.preprocess.FeatureMeta` that
:func:`~ludwig_hpo.data.preprocess.fit_input` / :func:`~ludwig_hpo.data.preprocess.fit_target`
fit on the whole column in memory.

What equals the in-memory fit on the same rows: vocabularies and their order (frequency ties in
first-seen order, as pandas' stable ``value_counts``), category classes, binary labels and fill
values, ``min``/``max`` and the quartiles (numpy's ``linear`` percentile of the counted values);
``mean`` and ``std`` are sums in another order (equal to about 1e-15 relative). A number
column's partial holds one count per distinct training value, so its driver-side size is the
number of distinct values (not of rows).

Number, binary and category features, and text inputs (their partial and fit:
:mod:`ludwig_hpo.data.streaming.text`); :mod:`ludwig_hpo.data.streaming.checks` refuses the
rest. Pure; :func:`batch_partial` runs wherever Ray Data maps a batch, :func:`merge` and
:func:`fitted_meta` in the driver.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.preprocessing import UNKNOWN_SYMBOL
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.categories import FittedBinary, _as_text, _label_of
from ludwig_hpo.data.missing import FilledValues, how_of
from ludwig_hpo.data.numbers import FittedNumber, parse_numbers
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.data.rows import features_of, preprocessing_of
from ludwig_hpo.data.streaming.number_counts import NumberCounts
from ludwig_hpo.data.streaming.splits import SplitRule, fold_codes, split_codes
from ludwig_hpo.data.streaming.text import TextPartial, text_meta, text_partial
from ludwig_hpo.errors import DataError


class FileOrigin(DataOrigin):
    """The file a streamed batch came from: a batch does not know where its rows sit in the
    file, so errors name the file and count the rows instead of numbering them."""

    def rows(self, positions: Any) -> str:
        n = 1 if isinstance(positions, int | np.integer) else len(positions)
        return f"{n} row{'s' if n != 1 else ''} of this file"


@dataclass
class Tally:
    """Counts of values and the position each was first seen at, in first-seen order.

    ``counts[value] = [count, first position]``; positions are rows of the whole stream once
    :meth:`merge` has added each batch's offset.
    """

    counts: dict[Any, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, values: np.ndarray | pd.Series, positions: np.ndarray) -> Tally:
        """The tally of present ``values`` (missing ones skipped) seen at ``positions``. Pure."""
        codes, uniques = pd.factorize(pd.Series(values), use_na_sentinel=True)
        keep = codes >= 0
        codes, pos = codes[keep], np.asarray(positions)[keep]
        counts = np.bincount(codes, minlength=len(uniques))
        _, first = np.unique(codes, return_index=True)
        keys = list(np.asarray(uniques, dtype=object).tolist() if len(uniques) else [])
        return cls({k: [int(c), int(pos[f])] for k, c, f in zip(keys, counts, first, strict=True)})

    def merge(self, other: Tally, offset: int) -> None:
        """Add ``other`` (a later batch, its positions shifted by ``offset``) to this tally."""
        for k, (c, first) in other.counts.items():
            mine = self.counts.get(k)
            if mine is None:
                self.counts[k] = [c, first + offset]
            else:
                mine[0] += c

    @property
    def empty(self) -> bool:
        return not self.counts

    def with_value(self, value: Any, count: int, first: int | None) -> Tally:
        """A copy with ``count`` more of ``value`` first seen at ``first`` (missing cells filled)."""
        out = Tally({k: list(v) for k, v in self.counts.items()})
        if count and first is not None:
            mine = out.counts.get(value)
            if mine is None:
                out.counts[value] = [count, first]
            else:
                mine[0] += count
                mine[1] = min(mine[1], first)
        return out

    def by_frequency(self) -> list[Any]:
        """Values by falling count, ties in first-seen order (pandas' ``value_counts``)."""
        ordered = sorted(self.counts.items(), key=lambda kv: kv[1][1])
        series = pd.Series([c for _, (c, _) in ordered], index=pd.Index([k for k, _ in ordered], dtype=object))
        return list(series.sort_values(ascending=False, kind="stable").index)

    def first_seen(self) -> list[Any]:
        """Values in first-seen order."""
        return [k for k, _ in sorted(self.counts.items(), key=lambda kv: kv[1][1])]


@dataclass
class ColumnPartial:
    """One feature's column in one batch (or merged over batches).

    Attributes:
        train: present values of training rows (a number's parsed floats, a category's text,
            a binary's cells as read).
        every: present values of every row (category and binary; empty for numbers).
        missing, train_missing: missing cells among every row and the training rows.
        first_missing, train_first_missing: where the first of them is (None: none).
        last: the training rows' last present value (None: none).
        numeric: every batch read the column as numbers (a binary's labels depend on it).
    """

    train: Tally | NumberCounts = field(default_factory=Tally)
    every: Tally = field(default_factory=Tally)
    missing: int = 0
    train_missing: int = 0
    first_missing: int | None = None
    train_first_missing: int | None = None
    last: Any = None
    numeric: bool = True

    def merge(self, other: ColumnPartial, offset: int) -> None:
        """Add ``other``, the partial of the next batch, whose rows start at ``offset``."""
        if isinstance(other.train, NumberCounts) and not isinstance(self.train, NumberCounts):
            self.train = NumberCounts()
        self.train.merge(other.train, offset)  # type: ignore[arg-type]
        self.every.merge(other.every, offset)
        if self.first_missing is None and other.first_missing is not None:
            self.first_missing = other.first_missing + offset
        if self.train_first_missing is None and other.train_first_missing is not None:
            self.train_first_missing = other.train_first_missing + offset
        self.missing += other.missing
        self.train_missing += other.train_missing
        if other.last is not None:
            self.last = other.last
        self.numeric = self.numeric and other.numeric


@dataclass
class BatchPartial:
    """What one batch tells the fit (or, merged, the whole stream): rows per split and fold,
    rows a ``drop_row`` strategy drops per feature, one :class:`ColumnPartial` per feature (a
    :class:`~ludwig_hpo.data.streaming.text.TextPartial` per text input)."""

    rows: int = 0
    split_rows: list[int] = field(default_factory=lambda: [0, 0, 0])
    fold_rows: list[int] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    columns: dict[str, ColumnPartial | TextPartial] = field(default_factory=dict)


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def require_columns(df: pd.DataFrame, cfg: SweepConfig, rule: SplitRule, origin: DataOrigin) -> None:
    """Refuse a batch without a column a feature (or the split) reads, naming the file and the column.

    Raises:
        DataError: at the first feature whose column is missing.
    """
    for section, feat in features_of(cfg):
        if feat.source_column not in df.columns:
            raise DataError(
                f"column {feat.source_column!r} is not in this file",
                source=origin.source,
                key=f"{section}[{feat.name}]",
                fix="give every file of the dataset the same columns",
            )
    if rule.column is not None and rule.column not in df.columns:
        raise DataError(
            f"split column {rule.column!r} is not in this file",
            source=origin.source,
            key="preprocessing.split.column",
            fix="give every file of the dataset the same columns",
        )


def drop_mask(df: pd.DataFrame, cfg: SweepConfig) -> tuple[np.ndarray, dict[str, int]]:
    """(N,) True for rows a ``missing_value_strategy: drop_row`` drops, and the missing cells per
    feature that drops any (counted before any row is dropped, as in memory). Pure."""
    drop = np.zeros(len(df), dtype=bool)
    counts: dict[str, int] = {}
    for section, feat in features_of(cfg):
        if getattr(preprocessing_of(feat, section), "missing_value_strategy", None) != "drop_row":
            continue
        missing = df[feat.source_column].isna().to_numpy()
        if missing.any():
            counts[feat.name] = int(missing.sum())
            drop |= missing
    return drop, counts


def _values(feat: Any, section: str, s: pd.Series, key: str, origin: DataOrigin) -> tuple[np.ndarray, np.ndarray]:
    """A column's cells as the fit counts them and its missing mask."""
    if feat.type == "number":
        raw = parse_numbers(s, key, origin)
        return raw, np.isnan(raw)
    if feat.type == "category":
        text = _as_text(s, preprocessing_of(feat, section))
        return text.to_numpy(object), text.isna().to_numpy()
    return s.to_numpy(object), s.isna().to_numpy()


def column_partial(
    feat: Any, section: str, s: pd.Series, train: np.ndarray, key: str, origin: DataOrigin
) -> ColumnPartial:
    """One feature's :class:`ColumnPartial` of a batch; ``train`` (N,) marks its training rows.

    Raises:
        DataError: a number cell that is not a number (see
            :func:`~ludwig_hpo.data.numbers.parse_numbers`).
    """
    values, missing = _values(feat, section, s, key, origin)
    pos = np.arange(len(s))
    present_train = train & ~missing
    out = ColumnPartial(
        train=(NumberCounts if feat.type == "number" else Tally).of(values[present_train], pos[present_train]),
        missing=int(missing.sum()),
        train_missing=int((train & missing).sum()),
        first_missing=_first(missing),
        train_first_missing=_first(train & missing),
        numeric=pd.api.types.is_numeric_dtype(s),
    )
    if feat.type != "number":
        out.every = Tally.of(values[~missing], pos[~missing])
    last = np.flatnonzero(present_train)
    if len(last):
        v = values[last[-1]]
        out.last = v.item() if hasattr(v, "item") else v
    return out


def batch_partial(df: pd.DataFrame, cfg: SweepConfig, rule: SplitRule, origin: DataOrigin) -> BatchPartial:
    """The :class:`BatchPartial` of one batch of raw rows (the dataset's columns). Pure; runs
    in a Ray Data task.

    Raises:
        DataError: a column missing from the file, a split column with other values, a number
            cell that is not a number; each names the file (``origin``) and the column.
    """
    require_columns(df, cfg, rule, origin)
    drop, dropped = drop_mask(df, cfg)
    if drop.any():
        df = df.iloc[np.flatnonzero(~drop)].reset_index(drop=True)
    codes = split_codes(df, rule, origin)
    out = BatchPartial(rows=len(df), split_rows=[int((codes == c).sum()) for c in range(3)], dropped=dropped)
    if rule.k:
        folds = fold_codes(df, rule, codes, origin)
        out.fold_rows = np.bincount(folds[folds >= 0], minlength=rule.k).tolist()
    train = codes == 0
    for section, feat in features_of(cfg):
        key = f"{section}[{feat.name}]"
        s = df[feat.source_column]
        if feat.type == "text":
            out.columns[feat.name] = text_partial(feat, s, train, key, origin)
        else:
            out.columns[feat.name] = column_partial(feat, section, s, train, key, origin)
    return out


def merge_into(total: BatchPartial, p: BatchPartial) -> None:
    """Add ``p``, the partial of the batch after those ``total`` holds (the driver's reduce)."""
    if not total.columns:
        total.columns = {name: type(col)() for name, col in p.columns.items()}
    for name, col in p.columns.items():
        total.columns[name].merge(col, total.rows)  # type: ignore[arg-type]
    for name, n in p.dropped.items():
        total.dropped[name] = total.dropped.get(name, 0) + n
    total.split_rows = [a + b for a, b in zip(total.split_rows, p.split_rows, strict=True)]
    if p.fold_rows:
        total.fold_rows = [a + b for a, b in zip(total.fold_rows or [0] * len(p.fold_rows), p.fold_rows, strict=True)]
    total.rows += p.rows


def merge(partials: Iterable[BatchPartial]) -> BatchPartial:
    """The partials of every batch, in dataset order, as one."""
    total = BatchPartial()
    for p in partials:
        merge_into(total, p)
    return total


# ---------------------------------------------------------------------------- numbers
def _refuse_empty(col: ColumnPartial, column: str, key: str, source: str | None) -> None:
    if col.train.empty:
        raise DataError(
            f"column {column!r}: every training value is missing", source=source, key=key, fix="drop this feature"
        )


def _number_meta(feat: Any, section: str, col: ColumnPartial, key: str, source: str | None) -> FeatureMeta:
    prep = preprocessing_of(feat, section)
    _refuse_empty(col, feat.source_column, key, source)
    strategy = prep.missing_value_strategy
    train = col.train
    assert isinstance(train, NumberCounts)
    fill: float | None = None
    if strategy == "fill_with_const":
        fill = float(prep.fill_value)
    elif strategy == "fill_with_mean":
        fill = train.mean()
    elif strategy == "fill_with_mode":
        fill = train.mode()
    filled = train.with_value(fill, col.train_missing, col.train_first_missing) if fill is not None else train
    # the value outliers take is the present training values' (their last kept value needs the
    # statistics first: a second pass, :mod:`ludwig_hpo.data.streaming.outliers`)
    outlier_fill = {
        "fill_with_const": lambda: float(prep.fill_value),
        "fill_with_mean": train.mean,
        "fill_with_mode": train.mode,
    }.get(prep.outlier_strategy or "", lambda: None)()
    fitted = FittedNumber(filled.statistics(), fill, outlier_fill, float(col.last))
    return FeatureMeta(feat.name, "number", stats=fitted.stats, fitted=fitted.record())


# ---------------------------------------------------------------------------- categories, binary
def _category_meta(feat: Any, section: str, col: ColumnPartial, key: str, source: str | None) -> FeatureMeta:
    prep = preprocessing_of(feat, section)
    strategy = prep.missing_value_strategy
    train = col.train
    assert isinstance(train, Tally)
    fill = (
        prep.fill_value
        if strategy == "fill_with_const"
        else (train.by_frequency()[0] if strategy == "fill_with_mode" and not train.empty else None)
    )
    fitted = {"fill": fill, "last": col.last}
    if section == "input_features":
        _refuse_empty(col, feat.source_column, key, source)
        counted = train.with_value(fill, col.train_missing, col.train_first_missing) if fill is not None else train
        kept = [v for v in counted.by_frequency() if v != UNKNOWN_SYMBOL][: prep.most_common]
        return FeatureMeta(feat.name, "category", vocab=(UNKNOWN_SYMBOL, *kept), fitted=fitted)
    classes = set(col.every.counts)
    if col.missing:
        if fill is None:
            raise DataError(
                f"column {feat.source_column!r}: {col.missing} rows have no target value",
                source=source,
                key=key,
                fix="drop or fill those rows",
            )
        classes.add(fill)
    ordered = tuple(sorted(classes, key=lambda v: (str(type(v)), v)))
    cap = prep.most_common
    if cap is not None and len(ordered) > cap:
        raise DataError(
            f"column {feat.source_column!r}: the target has {len(ordered)} classes, more than most_common {cap}",
            source=source,
            key=f"{key}.preprocessing.most_common",
            fix=f"remove most_common or set it to at least {len(ordered)}",
        )
    _refuse_single_class(len(ordered), feat.source_column, key, source)
    return FeatureMeta(feat.name, "category", vocab=ordered, fitted=fitted)


def _refuse_single_class(n: int, column: str, key: str, source: str | None) -> None:
    if n < 2:
        raise DataError(
            f"column {column!r}: the target has a single class",
            source=source,
            key=key,
            fix="use a column with at least 2 classes",
        )


def _binary_text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v).strip()


def _binary_meta(feat: Any, section: str, col: ColumnPartial, key: str, source: str | None) -> FeatureMeta:
    prep = preprocessing_of(feat, section)
    strategy = prep.missing_value_strategy
    distinct = col.every.first_seen()
    fill: Any = None
    if strategy in ("fill_with_false", "fill_with_true"):
        fill = _label_of(distinct, strategy == "fill_with_true", prep.fallback_true_label)
    elif strategy == "fill_with_const":
        fill = prep.fill_value
    elif strategy == "fill_with_mode" and isinstance(col.train, Tally) and not col.train.empty:
        fill = col.train.by_frequency()[0]
    stays_numeric = col.numeric and not (col.missing and isinstance(fill, str | bool))
    labels: tuple[str, ...] = ()
    if not stays_numeric:
        seen = [(first, _binary_text(v)) for v, (_, first) in col.every.counts.items()]
        if col.missing and col.first_missing is not None:
            seen.append((col.first_missing, _binary_text(fill)))
        labels = tuple(dict.fromkeys(text for _, text in sorted(seen, key=lambda p: p[0])))
    if section == "output_features":
        _refuse_single_class(len({_binary_text(v) for v in distinct}), feat.source_column, key, source)
    return FeatureMeta(feat.name, "binary", fitted=FittedBinary(fill, col.last, labels).record())


def fitted_meta(
    cfg: SweepConfig, total: BatchPartial, source: str | None, data_dir: Path | None = None
) -> dict[str, FeatureMeta]:
    """Every feature's :class:`FeatureMeta` from the merged partial of the whole stream (inputs,
    then outputs, as in memory). ``source`` (the dataset) is named in errors; ``data_dir`` is
    where a text input's relative ``vocab_file`` starts (None: the current folder). Runs in the
    driver.

    Raises:
        DataError: every training value of an input missing, a target with a single class or
            more classes than ``most_common``, missing target values; a text input's errors
            (:func:`~ludwig_hpo.data.streaming.text.text_meta`).
    """
    makers = {"number": _number_meta, "category": _category_meta, "binary": _binary_meta}
    out: dict[str, FeatureMeta] = {}
    for section, feat in features_of(cfg):
        col, key = total.columns[feat.name], f"{section}[{feat.name}]"
        if isinstance(col, TextPartial):
            out[feat.name] = text_meta(feat, col, key, source, data_dir)
        else:
            out[feat.name] = makers[feat.type](feat, section, col, key, source)
    return out


def filled_notes(
    cfg: SweepConfig, total: BatchPartial, meta: dict[str, FeatureMeta], outliers: dict[str, int] | None = None
) -> tuple[FilledValues, ...]:
    """What preparation does to missing values and to the ``outliers`` counted per feature
    (``PreparedData.filled``'s order: dropped rows, then inputs, then outputs). Pure."""
    outliers = outliers or {}
    notes = [
        FilledValues(feat.name, feat.source_column, total.dropped[feat.name], "dropped")
        for _, feat in features_of(cfg)
        if feat.name in total.dropped
    ]
    for section, feat in features_of(cfg):
        col, prep = total.columns[feat.name], preprocessing_of(feat, section)
        if isinstance(col, TextPartial):
            continue  # the in-memory text preparation lists no filled cells either
        strategy = prep.missing_value_strategy
        if col.missing and strategy != "drop_row":
            fill = meta[feat.name].fitted.get("fill")
            how = how_of(strategy)
            if feat.type != "number" and strategy == "fill_with_const" and fill == UNKNOWN_SYMBOL:
                how = "unknown category"
            notes.append(FilledValues(feat.name, feat.source_column, col.missing, how, fill))
        if outliers.get(feat.name):
            value = meta[feat.name].fitted.get("outlier_fill")
            how = how_of(prep.outlier_strategy)
            notes.append(FilledValues(feat.name, feat.source_column, outliers[feat.name], how, value, "outlier"))
    return tuple(notes)


def check_counts(cfg: SweepConfig, total: BatchPartial, meta: dict[str, FeatureMeta], source: str | None) -> None:
    """Refuse splits too small to train on or to score (the rules of
    :func:`~ludwig_hpo.data.rows.check_sizes`, from the counted rows). Pure.

    Raises:
        DataError: naming the split, its size and the fix.
    """
    workers = cfg.backend.num_workers
    first = meta[cfg.output_features[0].name]
    n_classes = len(first.vocab) if first.type == "category" else (2 if first.type == "binary" else 1)
    need = {"train": 2 * workers, "validation": max(2, n_classes), "test": max(2, n_classes)}
    for (name, minimum), rows in zip(need.items(), total.split_rows, strict=True):
        if rows < minimum:
            raise DataError(
                f"the {name} split has {rows} rows, too few to train on or to score (at least {minimum})",
                source=source,
                key="preprocessing.split",
                fix=f"use more rows or a larger {name} fraction",
            )
    if cfg.kfold is not None and total.fold_rows and min(total.fold_rows) < max(2, n_classes):
        raise DataError(
            f"a fold of {cfg.kfold.k} holds {min(total.fold_rows)} rows, too few to score {n_classes} classes",
            source=source,
            key="kfold.k",
            fix="lower kfold.k",
        )
