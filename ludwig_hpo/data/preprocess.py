"""Preprocessing fitted on the training split only, applied to every row once per sweep.

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
from ludwig_hpo.data.images import load_images
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
class PreparedData:
    """Every row, encoded, with the sweep's splits.

    Attributes:
        inputs: per input feature: number/binary (N, 1) float32, category (N,) int64,
            image (N, H, W) float32.
        targets: per output feature: category (N,) int64, binary (N,) float32, number (N,) float32.
        splits: ``{"train", "validation", "test"}`` -> sorted row indices.
        folds: k-fold (train, held-out) row indices over train+validation (empty without k-fold).
        meta: per feature name, see :class:`FeatureMeta`.
    """

    inputs: dict[str, np.ndarray]
    targets: dict[str, np.ndarray]
    splits: dict[str, np.ndarray]
    folds: tuple[tuple[np.ndarray, np.ndarray], ...]
    meta: dict[str, FeatureMeta]

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.targets.values())))


def _column(df: pd.DataFrame, feat: Any, section: str) -> pd.Series:
    col = feat.source_column
    if col not in df.columns:
        close = [c for c in df.columns if str(c).lower() == col.lower()]
        hint = f"did you mean {close[0]!r}?" if close else "set 'column:' to one of the dataset's columns"
        raise DataError(
            f"column {col!r} is not in the dataset (it has {len(df.columns)} columns)",
            key=f"{section}[{feat.name}]",
            fix=hint,
        )
    return df[col]


def _to_binary(s: pd.Series, key: str) -> np.ndarray:
    if s.isna().any():
        raise DataError(
            f"{int(s.isna().sum())} missing values in a binary column", key=key, fix="fill or drop those rows"
        )
    values = s.astype(str).str.strip().str.lower()
    uniq = sorted(set(values))
    if set(uniq) <= _TRUE | _FALSE:
        return values.isin(_TRUE).to_numpy(np.float32)
    if len(uniq) == 2:  # any two labels: the sorted second one is the positive class
        return (values == uniq[1]).to_numpy(np.float32)
    raise DataError(
        f"a binary column needs 2 distinct values, but has {len(uniq)}: {uniq[:5]}",
        key=key,
        fix="use type: category for more than two classes",
    )


def _number(s: pd.Series, key: str, train: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    x = pd.to_numeric(s, errors="coerce").to_numpy(np.float64)
    bad = np.isnan(x) & s.notna().to_numpy()
    if bad.any():
        raise DataError(
            f"{int(bad.sum())} values are not numbers (e.g. {s[bad].iloc[0]!r})",
            key=key,
            fix="clean the column or use type: category",
        )
    tr = x[train]
    if np.isnan(tr).all():
        raise DataError("every training value is missing", key=key, fix="drop this feature")
    present = x[~np.isnan(x)]
    if not np.isfinite(present).all():
        raise DataError("the column holds infinite values", key=key, fix="clean the column")
    peak = float(np.abs(present).max())
    if peak > FLOAT32_MAX:
        raise DataError(
            f"values up to {peak:.3g} do not fit float32 (largest {FLOAT32_MAX:.3g})",
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
    s: pd.Series, key: str, train: np.ndarray, feat: Any, data_dir: Path | None
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
    )
    s_val = float(arr[train].max()) if prep.scale == "auto" else float(prep.scale)
    return arr / (s_val or 1.0), {"scale": s_val}


def _check_sizes(cfg: SweepConfig, splits: dict[str, np.ndarray], labels: np.ndarray | None) -> None:
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
                key="dataset.split",
                fix=f"use more rows or a larger {name} fraction",
            )
    batch = cfg.trainer.batch_size
    if isinstance(batch, int) and batch * workers > len(splits["train"]):
        raise DataError(
            f"one step of {workers} DDP worker(s) x batch_size {batch} needs {batch * workers} rows, but "
            f"the train split has {len(splits['train'])}",
            key="trainer.batch_size",
            fix="lower trainer.batch_size (it is per worker) or use batch_size: auto",
        )
    if cfg.kfold is not None:
        rows = len(splits["train"]) + len(splits["validation"])
        if rows // cfg.kfold.k < max(2, n_classes):
            raise DataError(
                f"{cfg.kfold.k} folds of {rows} train+validation rows hold about {rows // cfg.kfold.k} rows "
                f"each, too few to score {n_classes} classes",
                key="kfold.k",
                fix="lower kfold.k",
            )


def _split(df: pd.DataFrame, cfg: SweepConfig, strat: np.ndarray | None) -> dict[str, np.ndarray]:
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
                key=key,
                fix="add the column (0 = train, 1 = validation, 2 = test) or change column",
            )
        return fixed_split_indices(df[lsp.column].to_numpy(), key)
    if lsp.type == "stratify":
        if lsp.column not in df.columns:
            raise DataError(
                f"stratify column {lsp.column!r} is not in the dataset", key=key, fix="use one of the dataset's columns"
            )
        strat = pd.factorize(df[lsp.column].astype(str))[0]
    return split_indices(len(df), lsp.probabilities, sp.seed, strat)


def prepare(df: pd.DataFrame, cfg: SweepConfig, data_dir: Path | None = None) -> PreparedData:
    """Encode every feature of ``df`` with preprocessing fitted on the training split.

    Runs in the driver, once per sweep. The split is stratified on the first output feature
    when it is a category or binary. ``data_dir``: where relative image file paths start (the
    dataset file's folder, :func:`ludwig_hpo.data.sources.dataset_folder`); None: the current folder.

    Raises:
        DataError: missing columns, non-numeric numbers, a target with one class or missing
            values, too few rows for the split or the folds, missing or unreadable image
            files, images of different sizes without ``preprocessing.height``/``width``.
    """
    first_out = cfg.output_features[0]
    strat = None
    if first_out.type in ("category", "binary"):
        col = _column(df, first_out, "output_features")
        if col.isna().any():
            raise DataError(
                f"{int(col.isna().sum())} rows have no target value",
                key=f"output_features[{first_out.name}]",
                fix="drop or fill those rows",
            )
        strat = pd.factorize(col.astype(str))[0]
        if len(np.unique(strat)) < 2:
            raise DataError(
                "the target has a single class; there is nothing to learn",
                key=f"output_features[{first_out.name}]",
                fix="use a column with at least 2 classes",
            )
    splits = _split(df, cfg, strat)
    _check_sizes(cfg, splits, strat)
    train = splits["train"]
    inputs: dict[str, np.ndarray] = {}
    targets: dict[str, np.ndarray] = {}
    meta: dict[str, FeatureMeta] = {}

    for feat in cfg.input_features:
        key = f"input_features[{feat.name}]"
        s = _column(df, feat, "input_features")
        if feat.type == "number":
            x, stats = _number(s, key, train)
            norm = feat.preprocessing.normalization
            if norm == "zscore":
                x = (x - stats["mean"]) / (stats["std"] or 1.0)
            elif norm == "minmax":
                x = (x - stats["min"]) / ((stats["max"] - stats["min"]) or 1.0)
            inputs[feat.name] = x.astype(np.float32)[:, None]
            meta[feat.name] = FeatureMeta(feat.name, "number", stats=stats)
        elif feat.type == "binary":
            inputs[feat.name] = _to_binary(s, key)[:, None]
            meta[feat.name] = FeatureMeta(feat.name, "binary")
        elif feat.type == "category":
            if s.iloc[train].isna().all():
                raise DataError("every training value is missing", key=key, fix="drop this feature")
            values = s.astype(str).where(s.notna(), UNKNOWN)
            counts = values.iloc[train].value_counts()
            vocab = (UNKNOWN, *[v for v in counts.index if v != UNKNOWN])
            lookup = {v: i for i, v in enumerate(vocab)}
            inputs[feat.name] = values.map(lookup).fillna(0).to_numpy(np.int64)  # unseen -> 0
            meta[feat.name] = FeatureMeta(feat.name, "category", vocab=vocab)
        else:  # image
            x, stats = _image(s, key, train, feat, data_dir)
            inputs[feat.name] = x
            meta[feat.name] = FeatureMeta(feat.name, "image", shape=tuple(x.shape[1:]), stats=stats)

    for out in cfg.output_features:
        key = f"output_features[{out.name}]"
        s = _column(df, out, "output_features")
        if s.isna().any():
            raise DataError(f"{int(s.isna().sum())} rows have no target value", key=key, fix="drop or fill those rows")
        if out.type == "category":
            classes = tuple(sorted(s.unique(), key=lambda v: (str(type(v)), v)))
            lookup = {v: i for i, v in enumerate(classes)}
            if len(classes) < 2:
                raise DataError("the target has a single class", key=key, fix="use a column with at least 2 classes")
            targets[out.name] = s.map(lookup).to_numpy(np.int64)
            meta[out.name] = FeatureMeta(
                out.name, "category", vocab=tuple(c.item() if hasattr(c, "item") else c for c in classes)
            )
        elif out.type == "binary":
            targets[out.name] = _to_binary(s, key)
            meta[out.name] = FeatureMeta(out.name, "binary")
        else:
            x, stats = _number(s, key, train)
            targets[out.name] = x.astype(np.float32)
            meta[out.name] = FeatureMeta(out.name, "number", stats=stats)

    folds: tuple = ()
    if cfg.kfold is not None:
        rows = np.sort(np.concatenate([splits["train"], splits["validation"]]))
        folds = tuple(kfold_indices(rows, cfg.kfold.k, cfg.dataset.split.seed, strat))
    return PreparedData(inputs=inputs, targets=targets, splits=splits, folds=folds, meta=meta)
