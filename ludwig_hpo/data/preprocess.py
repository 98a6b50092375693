"""Preprocessing fitted on the training split only, applied to every row once per sweep.

The result, :class:`PreparedData`, is numpy arrays plus the metadata the model needs; it
goes to the Ray object store once and every trial (and every DDP rank) reads it from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.images import load_images
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.split import fixed_split_indices, kfold_indices, split_indices
from ludwig_hpo.errors import DataError

UNKNOWN = "<UNK>"
FLOAT32_MAX = float(np.finfo(np.float32).max)  # numbers are fed to the model as float32
_TRUE = {"1", "true", "yes", "y", "t", "1.0"}
_FALSE = {"0", "false", "no", "n", "f", "0.0"}


@dataclass(frozen=True)
class FeatureMeta:
    """What the model needs to know about one feature.

    Attributes:
        name, type: as in the sweep file.
        vocab: category input: index -> value (index 0 is the unknown value); category
            output: class index -> class value.
        shape: image: (height, width).
        stats: number: ``{"mean", "std", "min", "max"}`` of the training split; image: ``{"scale"}``.
    """

    name: str
    type: str
    vocab: tuple[Any, ...] = ()
    shape: tuple[int, ...] = ()
    stats: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class FilledValues:
    """Missing values of one input feature that preparation filled in (nothing is silent).

    Attributes:
        feature: the feature's name; column: the dataset column it reads.
        count: how many rows had no value (of every split).
        how: ``"training mean"`` (a number: the mean of the training split's values, before
            normalization) or ``"unknown category"`` (a category: the vocabulary's index 0).
        value: the training mean filled in (numbers only).
    """

    feature: str
    column: str
    count: int
    how: Literal["training mean", "unknown category"]
    value: float | None = None

    def text(self) -> str:
        """One line for a person, e.g. ``3 missing values in x2 filled with the training mean (0.41)``."""
        if self.how == "training mean":
            return f"{self.count} missing values in {self.column} filled with the training mean ({self.value:.4g})"
        return f"{self.count} missing values in {self.column} read as the unknown category"


@dataclass(frozen=True)
class PreparedData:
    """Every row, encoded, with the sweep's splits.

    Attributes:
        inputs: per input feature: number/binary (N, 1) float32, category (N,) int64,
            image (N, H, W) float32.
        targets: per output feature: category (N,) int64, binary (N,) float32, number (N,) float32.
        splits: ``{"train", "validation", "test"}`` -> sorted row indices.
        folds: k-fold (train, held-out) row indices over train+validation (empty without k-fold).
        meta: per feature name, see :class:`FeatureMeta`.
        filled: the missing input values preparation filled in, per feature that had any
            (what ``hpo validate`` and ``hpo sweep`` print).
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


def _column(df: pd.DataFrame, feat: Any, section: str, origin: DataOrigin) -> pd.Series:
    col = feat.source_column
    if col not in df.columns:
        close = [c for c in df.columns if str(c).lower() == col.lower()]
        hint = f"did you mean {close[0]!r}?" if close else "set 'column:' to one of the dataset's columns"
        raise DataError(
            f"column {col!r} is not in the dataset (it has {len(df.columns)} columns)",
            source=origin.source,
            key=f"{section}[{feat.name}]",
            fix=hint,
        )
    return df[col]


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


def _to_binary(s: pd.Series, key: str, origin: DataOrigin) -> np.ndarray:
    _refuse_missing(s, key, origin, "missing values in a binary column", "fill or drop those rows")
    values = s.astype(str).str.strip().str.lower()
    uniq = sorted(set(values))
    if set(uniq) <= _TRUE | _FALSE:
        return values.isin(_TRUE).to_numpy(np.float32)
    if len(uniq) == 2:  # any two labels: the sorted second one is the positive class
        return (values == uniq[1]).to_numpy(np.float32)
    third = _rows(~values.isin(uniq[:2]).to_numpy())[0]
    raise DataError(
        f"column {s.name!r}: a binary column needs 2 distinct values, but has {len(uniq)}: {uniq[:5]} "
        f"({origin.rows(third)} holds {s.iloc[third]!r})",
        source=origin.source,
        key=key,
        fix="use type: category for more than two classes",
    )


def _number(s: pd.Series, key: str, train: np.ndarray, origin: DataOrigin) -> tuple[np.ndarray, dict[str, float]]:
    x = pd.to_numeric(s, errors="coerce").to_numpy(np.float64)
    bad = np.isnan(x) & s.notna().to_numpy()
    col = f"column {s.name!r}"
    if bad.any():
        rows = _rows(bad)
        raise DataError(
            f"{col}: {len(rows)} values are not numbers (e.g. {s.iloc[rows[0]]!r}; {origin.rows(rows)})",
            source=origin.source,
            key=key,
            fix="clean the column or use type: category",
        )
    tr = x[train]
    if np.isnan(tr).all():
        raise DataError(
            f"{col}: every training value is missing", source=origin.source, key=key, fix="drop this feature"
        )
    infinite = np.isinf(x)
    if infinite.any():
        raise DataError(
            f"{col} holds infinite values ({origin.rows(_rows(infinite))})",
            source=origin.source,
            key=key,
            fix="clean the column",
        )
    present = x[~np.isnan(x)]
    peak = float(np.abs(present).max())
    if peak > FLOAT32_MAX:
        huge = _rows(np.abs(np.nan_to_num(x)) > FLOAT32_MAX)
        raise DataError(
            f"{col}: values up to {peak:.3g} do not fit float32 (largest {FLOAT32_MAX:.3g}; {origin.rows(huge)})",
            source=origin.source,
            key=key,
            fix="rescale the column (e.g. take its log) before the sweep",
        )
    stats = {
        "mean": float(np.nanmean(tr)),
        "std": float(np.nanstd(tr)),
        "min": float(np.nanmin(tr)),
        "max": float(np.nanmax(tr)),
    }
    return np.where(np.isnan(x), stats["mean"], x), stats


def _image(
    s: pd.Series, key: str, train: np.ndarray, feat: Any, data_dir: Path | None, origin: DataOrigin
) -> tuple[np.ndarray, dict[str, float]]:
    prep = feat.preprocessing
    arr = load_images(
        s,
        key=key,
        column=feat.source_column,
        height=prep.height,
        width=prep.width,
        resize_method=prep.resize_method,
        data_dir=data_dir,
        origin=origin,
    )
    s_val = float(arr[train].max()) if prep.scale == "auto" else float(prep.scale)
    return arr / (s_val or 1.0), {"scale": s_val}


def _check_sizes(
    cfg: SweepConfig, splits: dict[str, np.ndarray], labels: np.ndarray | None, origin: DataOrigin
) -> None:
    """Refuse splits too small to train on or to score: every DDP worker needs training rows,
    and a classification split needs at least one row per class to score it."""
    workers = cfg.backend.num_workers
    n_classes = len(np.unique(labels)) if labels is not None else 1
    need = {"train": 2 * workers, "validation": max(2, n_classes), "test": max(2, n_classes)}
    for name, minimum in need.items():
        if len(splits[name]) < minimum:
            why = (
                f"{workers} DDP workers"
                if name == "train"
                else (f"{n_classes} classes" if n_classes > 1 else "scoring")
            )
            raise DataError(
                f"the {name} split has {len(splits[name])} rows, too few for {why} (at least {minimum})",
                source=origin.source,
                key="dataset.split",
                fix=f"use more rows or a larger {name} fraction",
            )
    batch = cfg.trainer.batch_size
    if isinstance(batch, int) and batch * workers > len(splits["train"]):
        raise DataError(
            f"one step of {workers} DDP worker(s) x batch_size {batch} needs {batch * workers} rows, but "
            f"the train split has {len(splits['train'])}",
            source=origin.source,
            key="trainer.batch_size",
            fix="lower trainer.batch_size (it is per worker) or use batch_size: auto",
        )
    if cfg.kfold is not None:
        rows = len(splits["train"]) + len(splits["validation"])
        if rows // cfg.kfold.k < max(2, n_classes):
            raise DataError(
                f"{cfg.kfold.k} folds of {rows} train+validation rows hold about {rows // cfg.kfold.k} rows "
                f"each, too few to score {n_classes} classes",
                source=origin.source,
                key="kfold.k",
                fix="lower kfold.k",
            )


def _split(df: pd.DataFrame, cfg: SweepConfig, strat: np.ndarray | None, origin: DataOrigin) -> dict[str, np.ndarray]:
    """The sweep's train/validation/test rows: ``dataset.split``, or Ludwig's
    ``preprocessing.split`` (random / stratify on a column / fixed split column)."""
    sp = cfg.dataset.split
    lsp = cfg.preprocessing.split if cfg.preprocessing is not None else None
    if lsp is None:
        return split_indices(len(df), (sp.train, sp.validation, sp.test), sp.seed, strat)
    key = "preprocessing.split.column"
    if lsp.type == "fixed":
        if lsp.column not in df.columns:
            raise DataError(
                f"split column {lsp.column!r} is not in the dataset",
                source=origin.source,
                key=key,
                fix="add the column (0 = train, 1 = validation, 2 = test) or change column",
            )
        return fixed_split_indices(df[lsp.column].to_numpy(), key, origin)
    if lsp.type == "stratify":
        if lsp.column not in df.columns:
            raise DataError(
                f"stratify column {lsp.column!r} is not in the dataset",
                source=origin.source,
                key=key,
                fix="use one of the dataset's columns",
            )
        strat = pd.factorize(df[lsp.column].astype(str))[0]
    return split_indices(len(df), lsp.probabilities, sp.seed, strat)


def prepare(df: pd.DataFrame, cfg: SweepConfig, data_dir: Path | None = None) -> PreparedData:
    """Encode every feature of ``df`` with preprocessing fitted on the training split.

    Runs in the driver, once per sweep. The split is stratified on the first output feature
    when it is a category or binary. ``data_dir``: where relative image file paths start (the
    dataset file's folder, :func:`ludwig_hpo.data.sources.dataset_folder`); None: the current folder.

    Missing input values are filled, never silently: a number with its training split's mean
    (before normalization), a category with the unknown value; ``PreparedData.filled`` lists
    them. Every error names the dataset file (when ``df`` came from
    :func:`~ludwig_hpo.data.sources.load_dataframe`), the column, and the first rows concerned
    as the file counts them (:meth:`~ludwig_hpo.data.origin.DataOrigin.rows`).

    Raises:
        DataError: missing columns, non-numeric numbers, a target with one class or missing
            values, too few rows for the split or the folds, missing or unreadable image
            files, images of different sizes without ``preprocessing.height``/``width``.
    """
    origin = DataOrigin.of(df)
    first_out = cfg.output_features[0]
    strat = None
    if first_out.type in ("category", "binary"):
        col = _column(df, first_out, "output_features", origin)
        _require_targets(col, f"output_features[{first_out.name}]", origin)
        strat = pd.factorize(col.astype(str))[0]
        if len(np.unique(strat)) < 2:
            raise DataError(
                f"column {col.name!r}: the target has a single class; there is nothing to learn",
                source=origin.source,
                key=f"output_features[{first_out.name}]",
                fix="use a column with at least 2 classes",
            )
    splits = _split(df, cfg, strat, origin)
    _check_sizes(cfg, splits, strat, origin)
    train = splits["train"]
    inputs: dict[str, np.ndarray] = {}
    targets: dict[str, np.ndarray] = {}
    meta: dict[str, FeatureMeta] = {}
    filled: list[FilledValues] = []

    for feat in cfg.input_features:
        key = f"input_features[{feat.name}]"
        s = _column(df, feat, "input_features", origin)
        if feat.type == "number":
            x, stats = _number(s, key, train, origin)
            if missing := int(s.isna().sum()):
                filled.append(FilledValues(feat.name, str(s.name), missing, "training mean", stats["mean"]))
            norm = feat.preprocessing.normalization
            if norm == "zscore":
                x = (x - stats["mean"]) / (stats["std"] or 1.0)
            elif norm == "minmax":
                x = (x - stats["min"]) / ((stats["max"] - stats["min"]) or 1.0)
            inputs[feat.name] = x.astype(np.float32)[:, None]
            meta[feat.name] = FeatureMeta(feat.name, "number", stats=stats)
        elif feat.type == "binary":
            inputs[feat.name] = _to_binary(s, key, origin)[:, None]
            meta[feat.name] = FeatureMeta(feat.name, "binary")
        elif feat.type == "category":
            if s.iloc[train].isna().all():
                raise DataError(
                    f"column {s.name!r}: every training value is missing",
                    source=origin.source,
                    key=key,
                    fix="drop this feature",
                )
            if missing := int(s.isna().sum()):
                filled.append(FilledValues(feat.name, str(s.name), missing, "unknown category"))
            values = s.astype(str).where(s.notna(), UNKNOWN)
            counts = values.iloc[train].value_counts()
            vocab = (UNKNOWN, *[v for v in counts.index if v != UNKNOWN])
            lookup = {v: i for i, v in enumerate(vocab)}
            inputs[feat.name] = values.map(lookup).fillna(0).to_numpy(np.int64)  # unseen -> 0
            meta[feat.name] = FeatureMeta(feat.name, "category", vocab=vocab)
        elif feat.type == "image":
            x, stats = _image(s, key, train, feat, data_dir, origin)
            inputs[feat.name] = x
            meta[feat.name] = FeatureMeta(feat.name, "image", shape=tuple(x.shape[1:]), stats=stats)
        else:  # set, bag, sequence, timeseries, vector, date, h3
            from ludwig_hpo.data.feature_types import encode_input

            inputs[feat.name], meta[feat.name] = encode_input(feat, s, key, train, origin)

    for out in cfg.output_features:
        key = f"output_features[{out.name}]"
        s = _column(df, out, "output_features", origin)
        _require_targets(s, key, origin)
        if out.type == "category":
            classes = tuple(sorted(s.unique(), key=lambda v: (str(type(v)), v)))
            lookup = {v: i for i, v in enumerate(classes)}
            if len(classes) < 2:
                raise DataError(
                    f"column {s.name!r}: the target has a single class",
                    source=origin.source,
                    key=key,
                    fix="use a column with at least 2 classes",
                )
            targets[out.name] = s.map(lookup).to_numpy(np.int64)
            meta[out.name] = FeatureMeta(
                out.name, "category", vocab=tuple(c.item() if hasattr(c, "item") else c for c in classes)
            )
        elif out.type == "binary":
            targets[out.name] = _to_binary(s, key, origin)
            meta[out.name] = FeatureMeta(out.name, "binary")
        elif out.type not in ("number",):  # set, vector
            from ludwig_hpo.data.feature_types import encode_output

            targets[out.name], meta[out.name] = encode_output(out, s, key, train, origin)
        else:
            x, stats = _number(s, key, train, origin)
            targets[out.name] = x.astype(np.float32)
            meta[out.name] = FeatureMeta(out.name, "number", stats=stats)

    folds: tuple = ()
    if cfg.kfold is not None:
        rows = np.sort(np.concatenate([splits["train"], splits["validation"]]))
        folds = tuple(kfold_indices(rows, cfg.kfold.k, cfg.dataset.split.seed, strat))
    return PreparedData(inputs=inputs, targets=targets, splits=splits, folds=folds, meta=meta, filled=tuple(filled))


def _require_targets(s: pd.Series, key: str, origin: DataOrigin) -> None:
    """Refuse a target column with missing values, naming the file, the column and the rows."""
    _refuse_missing(s, key, origin, "rows have no target value", "drop or fill those rows")
