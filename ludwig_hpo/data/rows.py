"""Which rows a sweep trains on, and in which split: Ludwig's sampling, the rows a
``drop_row`` strategy drops (from every feature and split at once), the split itself and the
checks that every split can be trained on and scored. Runs in the driver, once per sweep.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.preprocessing import (
    BinaryOutputPreprocessing,
    BinaryPreprocessing,
    CategoryOutputPreprocessing,
    CategoryPreprocessing,
    GlobalPreprocessing,
    NumberOutputPreprocessing,
    NumberPreprocessing,
)
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.ludwig_split import ludwig_split
from ludwig_hpo.data.missing import FilledValues
from ludwig_hpo.data.numbers import outlier_rows
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.split import split_indices
from ludwig_hpo.errors import DataError


def global_preprocessing(cfg: SweepConfig) -> GlobalPreprocessing:
    """The top-level ``preprocessing`` in force (Ludwig's defaults when the file has none)."""
    return cfg.preprocessing if cfg.preprocessing is not None else GlobalPreprocessing()


def uses_ludwig_split(cfg: SweepConfig) -> bool:
    """True unless the file sets this platform's ``dataset.split`` fractions: a file without
    them (every Ludwig config) is split as Ludwig splits it (``preprocessing.split``, default
    random 0.7 / 0.1 / 0.2), seeded by ``dataset.split.seed`` (42, Ludwig's ``random_seed``)."""
    if cfg.preprocessing is not None and "split" in cfg.preprocessing.model_fields_set:
        return True
    return not (cfg.dataset.split.model_fields_set - {"seed"})


def features_of(cfg: SweepConfig) -> list[tuple[str, Any]]:
    """Every feature with the config section it is in: ``(section, feature)``."""
    return [("input_features", f) for f in cfg.input_features] + [("output_features", f) for f in cfg.output_features]


def column_of(df: pd.DataFrame, feat: Any, section: str, origin: DataOrigin) -> pd.Series:
    """The dataset column ``feat`` reads.

    Raises:
        DataError: the column is not in the dataset (a near spelling is suggested).
    """
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


#: Each type's ``preprocessing`` model, by section, for a feature model that has none.
_DEFAULT_PREPROCESSING: dict[tuple[str, str], type[Any]] = {
    ("input_features", "number"): NumberPreprocessing,
    ("input_features", "binary"): BinaryPreprocessing,
    ("input_features", "category"): CategoryPreprocessing,
    ("output_features", "number"): NumberOutputPreprocessing,
    ("output_features", "binary"): BinaryOutputPreprocessing,
    ("output_features", "category"): CategoryOutputPreprocessing,
}


def preprocessing_of(feat: Any, section: str) -> Any:
    """The feature's ``preprocessing`` section (Ludwig's defaults for its type and section
    when the feature model has none); None for a type without one."""
    prep = getattr(feat, "preprocessing", None)
    if prep is not None:
        return prep
    default = _DEFAULT_PREPROCESSING.get((section, feat.type))
    return default() if default is not None else None


def _strategy(feat: Any, section: str) -> str | None:
    return getattr(preprocessing_of(feat, section), "missing_value_strategy", None)


def missing_drops(df: pd.DataFrame, cfg: SweepConfig, origin: DataOrigin) -> tuple[np.ndarray, list[FilledValues]]:
    """(N,) True for the rows a ``missing_value_strategy: drop_row`` drops (a missing value in
    that feature's column), and one :class:`FilledValues` per feature that drops any.

    Raises:
        DataError: every row would be dropped (named at the first feature dropping rows; the
            split's "too few rows" would not say why).
    """
    drop = np.zeros(len(df), dtype=bool)
    notes = []
    first: tuple[str, Any] | None = None
    for section, feat in features_of(cfg):
        if _strategy(feat, section) != "drop_row":
            continue
        missing = column_of(df, feat, section, origin).isna().to_numpy()
        if missing.any():
            notes.append(FilledValues(feat.name, feat.source_column, int(missing.sum()), "dropped"))
            drop |= missing
            first = first or (section, feat)
    if first is not None and drop.all():
        section, feat = first
        raise DataError(
            f"every row misses a value a drop_row feature needs (column {feat.source_column!r}: "
            f"{int(df[feat.source_column].isna().sum())} of {len(df)} rows empty), so no row is left",
            source=origin.source,
            key=f"{section}[{feat.name}]",
            fix="fill the column, or set its preprocessing.missing_value_strategy to fill_with_const with a fill_value",
        )
    return drop, notes


def outlier_drops(
    df: pd.DataFrame, cfg: SweepConfig, train: np.ndarray, origin: DataOrigin
) -> tuple[np.ndarray, list[FilledValues]]:
    """(N,) True for the rows an ``outlier_strategy: drop_row`` of a number input drops
    (statistics from ``train``), and one :class:`FilledValues` per feature that drops any."""
    drop = np.zeros(len(df), dtype=bool)
    notes = []
    for section, feat in features_of(cfg):
        prep = preprocessing_of(feat, section)
        if not isinstance(prep, NumberPreprocessing) or prep.outlier_strategy != "drop_row":
            continue
        key = f"{section}[{feat.name}]"
        out = outlier_rows(column_of(df, feat, section, origin), prep, key, train, origin)
        if out.any():
            notes.append(FilledValues(feat.name, feat.source_column, int(out.sum()), "dropped", what="outlier"))
            drop |= out
    return drop, notes


def keep_splits(splits: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    """``splits`` (positions in N rows) as positions among the ``keep`` rows only. Pure."""
    new = np.cumsum(keep) - 1
    return {name: new[idx[keep[idx]]].astype(np.int64) for name, idx in splits.items()}


def split_rows(
    df: pd.DataFrame, cfg: SweepConfig, strat: np.ndarray | None, origin: DataOrigin
) -> dict[str, np.ndarray]:
    """The sweep's train/validation/test rows: ``dataset.split`` (stratified on ``strat``, the
    first output's classes) when the file sets it, else Ludwig's ``preprocessing.split``
    (:func:`~ludwig_hpo.data.ludwig_split.ludwig_split`), seeded by ``dataset.split.seed``."""
    sp = cfg.dataset.split
    if not uses_ludwig_split(cfg):
        return split_indices(len(df), (sp.train, sp.validation, sp.test), sp.seed, strat)
    split = global_preprocessing(cfg).split
    _check_split_feature(cfg, split.type, split.column)
    return ludwig_split(df, split, sp.seed, origin)


#: The feature types Ludwig accepts for a split column that is also a feature.
_SPLIT_FEATURE_TYPES = {"stratify": ("binary", "category"), "datetime": ("date",)}


def _check_split_feature(cfg: SweepConfig, kind: str, column: str | None) -> None:
    """Ludwig's rule: a stratify column that is a feature is a binary or category one, a
    datetime split column that is a feature is a date one.

    Raises:
        DataError: at ``preprocessing.split.column``.
    """
    allowed = _SPLIT_FEATURE_TYPES.get(kind)
    for _, feat in features_of(cfg):
        if allowed is not None and feat.source_column == column and feat.type not in allowed:
            raise DataError(
                f"the {kind} split column {column!r} is the {feat.type} feature {feat.name!r}; Ludwig "
                f"{'stratifies on' if kind == 'stratify' else 'orders rows by'} a {' or '.join(allowed)} feature only",
                key="preprocessing.split.column",
                fix=f"split on another column, or make {feat.name!r} a {allowed[0]} feature",
            )


def batch_size_note(cfg: SweepConfig, train_rows: int) -> list[str]:
    """The one line saying that ``trainer.batch_size`` is cut to the training split, if it is.

    As in Ludwig (whose examples set ``batch_size: 32769  # entire training set``), a batch
    larger than a worker's share of the training split is that whole share: one step per epoch.
    ``train_rows`` counts the training split's rows (all workers together). Runs in the driver.
    """
    batch, workers = cfg.trainer.batch_size, cfg.backend.num_workers
    share = math.ceil(train_rows / workers)
    if not isinstance(batch, int) or batch <= share:
        return []
    if workers == 1:
        return [
            f"note: trainer.batch_size {batch} is larger than the train split ({share} rows): a batch is the whole split"
        ]
    return [
        f"note: trainer.batch_size {batch} is larger than each of {workers} DDP workers' share of the train split "
        f"({share} rows): a batch is a worker's whole share"
    ]


def check_sizes(cfg: SweepConfig, splits: dict[str, np.ndarray], labels: np.ndarray | None, origin: DataOrigin) -> None:
    """Refuse splits too small to train on or to score: every DDP worker needs training rows,
    and a classification split needs at least one row per class to score it.

    Raises:
        DataError: naming the split, its size and the fix.
    """
    workers = cfg.backend.num_workers
    n_classes = len(np.unique(labels)) if labels is not None else 1
    need = {"train": 2 * workers, "validation": max(2, n_classes), "test": max(2, n_classes)}
    key = "preprocessing.split" if uses_ludwig_split(cfg) else "dataset.split"
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
                key=key,
                fix=f"use more rows or a larger {name} fraction",
            )
    if cfg.kfold is not None:
        rows = len(np.unique(splits["train"])) + len(splits["validation"])
        if rows // cfg.kfold.k < max(2, n_classes):
            raise DataError(
                f"{cfg.kfold.k} folds of {rows} train+validation rows hold about {rows // cfg.kfold.k} rows "
                f"each, too few to score {n_classes} classes",
                source=origin.source,
                key="kfold.k",
                fix="lower kfold.k",
            )
