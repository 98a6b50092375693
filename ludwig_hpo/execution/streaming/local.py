"""A streamed dataset's split read in this process, file after file, without Ray: what the
driver scores the best model on (the test split; the validation split a ``calibration: true``
output is fitted on) and takes a logged model's input example from, once the sweep's local
cluster has stopped.

Each file is read as Ray Data reads it in :func:`~ludwig_hpo.execution.streaming.prepare.read_files`
(Parquet record batches of the needed columns; a CSV through pyarrow's streaming reader with
Ray Data's read options, so its types are inferred from its first block alike), cast as the
files read whole (:meth:`~ludwig_hpo.data.streaming.sources.StreamFiles.as_read_whole`), and
prepared by the same :func:`~ludwig_hpo.data.streaming.apply.apply_batch` a split's pipeline
maps: a row gets the arrays a rank is fed. Only one batch of rows is in memory at a time.
Runs in the driver (any process: pyarrow and pandas only).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.streaming.apply import apply_batch
from ludwig_hpo.data.streaming.fit import FileOrigin, drop_mask, require_columns
from ludwig_hpo.data.streaming.record import SPLITS, StreamedData, split_batch
from ludwig_hpo.data.streaming.sources import StreamFiles
from ludwig_hpo.data.streaming.splits import SplitRule, split_codes, split_rule
from ludwig_hpo.errors import DataError
from ludwig_hpo.execution.stream_shards import CHUNK_ROWS
from ludwig_hpo.execution.streaming.prepare import dataset_files, needed_columns
from ludwig_hpo.train.stream_feed import Chunk, RankStream


class LocalSplits:
    """The files of a streamed sweep's dataset, read again in this process.

    Args:
        cfg: the sweep's config (its features, split and ``dataset.source``).
        base_dir: the sweep file's folder (relative sources start there).
        streamed: what the sweep fitted (its ``meta``, rows per split, the files it read).
        chunk_rows: rows per batch read from a file (the last of a file may be shorter).

    Raises:
        DataError: the files cannot be listed or checked again, or they are not the files the
            sweep read (one was added or removed since).
    """

    def __init__(
        self, cfg: SweepConfig, base_dir: Path | None, streamed: StreamedData, chunk_rows: int = CHUNK_ROWS
    ) -> None:
        self.cfg, self.streamed, self.chunk_rows = cfg, streamed, chunk_rows
        self.rule: SplitRule = split_rule(cfg)
        self.columns = needed_columns(cfg, self.rule)
        self.files: StreamFiles = dataset_files(cfg, base_dir, self.rule)
        if self.files.paths != streamed.sources:
            raise DataError(
                f"the dataset holds {len(self.files.paths)} file(s) now, not the {len(streamed.sources)} the "
                "sweep fitted its preprocessing on",
                source=cfg.dataset.source,
                key="dataset.source",
                fix="leave the dataset's files as they are until the sweep has ended",
            )

    def _file_batches(self, path: str) -> Iterator[pd.DataFrame]:
        import pyarrow as pa

        files = self.files
        if files.format == "parquet":
            import pyarrow.parquet as pq

            reader = pq.ParquetFile(path, filesystem=files.filesystem)
            for batch in reader.iter_batches(batch_size=self.chunk_rows, columns=self.columns):
                yield files.as_read_whole(pa.Table.from_batches([batch]).to_pandas())
            return
        import pyarrow.csv as pcsv

        opener = files.filesystem.open_input_stream if files.filesystem is not None else pa.input_stream  # type: ignore[attr-defined]
        with opener(path) as stream:
            reader = pcsv.open_csv(
                stream,
                read_options=pcsv.ReadOptions(use_threads=False),  # Ray Data's: the same first-block inference
                parse_options=files.csv_parse_options(),
                convert_options=files.csv_convert_options(self.columns),
            )
            for batch in reader:
                yield files.as_read_whole(pa.Table.from_batches([batch]).to_pandas())

    def _batches(self) -> Iterator[tuple[pd.DataFrame, FileOrigin]]:
        for path in self.files.paths:
            origin = FileOrigin(path)
            for df in self._file_batches(path):
                if len(df):
                    yield df, origin

    def chunks(self, split: str) -> Iterator[Chunk]:
        """The prepared rows of ``split`` (``"train"``, ``"validation"``, ``"test"``), in file
        order, as the ``(inputs, targets)`` chunks a rank streams; chunks without rows are skipped.

        Raises:
            DataError: a cell its feature cannot read (the fit pass refused such cells already,
                so only a file rewritten since), naming the file and the column.
        """
        code = SPLITS.index(split)
        for df, origin in self._batches():
            x, y = split_batch(apply_batch(df, self.cfg, self.rule, self.streamed.meta, (code,), origin))
            if len(next(iter(y.values()))):
                yield x, y

    def stream(self, split: str) -> RankStream:
        """``split`` as one rank's whole shard (every row once), for a
        :class:`~ludwig_hpo.train.stream_feed.StreamScorer`: each ``open`` reads the files again."""
        return RankStream(self.streamed.rows[split], None, lambda epoch: self.chunks(split))

    def raw_rows(self, split: str, rows: int) -> pd.DataFrame:
        """The first ``rows`` raw rows of ``split`` (fewer when it has fewer), in file order, with
        the columns the sweep reads as its files hold them, rows a ``drop_row`` strategy drops
        left out: what a logged model's input example shows. Reads only as far as it needs."""
        code = SPLITS.index(split)
        found: list[pd.DataFrame] = []
        held = 0
        for df, origin in self._batches():
            require_columns(df, self.cfg, self.rule, origin)
            drop, _ = drop_mask(df, self.cfg)
            kept = df.iloc[np.flatnonzero(~drop)].reset_index(drop=True)
            mine = kept.iloc[np.flatnonzero(split_codes(kept, self.rule, origin) == code)]
            found.append(mine.iloc[: rows - held])
            held += len(found[-1])
            if held >= rows:
                break
        if not found:
            return pd.DataFrame(columns=self.columns)
        return _as_pandas_types(pd.concat(found, ignore_index=True), self.files)

    def prepared_rows(self, split: str, rows: int) -> dict[str, np.ndarray]:
        """The inputs of the first ``rows`` prepared rows of ``split`` (those of
        :meth:`raw_rows`), by feature name; empty arrays when it has none."""
        parts: list[dict[str, np.ndarray]] = []
        held = 0
        for x, _ in self.chunks(split):
            take = min(rows - held, len(next(iter(x.values()))))
            parts.append({k: v[:take] for k, v in x.items()})
            held += take
            if held >= rows:
                break
        if not parts:
            return {}
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _as_pandas_types(df: pd.DataFrame, files: StreamFiles) -> pd.DataFrame:
    """``df`` with each CSV column read as float (:attr:`StreamFiles.csv_types`) back to int64
    where its rows are whole numbers without a missing one, as ``pandas.read_csv`` types those
    rows: a logged model's signature then types the column as an in-memory sweep's does."""
    whole = [
        c
        for c, kind in files.csv_types
        if kind == "float64"
        and c in df.columns
        and df[c].notna().all()
        and np.isfinite(df[c]).all()
        and (df[c] % 1 == 0).all()
    ]
    return df.astype({c: np.int64 for c in whole}) if whole else df
