"""The hand-off between the streamed data side and the side that feeds the ranks.

The driver (after ``ray.init``) calls
:func:`ludwig_hpo.execution.streaming.prepare.prepare_streamed` ``(cfg, base_dir)`` instead of
``load_dataframe`` + ``prepare`` when :func:`ludwig_hpo.data.streaming.mode.streaming_wanted`
says so. It reads only file footers and headers in the driver, runs one distributed pass over
the files (split codes, bad-input checks, the fit on the training split) and returns a
:class:`StreamedData`. Nothing is materialized: each dataset in :attr:`StreamedData.datasets`
is a lazy Ray Data pipeline (read -> drop rows -> keep one split -> apply the fitted
preprocessing) whose batches (``batch_format="numpy"``) are dicts of numpy arrays:

- ``input_key(name)`` (``"inputs/<name>"``): an input feature's rows, the dtype and per-row
  shape of :attr:`~ludwig_hpo.data.preprocess.PreparedData.inputs` (number/binary (B, 1)
  float32, category (B,) int64);
- ``target_key(name)`` (``"targets/<name>"``): an output feature's rows, as
  :attr:`~ludwig_hpo.data.preprocess.PreparedData.targets` (category (B,) int64, binary and
  number (B,) float32);
- :data:`FOLD_KEY` (``"__fold__"``): (B,) int64, the row's k-fold fold in ``0..k-1`` (train and
  validation rows; -1 on test rows and without ``kfold``). Fold ``i`` holds out the rows of
  fold ``i`` and trains on the other train+validation rows
  (:func:`ludwig_hpo.execution.streaming.prepare.fold_datasets`).

:func:`split_batch` turns one such batch into the ``(inputs, targets)`` dicts the worker loop
takes. The ``meta`` is the same :class:`~ludwig_hpo.data.preprocess.FeatureMeta` per feature
that the in-memory path fits on the same rows (what ``best_model/preprocessing.json`` holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ludwig_hpo.data.missing import FilledValues
from ludwig_hpo.data.preprocess import FeatureMeta

#: The batch key of a row's k-fold fold (-1: test rows, or no ``kfold``).
FOLD_KEY = "__fold__"
SPLITS = ("train", "validation", "test")


def input_key(name: str) -> str:
    """The batch key of input feature ``name``'s prepared rows. Pure."""
    return f"inputs/{name}"


def target_key(name: str) -> str:
    """The batch key of output feature ``name``'s prepared targets. Pure."""
    return f"targets/{name}"


def split_batch(batch: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One streamed batch as the ``(inputs, targets)`` dicts keyed by feature name (the shapes of
    :class:`~ludwig_hpo.data.preprocess.PreparedData`'s rows). Pure; runs on any rank."""
    inputs = {k.split("/", 1)[1]: v for k, v in batch.items() if k.startswith("inputs/")}
    targets = {k.split("/", 1)[1]: v for k, v in batch.items() if k.startswith("targets/")}
    return inputs, targets


@dataclass(frozen=True)
class StreamedData:
    """A streamed dataset, split and fitted, ready to be fed (built in the driver).

    Attributes:
        datasets: ``"train"``, ``"validation"``, ``"test"`` -> a lazy ``ray.data.Dataset`` of
            prepared batches (the module docstring); typed ``Any`` so that this record stays
            Ray-free.
        meta: per feature name, its fitted :class:`~ludwig_hpo.data.preprocess.FeatureMeta`.
        rows: rows per split, counted in the fit pass (after rows a ``drop_row`` strategy drops).
        folds: ``kfold.k``, 0 without k-fold; ``fold_rows[i]`` the rows of fold ``i``.
        fold_rows: (k,) rows per fold, among train+validation.
        filled: what preparation does to missing values, per feature (as ``PreparedData.filled``).
        sources: the files read, in order (paths or URIs).
        bytes: their total size on disk.
    """

    datasets: dict[str, Any]
    meta: dict[str, FeatureMeta]
    rows: dict[str, int]
    folds: int = 0
    fold_rows: tuple[int, ...] = ()
    filled: tuple[FilledValues, ...] = ()
    sources: tuple[str, ...] = ()
    bytes: int = 0

    @property
    def num_rows(self) -> int:
        """Rows of every split together."""
        return sum(self.rows.values())
