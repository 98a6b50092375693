"""Preprocessing with Ludwig's semantics, fitted on the training split only, applied to every
row once per sweep.

The order is Ludwig's: the rows are sampled (``sample_ratio`` / ``sample_size``), rows a
``drop_row`` strategy drops are dropped from every feature, the rest are split; each feature
is then prepared with statistics of the training split (missing values, outliers,
normalization, vocabularies); last, the training split of a binary target is rebalanced
(``oversample_minority`` / ``undersample_majority``).

The result, :class:`PreparedData`, is numpy arrays plus the metadata the model needs; it
goes to the Ray object store once and every trial (and every DDP rank) reads it from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.categories import (
    UNKNOWN,
    FittedBinary,
    apply_binary,
    apply_category_input,
    category_fill,
    category_values,
    fit_binary,
    fit_category_input,
    last_present,
)
from ludwig_hpo.data.images import prepare_images
from ludwig_hpo.data.missing import FilledValues
from ludwig_hpo.data.numbers import FLOAT32_MAX, FittedNumber, apply_number
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.rows import (
    check_sizes,
    column_of,
    global_preprocessing,
    keep_splits,
    missing_drops,
    outlier_drops,
    preprocessing_of,
    split_rows,
)
from ludwig_hpo.data.sampling import balance_training_rows, sample_rows
from ludwig_hpo.data.split import kfold_indices
from ludwig_hpo.errors import DataError

__all__ = ["FLOAT32_MAX", "UNKNOWN", "FeatureMeta", "FilledValues", "PreparedData", "prepare"]


@dataclass(frozen=True)
class FeatureMeta:
    """What the model needs to know about one feature.

    Attributes:
        name, type: as in the sweep file.
        vocab: category input: index -> value (index 0 is the unknown value); category
            output: class index -> class value.
        shape: image: (channels, height, width).
        stats: number: ``{"mean", "std", "min", "max", "q1", "q2", "q3"}`` of the training
            split (after missing values are filled, before normalization); image:
            ``{"scale", "imagenet1k"}`` (see :func:`~ludwig_hpo.data.images.prepare_images`).
        fitted: number, binary, category: the rest of what was fitted on the training split
            that :func:`apply_input` / :func:`apply_target` apply to new rows, JSON values
            (:class:`~ludwig_hpo.data.numbers.FittedNumber`,
            :class:`~ludwig_hpo.data.categories.FittedBinary`, a category's ``{"fill", "last"}``);
            empty for other types.
    """

    name: str
    type: str
    vocab: tuple[Any, ...] = ()
    shape: tuple[int, ...] = ()
    stats: dict[str, float] = field(default_factory=dict)
    fitted: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedData:
    """Every row kept, encoded, with the sweep's splits.

    Attributes:
        inputs: per input feature: number/binary (N, 1) float32, category (N,) int64,
            image (N, C, H, W) pixels as read, uint8 or float32 (other types: :mod:`ludwig_hpo.data.feature_types`).
        targets: per output feature: category (N,) int64, binary (N,) float32, number (N,) float32;
            an llm config's text output (N, L) int64 labels of its input's ids, -100 at the prompt
            and padding (:mod:`ludwig_hpo.data.llm`).
        splits: ``{"train", "validation", "test"}`` -> sorted row indices; an oversampled
            training row appears more than once.
        folds: k-fold (train, held-out) row indices over train+validation (empty without k-fold).
        meta: per feature name, see :class:`FeatureMeta`.
        filled: what preparation did to missing values and outliers, per feature that had
            any (what ``hpo validate`` and ``hpo sweep`` print).
    """

    inputs: dict[str, np.ndarray]
    targets: dict[str, np.ndarray]
    splits: dict[str, np.ndarray]
    folds: tuple[tuple[np.ndarray, np.ndarray], ...]
    meta: dict[str, FeatureMeta]
    filled: tuple[FilledValues, ...] = ()

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.targets.values())))


def _rows(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask)


def _refuse_missing(s: pd.Series, key: str, origin: DataOrigin, what: str, fix: str) -> None:
    """Refuse a column with missing values, naming the file, the column and the first rows.

    ``what`` follows the count (``"rows have no target value"``), ``fix`` is the one-line remedy.
    Runs in the driver process. Raises DataError when any value of ``s`` is missing.
    """
    missing = s.isna().to_numpy()
    if missing.any():
        raise DataError(
            f"column {s.name!r}: {int(missing.sum())} {what} ({origin.rows(_rows(missing))})",
            source=origin.source,
            key=key,
            fix=fix,
        )


def _image(
    s: pd.Series,
    key: str,
    train: np.ndarray,
    feat: Any,
    data_dir: Path | None,
    origin: DataOrigin,
    scale: float | None = None,
) -> tuple[np.ndarray, dict[str, float], list[FilledValues]]:
    return prepare_images(
        s,
        key=key,
        train=train,
        prep=feat.preprocessing,
        column=feat.source_column,
        data_dir=data_dir,
        origin=origin,
        scale=scale,
        name=feat.name,
    )


def _subset(df: pd.DataFrame, origin: DataOrigin, positions: np.ndarray) -> tuple[pd.DataFrame, DataOrigin]:
    return df.iloc[positions].reset_index(drop=True), origin.subset(positions)


def _stratify_labels(df: pd.DataFrame, cfg: SweepConfig, origin: DataOrigin) -> np.ndarray | None:
    """The first output's classes (a category or binary target), which ``dataset.split`` and
    k-fold stratify on; None for other targets.

    Raises:
        DataError: the target has a single class.
    """
    first = cfg.output_features[0]
    if first.type not in ("category", "binary"):
        return None
    col = column_of(df, first, "output_features", origin)
    labels = pd.factorize(col.astype(str).where(col.notna(), None))[0]
    if len(np.unique(labels[labels >= 0])) < 2:
        raise DataError(
            f"column {col.name!r}: the target has a single class; there is nothing to learn",
            source=origin.source,
            key=f"output_features[{first.name}]",
            fix="use a column with at least 2 classes",
        )
    return labels


def _encode_inputs(
    df: pd.DataFrame, cfg: SweepConfig, train: np.ndarray, data_dir: Path | None, origin: DataOrigin
) -> tuple[dict[str, np.ndarray], dict[str, FeatureMeta], list[FilledValues]]:
    inputs: dict[str, np.ndarray] = {}
    meta: dict[str, FeatureMeta] = {}
    filled: list[FilledValues] = []
    for feat in cfg.input_features:
        key = f"input_features[{feat.name}]"
        s = column_of(df, feat, "input_features", origin)
        inputs[feat.name], meta[feat.name], notes = prepare_input(feat, s, key, train, data_dir, origin)
        filled += notes
    return inputs, meta, filled


def prepare_input(
    feat: Any,
    s: pd.Series,
    key: str,
    train: np.ndarray,
    data_dir: Path | None,
    origin: DataOrigin,
) -> tuple[np.ndarray, FeatureMeta, list[FilledValues]]:
    """One input feature's column prepared with statistics of the ``train`` rows: its array
    (see :class:`PreparedData`), its :class:`FeatureMeta` and what was filled.

    The one preparation of an input, for a sweep (:func:`prepare`) and for a served model's
    new rows (:mod:`ludwig_hpo.model.raw_rows`, which passes the training rows first; an
    image's pixels are scaled inside the model). Runs in the driver or the serving process.

    Raises:
        DataError: a cell that does not read as the feature's type (see :func:`prepare`).
    """
    if feat.type in FITTED_TYPES:
        meta = fit_input(feat, s, key, train, origin)
        x, filled = apply_input(feat, s, meta, key, origin)
        return x, meta, filled
    if feat.type == "image":
        x, stats, filled = _image(s, key, train, feat, data_dir, origin)
        return x, FeatureMeta(feat.name, "image", shape=tuple(x.shape[1:]), stats=stats), filled
    if feat.type == "text":
        from ludwig_hpo.data.text import encode_text

        x, m = encode_text(feat, s, key, train, origin, data_dir)
        return x, m, []
    # set, bag, sequence, timeseries, vector, date, h3
    from ludwig_hpo.data.feature_types import encode_input

    x, m = encode_input(feat, s, key, train, origin)
    return x, m, []


#: The types whose preparation is a fit on the training rows (:func:`fit_input`, a
#: :class:`FeatureMeta`) and an apply to any rows (:func:`apply_input`, :func:`apply_target`):
#: one code path for a sweep and a served model, whose cost per row does not depend on the
#: training split's size. Other types are prepared by fitting and applying in one call.
FITTED_TYPES = frozenset({"number", "binary", "category"})


def fit_input(feat: Any, s: pd.Series, key: str, train: np.ndarray, origin: DataOrigin) -> FeatureMeta:
    """The statistics of a number, binary or category input's ``train`` rows, as its
    :class:`FeatureMeta` (``stats`` / ``vocab`` and ``fitted``). Runs in the driver.

    Raises:
        DataError: a cell that does not read as the feature's type, every training value missing.
    """
    prep = preprocessing_of(feat, "input_features")
    if feat.type == "number":
        from ludwig_hpo.data.numbers import fit_number

        num = fit_number(s, prep, key, train, origin)
        return FeatureMeta(feat.name, "number", stats=num.stats, fitted=num.record())
    if feat.type == "binary":
        return FeatureMeta(feat.name, "binary", fitted=fit_binary(s, prep, train).record())
    vocab = fit_category_input(s, prep, key, train, origin).vocab
    fitted = {"fill": category_fill(s, prep, train), "last": last_present(s, prep, train)}
    return FeatureMeta(feat.name, "category", vocab=vocab, fitted=fitted)


def apply_input(
    feat: Any, s: pd.Series, meta: FeatureMeta, key: str, origin: DataOrigin, *, alone: bool = False
) -> tuple[np.ndarray, list[FilledValues]]:
    """A number, binary or category input's cells prepared with its fitted ``meta``
    (:func:`fit_input`): its array (see :class:`PreparedData`) and what was filled.
    ``alone``: ``s`` holds new rows only (a served model's): ``bfill`` / ``ffill`` start from
    the training split's last value instead of reaching into rows it does not have. Pure; runs
    in the driver or the serving process.

    Raises:
        DataError: a cell that does not read as the feature's type (text in a number column,
            a third binary label, ``log1p`` of a value <= 0).
    """
    prep = preprocessing_of(feat, "input_features")
    if feat.type == "number":
        fitted = FittedNumber.of_record(meta.stats, meta.fitted)
        num = apply_number(s, prep, fitted, feat.name, key, origin, alone=alone)
        return num.values[:, None], num.filled
    if feat.type == "binary":
        col = apply_binary(s, prep, FittedBinary.of_record(meta.fitted), feat.name, key, origin, alone=alone)
        return col.values[:, None], col.filled
    before = meta.fitted.get("last") if alone else None
    col = apply_category_input(s, prep, feat.name, meta.vocab, meta.fitted.get("fill"), before)
    return col.values, col.filled


def _encode_targets(
    df: pd.DataFrame, cfg: SweepConfig, train: np.ndarray, origin: DataOrigin
) -> tuple[dict[str, np.ndarray], dict[str, FeatureMeta], list[FilledValues]]:
    targets: dict[str, np.ndarray] = {}
    meta: dict[str, FeatureMeta] = {}
    filled: list[FilledValues] = []
    for out in cfg.output_features:
        key = f"output_features[{out.name}]"
        s = column_of(df, out, "output_features", origin)
        targets[out.name], meta[out.name], notes = prepare_target(out, s, key, train, origin)
        filled += notes
    return targets, meta, filled


def prepare_target(
    out: Any,
    s: pd.Series,
    key: str,
    train: np.ndarray,
    origin: DataOrigin,
    *,
    classes: tuple[Any, ...] | None = None,
) -> tuple[np.ndarray, FeatureMeta, list[FilledValues]]:
    """One output feature's column as targets (see :class:`PreparedData`), its
    :class:`FeatureMeta` and what was filled; statistics from the ``train`` rows.

    The one preparation of a target, for a sweep (:func:`prepare`) and for a served model's
    labelled rows (``hpo evaluate``), which passes a category target's fitted ``classes``:
    a value outside them is an error, not a new class. Runs in the driver or the serving process.

    Raises:
        DataError: missing target values, a target with a single class or more than
            ``most_common`` classes, a value outside ``classes``.
    """
    if out.type in FITTED_TYPES:
        meta = fit_target(out, s, key, train, origin)
        if classes is not None:
            meta = FeatureMeta(meta.name, meta.type, vocab=classes, fitted=meta.fitted)
        x, filled = apply_target(out, s, meta, key, origin)
        return x, meta, filled
    # set, vector
    from ludwig_hpo.data.feature_types import encode_output

    _require_targets(s, key, origin)
    x, m = encode_output(out, s, key, train, origin)
    return x, m, []


def fit_target(out: Any, s: pd.Series, key: str, train: np.ndarray, origin: DataOrigin) -> FeatureMeta:
    """The statistics of a number, binary or category target's ``train`` rows (a category's
    classes: every row's labels, sorted), as its :class:`FeatureMeta`. Runs in the driver.

    Raises:
        DataError: missing target values, a single class, more than ``most_common`` classes.
    """
    prep = preprocessing_of(out, "output_features")
    if out.type == "number":
        from ludwig_hpo.data.numbers import fit_number

        num = fit_number(s, prep, key, train, origin)
        return FeatureMeta(out.name, "number", stats=num.stats, fitted=num.record())
    if out.type == "binary":
        return FeatureMeta(out.name, "binary", fitted=fit_binary(s, prep, train).record())
    fitted = {"fill": category_fill(s, prep, train), "last": last_present(s, prep, train)}
    values = pd.Series(category_values(s, prep, out.name, train).values, name=s.name)
    _require_targets(values, key, origin)
    classes = tuple(sorted(values.unique(), key=lambda v: (str(type(v)), v)))
    cap = prep.most_common
    if cap is not None and len(classes) > cap:
        raise DataError(
            f"column {s.name!r}: the target has {len(classes)} classes, more than most_common {cap}; "
            "a target whose rarer classes read as unknown is not supported yet",
            source=origin.source,
            key=f"{key}.preprocessing.most_common",
            fix=f"remove most_common or set it to at least {len(classes)}",
        )
    if len(classes) < 2:
        raise DataError(
            f"column {s.name!r}: the target has a single class",
            source=origin.source,
            key=key,
            fix="use a column with at least 2 classes",
        )
    vocab = tuple(c.item() if hasattr(c, "item") else c for c in classes)
    return FeatureMeta(out.name, "category", vocab=vocab, fitted=fitted)


def apply_target(
    out: Any, s: pd.Series, meta: FeatureMeta, key: str, origin: DataOrigin, *, alone: bool = False
) -> tuple[np.ndarray, list[FilledValues]]:
    """A number, binary or category target's cells prepared with its fitted ``meta``
    (:func:`fit_target`; ``alone`` as :func:`apply_input`): its targets (see
    :class:`PreparedData`) and what was filled. Pure; runs in the driver or the serving process.

    Raises:
        DataError: missing target values, a category label outside ``meta.vocab``, a cell
            that does not read as the type.
    """
    prep = preprocessing_of(out, "output_features")
    if out.type == "number":
        fitted = FittedNumber.of_record(meta.stats, meta.fitted)
        num = apply_number(s, prep, fitted, out.name, key, origin, alone=alone)
        return num.values, num.filled
    if out.type == "binary":
        col = apply_binary(s, prep, FittedBinary.of_record(meta.fitted), out.name, key, origin, alone=alone)
        return col.values, col.filled
    before = meta.fitted.get("last") if alone else None
    cat = category_values(s, prep, out.name, None, fill=meta.fitted.get("fill"), before=before)
    values = pd.Series(cat.values, name=s.name)
    _require_targets(values, key, origin)
    return _known_classes(values, meta.vocab, key, origin), cat.filled


def _known_classes(values: pd.Series, classes: tuple[Any, ...], key: str, origin: DataOrigin) -> np.ndarray:
    """Category labels as ids of a fitted model's ``classes`` (compared as text, as the
    labels were read). Raises DataError naming the rows of a label the model never saw."""
    lookup = {str(c): i for i, c in enumerate(classes)}
    ids = values.map(lambda v: lookup.get(str(v), -1)).to_numpy(np.int64)
    unseen = ids < 0
    if unseen.any():
        first = values[unseen].iloc[0]
        raise DataError(
            f"column {values.name!r}: label {first!r} is not one of the model's {len(classes)} classes "
            f"({origin.rows(_rows(unseen))})",
            source=origin.source,
            key=key,
            fix="score rows whose labels the model was trained on",
        )
    return ids


def prepare(df: pd.DataFrame, cfg: SweepConfig, data_dir: Path | None = None) -> PreparedData:
    """Encode every feature of ``df`` with Ludwig's preprocessing fitted on the training split.

    Runs in the driver, once per sweep. Rows follow the module docstring's order; the split
    is ``dataset.split`` when the file sets it (stratified on the first output when it is a
    category or binary), else Ludwig's ``preprocessing.split``. ``data_dir``: where relative
    image file paths start (the dataset file's folder,
    :func:`ludwig_hpo.data.sources.dataset_folder`); None: the current folder.

    Missing values follow each feature's ``missing_value_strategy`` (Ludwig's defaults: a
    number input ``0.0``, a category ``<UNK>``, a binary input false, a target's row dropped),
    never silently: ``PreparedData.filled`` lists what was done. Every error names the dataset
    file (when ``df`` came from :func:`~ludwig_hpo.data.sources.load_dataframe`), the column,
    and the first rows concerned as the file counts them
    (:meth:`~ludwig_hpo.data.origin.DataOrigin.rows`).

    Raises:
        DataError: a dataset ``dataset.streaming`` streams, missing columns, non-numeric
            numbers, a target with one class, too few rows for the split or the folds,
            missing or unreadable image files, images of different sizes without
            ``preprocessing.height``/``width``.
    """
    from ludwig_hpo.data.streaming.mode import refuse_in_memory

    refuse_in_memory(cfg, DataOrigin.of(df).source)
    kept = kept_rows(df, cfg)
    df, origin, splits, strat, notes = kept.df, kept.origin, kept.splits, kept.strata, kept.notes
    glob, seed = global_preprocessing(cfg), cfg.dataset.split.seed
    train = splits["train"]
    if cfg.is_llm:
        return _prepare_llm(df, cfg, kept)
    inputs, meta, filled = _encode_inputs(df, cfg, train, data_dir, origin)
    targets, out_meta, out_filled = _encode_targets(df, cfg, train, origin)
    meta.update(out_meta)
    if glob.oversample_minority is not None or glob.undersample_majority is not None:
        target = cfg.output_features[0]
        splits = {**splits, "train": balance_training_rows(train, targets[target.name], glob, seed)}
    folds: tuple = ()
    if cfg.kfold is not None:
        rows = np.unique(np.concatenate([splits["train"], splits["validation"]]))
        folds = tuple(kfold_indices(rows, cfg.kfold.k, seed, strat))
    return PreparedData(
        inputs=inputs,
        targets=targets,
        splits=splits,
        folds=folds,
        meta=meta,
        filled=tuple(notes + filled + out_filled),
    )


def _prepare_llm(df: pd.DataFrame, cfg: SweepConfig, kept: KeptRows) -> PreparedData:
    """An llm config's rows: prompt + target ids and their labels
    (:func:`ludwig_hpo.data.llm.prepare_llm`), with the splits and folds of any model."""
    from ludwig_hpo.data.llm import prepare_llm

    llm = prepare_llm(df, cfg, kept.splits["train"], kept.origin)
    folds: tuple = ()
    if cfg.kfold is not None:
        rows = np.unique(np.concatenate([kept.splits["train"], kept.splits["validation"]]))
        folds = tuple(kfold_indices(rows, cfg.kfold.k, cfg.dataset.split.seed, kept.strata))
    return PreparedData(
        inputs={llm.input_name: llm.ids},
        targets={llm.output_name: llm.labels},
        splits=kept.splits,
        folds=folds,
        meta={llm.input_name: llm.input_meta, llm.output_name: llm.output_meta},
        filled=tuple(kept.notes),
    )


@dataclass(frozen=True)
class KeptRows:
    """The rows :func:`prepare` encodes, before any feature is: ``df`` (sampled, rows a
    ``drop_row`` strategy drops gone), its ``origin``, the ``splits`` (positions in ``df``,
    before the training split is rebalanced), the stratification labels ``strata`` (None
    when not stratified) and ``notes`` of the dropped rows."""

    df: pd.DataFrame
    origin: DataOrigin
    splits: dict[str, np.ndarray]
    strata: np.ndarray | None
    notes: list[FilledValues]


def kept_rows(df: pd.DataFrame, cfg: SweepConfig) -> KeptRows:
    """Sample, drop and split ``df`` as :func:`prepare` does (the module docstring's order),
    deterministically: the same rows and splits for the same file and config (a served model
    refits its preprocessing on the same training rows; ``hpo evaluate --split`` scores the
    same test rows). Runs in the driver or the serving process.

    Raises:
        DataError: see :func:`prepare` (a single-class target, too few rows for the split).
    """
    origin = DataOrigin.of(df)
    glob = global_preprocessing(cfg)
    seed = cfg.dataset.split.seed
    sampled = sample_rows(len(df), glob, seed, origin.source)
    if sampled is not None:
        df, origin = _subset(df, origin, sampled)
    drop, notes = missing_drops(df, cfg, origin)
    if drop.any():
        df, origin = _subset(df, origin, np.flatnonzero(~drop))
    strat = _stratify_labels(df, cfg, origin)
    splits = split_rows(df, cfg, strat, origin)
    drop, outliers = outlier_drops(df, cfg, splits["train"], origin)
    if drop.any():
        splits = keep_splits(splits, ~drop)
        df, origin = _subset(df, origin, np.flatnonzero(~drop))
        strat = None if strat is None else strat[~drop]
    check_sizes(cfg, splits, strat, origin)
    return KeptRows(df, origin, splits, strat, notes + outliers)


def _require_targets(s: pd.Series, key: str, origin: DataOrigin) -> None:
    """Refuse a target column with missing values, naming the file, the column and the rows."""
    _refuse_missing(s, key, origin, "rows have no target value", "drop or fill those rows")
