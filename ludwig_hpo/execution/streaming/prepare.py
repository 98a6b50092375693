"""A streamed dataset read, split and fitted with Ray Data: the driver-side builder of
:class:`~ludwig_hpo.data.streaming.record.StreamedData` (the hand-off described there).

1. :func:`~ludwig_hpo.data.streaming.checks.check_streamable` and the files' footers and
   headers (:func:`~ludwig_hpo.data.streaming.sources.stream_files`): bad input is refused
   before any row is read.
2. One distributed pass: ``map_batches`` turns each block into a
   :class:`~ludwig_hpo.data.streaming.fit.BatchPartial` (split codes, bad cells, counts); the
   driver merges them in dataset order and fits every feature
   (:func:`~ludwig_hpo.data.streaming.fit.fitted_meta`). Only the partials reach the driver.
   Number features with an ``outlier_strategy`` take a second pass for their last kept value
   (:mod:`~ludwig_hpo.data.streaming.outliers`).
3. Per split, a lazy pipeline: read -> ``map_batches`` of
   :func:`~ludwig_hpo.data.streaming.apply.apply_batch` (drop rows, keep the split, apply the
   fitted preprocessing). Nothing runs until a rank iterates it.

Runs in the driver, on a started Ray (``ray.init`` done by the caller).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.rows import features_of
from ludwig_hpo.data.streaming.apply import apply_batch
from ludwig_hpo.data.streaming.checks import check_streamable
from ludwig_hpo.data.streaming.fit import (
    BatchPartial,
    FileOrigin,
    batch_partial,
    check_counts,
    filled_notes,
    fitted_meta,
    merge_into,
)
from ludwig_hpo.data.streaming.outliers import last_kept_of_batch, outlier_features, with_last_kept
from ludwig_hpo.data.streaming.record import FOLD_KEY, SPLITS, StreamedData
from ludwig_hpo.data.streaming.sources import StreamFiles, read_error, stream_files
from ludwig_hpo.data.streaming.splits import SplitRule, split_rule
from ludwig_hpo.errors import DataError

#: The column Ray Data names each row's file with (``include_paths``).
_PATH = "path"


def _by_file(df: pd.DataFrame, files: StreamFiles) -> Iterator[tuple[pd.DataFrame, FileOrigin]]:
    """A block's rows per file, in order, each with its file as the origin errors name (a read
    task may put several small files into one block)."""
    df = files.as_read_whole(df)
    if _PATH not in df.columns or _PATH in files.columns:
        yield df, FileOrigin(files.paths[0] if len(files.paths) == 1 else str(Path(files.paths[0]).parent))
        return
    paths = df[_PATH].to_numpy()
    cuts = [0, *(np.flatnonzero(paths[1:] != paths[:-1]) + 1).tolist(), len(df)]
    rows = df.drop(columns=[_PATH])
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        if b > a:
            yield rows.iloc[a:b].reset_index(drop=True), FileOrigin(str(paths[a]))


class _Partial:
    """``map_batches`` function of an ordered pass: a block -> one row per file in it holding
    its pickled result (``batch_partial``, or with ``meta`` the outliers pass's
    ``last_kept_of_batch``), or the DataError it raised, so the driver raises it as one line."""

    def __init__(self, cfg: SweepConfig, rule: SplitRule, files: StreamFiles, meta: dict | None = None) -> None:
        self.cfg, self.rule, self.files, self.meta = cfg, rule, files, meta

    def __call__(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        out: list[bytes] = []
        for rows, origin in _by_file(df, self.files):
            try:
                if self.meta is None:
                    result: Any = batch_partial(rows, self.cfg, self.rule, origin)
                else:
                    result = last_kept_of_batch(rows, self.cfg, self.rule, self.meta, origin)
                out.append(pickle.dumps(result))
            except DataError as e:
                out.append(pickle.dumps(e))
                break
        return {"partial": np.array(out, dtype=object)}


class _Apply:
    """``map_batches`` function of a split's pipeline (see :func:`apply_batch`)."""

    def __init__(self, cfg: SweepConfig, rule: SplitRule, meta: dict, splits: tuple[int, ...], files: StreamFiles):
        self.cfg, self.rule, self.meta, self.splits, self.files = cfg, rule, meta, splits, files

    def __call__(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        parts = [
            apply_batch(rows, self.cfg, self.rule, self.meta, self.splits, o) for rows, o in _by_file(df, self.files)
        ]
        if len(parts) == 1:
            return parts[0]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def needed_columns(cfg: SweepConfig, rule: SplitRule) -> list[str]:
    """The columns a streamed sweep reads: every feature's and the split column. Pure."""
    cols = [feat.source_column for _, feat in features_of(cfg)]
    if rule.column is not None:
        cols.append(rule.column)
    return list(dict.fromkeys(cols))


def dataset_files(cfg: SweepConfig, base_dir: Path | None, rule: SplitRule) -> StreamFiles:
    """``cfg.dataset.source``'s files, checked for the columns the sweep reads
    (:func:`needed_columns`), with the CSV types
    :func:`~ludwig_hpo.data.streaming.sources.stream_files` fixes: float for a column that only
    number features read, text for another feature's column without a value in a file's first
    block. The split (or hashed id) column keeps the type pyarrow infers, as its values are
    compared and hashed as the in-memory path reads them. Driver; reads footers and headers.

    Raises:
        DataError: what :func:`~ludwig_hpo.data.streaming.sources.stream_files` refuses.
    """
    features = features_of(cfg)
    others = [feat.source_column for _, feat in features if feat.type != "number"]
    numbers = [
        feat.source_column
        for _, feat in features
        if feat.type == "number" and feat.source_column not in others and feat.source_column != rule.column
    ]
    texts = [c for c in others if c != rule.column]
    return stream_files(cfg.dataset.source, base_dir, needed_columns(cfg, rule), numbers, texts)


def read_files(files: StreamFiles, columns: list[str]) -> Any:
    """The lazy ``ray.data.Dataset`` of ``files``' ``columns`` (and each row's file, when no
    column is named ``path`` already). Runs in the driver."""
    import ray.data

    paths = list(files.paths)
    with_paths = _PATH not in files.columns
    # One read task per file (a task still yields blocks of at most the context's
    # target_max_block_size as it reads): otherwise Ray Data splits each file's output into many
    # small blocks to reach its 200-block minimum, and with the order-preserving fit pass and a
    # small object store its executor then crawls through them
    if files.format == "parquet":
        ctx = ray.data.DataContext.get_current()
        before = ctx.use_datasource_v2
        # Ray Data's V2 Parquet source lists the files in a task of its own at every pass (each
        # epoch waits for it); the V1 source reads the paths it is given
        ctx.use_datasource_v2 = False
        try:
            ds = ray.data.read_parquet(
                paths,
                include_paths=with_paths,
                filesystem=files.filesystem,
                file_extensions=None,
                override_num_blocks=len(paths),
            )
        finally:
            ctx.use_datasource_v2 = before
        return ds.select_columns([*columns, _PATH] if with_paths else columns)
    return ray.data.read_csv(
        paths,
        include_paths=with_paths,
        filesystem=files.filesystem,
        parse_options=files.csv_parse_options(),
        convert_options=files.csv_convert_options(columns),
        override_num_blocks=len(paths),
    )


def _ordered_pass(files: StreamFiles, columns: list[str], fn: _Partial, source: str) -> Iterator[Any]:
    """``fn``'s result of every file's rows of every block, in dataset order (the fit's ``last``
    values and first-seen ties need the order, so the pass keeps it), streamed into the driver
    one by one.

    Raises:
        DataError: the first block's error, in dataset order; a file that fails past its footer.
    """
    import ray.data

    ctx = ray.data.DataContext.get_current()
    before = ctx.execution_options.preserve_order
    ctx.execution_options.preserve_order = True  # a dataset keeps the context it was made in
    try:
        mapped = read_files(files, columns).map_batches(fn, batch_format="pandas", batch_size=None)
        for row in mapped.iter_rows():
            result = pickle.loads(row["partial"])
            if isinstance(result, DataError):
                raise result
            yield result
    except DataError:
        raise
    except Exception as e:  # a file that fails past its footer; Ray wraps the reader's error
        raise read_error(files, columns, e, source) from None
    finally:
        ctx.execution_options.preserve_order = before


def prepare_streamed(cfg: SweepConfig, base_dir: Path | None) -> StreamedData:
    """Read, split and fit ``cfg.dataset.source`` as a stream (the module docstring's steps).

    Args:
        cfg: the sweep's config (``dataset.streaming`` resolved to stream).
        base_dir: the sweep file's folder (relative sources start there).

    Returns:
        The :class:`StreamedData`: lazy datasets per split, fitted meta, rows per split and fold.

    Raises:
        DataError: what :mod:`ludwig_hpo.data.streaming` refuses (one line naming the file and
            the column), splits too small to train on or score.
    """
    check_streamable(cfg)
    rule = split_rule(cfg)
    columns = needed_columns(cfg, rule)
    files = dataset_files(cfg, base_dir, rule)
    total = BatchPartial()
    for partial in _ordered_pass(files, columns, _Partial(cfg, rule, files), cfg.dataset.source):
        merge_into(total, partial)
    ds = read_files(files, columns)
    meta = fitted_meta(cfg, total, cfg.dataset.source, base_dir)  # a relative vocab_file starts there
    check_counts(cfg, total, meta, cfg.dataset.source)
    outliers: dict[str, int] = {}
    if outlier_features(cfg):
        second = _ordered_pass(files, columns, _Partial(cfg, rule, files, meta), cfg.dataset.source)
        meta, outliers = with_last_kept(meta, second)
    datasets = {
        name: ds.map_batches(_Apply(cfg, rule, meta, (code,), files), batch_format="pandas", batch_size=None)
        for code, name in enumerate(SPLITS)
    }
    return StreamedData(
        datasets=datasets,
        meta=meta,
        rows=dict(zip(SPLITS, total.split_rows, strict=True)),
        folds=rule.k,
        fold_rows=tuple(total.fold_rows),
        filled=filled_notes(cfg, total, meta, outliers),
        sources=files.paths,
        bytes=files.bytes,
    )


def _fold_rows(batch: dict[str, np.ndarray], fold: int, held_out: bool) -> dict[str, np.ndarray]:
    keep = (batch[FOLD_KEY] == fold) if held_out else (batch[FOLD_KEY] != fold)
    return {k: v[keep] for k, v in batch.items()}


def fold_datasets(streamed: StreamedData, fold: int) -> tuple[Any, Any]:
    """Fold ``fold``'s (training, held-out) lazy datasets: train+validation rows outside the
    fold and inside it. Runs in the driver.

    Raises:
        ValueError: the sweep has no k-fold, or ``fold`` is not in ``0..k-1``.
    """
    if not 0 <= fold < streamed.folds:
        raise ValueError(f"fold {fold} is not in 0..{streamed.folds - 1}")
    both = streamed.datasets["train"].union(streamed.datasets["validation"])
    train = both.map_batches(_fold_rows, fn_kwargs={"fold": fold, "held_out": False}, batch_format="numpy")
    held = both.map_batches(_fold_rows, fn_kwargs={"fold": fold, "held_out": True}, batch_format="numpy")
    return train, held
