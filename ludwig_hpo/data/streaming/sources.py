"""The files of a streamed dataset and their checks, before any row is read: a Parquet or CSV
file, a folder (every ``.parquet`` / ``.csv`` / ``.tsv`` file under it), a glob, or any URI
pyarrow's file systems read (``s3://``, ``gs://``, ``file://``; credentials are the cluster's).
Every file's schema is read from its footer (Parquet) or header (CSV) and compared, so an
unreadable file, a schema that differs or a missing column is refused in one line naming the
file and the column. Runs in the driver; reads footers and headers only.
"""

from __future__ import annotations

import glob as globbing
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.data.sources import FORMATS, csv_delimiter, dataset_path
from ludwig_hpo.data.streaming.mode import is_uri
from ludwig_hpo.errors import DataError

_KEY = "dataset.source"
#: The cells ``pandas.read_csv`` reads as missing by default (its ``na_values``).
PANDAS_NA_VALUES = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip


@dataclass(frozen=True)
class StreamFiles:
    """The files a streamed sweep reads.

    Attributes:
        paths: every file, sorted (local paths, or paths inside ``filesystem`` for a URI).
        format: ``"parquet"`` or ``"csv"`` (a ``.tsv`` file is a CSV read with tabs).
        delimiter: the CSV delimiter (``,`` or a tab).
        columns: the columns of the files, as the first file has them.
        bytes: the files' total size.
        filesystem: the pyarrow file system of a URI, None for local files.
        float_columns: Parquet integer columns with a missing value in some file: pandas reads
            them as float64 when it reads the files whole, so every batch reads them so too
            (a block without a missing value would read int64, and a category ``1`` would
            count apart from ``1.0``).
        csv_types: CSV columns every read takes with a fixed type instead of the one pyarrow
            infers from a file's first block: ``(column, "float64")`` for a column only number
            features read (a first block of integers would refuse a later ``2.5``, which pandas
            reads whole as a float), ``(column, "string")`` for another feature's column that
            some file's first block holds no value of (pyarrow would type it null and refuse
            every later value).
    """

    paths: tuple[str, ...]
    format: str
    delimiter: str
    columns: tuple[str, ...]
    bytes: int
    filesystem: object | None = None
    float_columns: tuple[str, ...] = ()
    csv_types: tuple[tuple[str, str], ...] = ()

    def csv_parse_options(self) -> Any:
        """The ``pyarrow.csv.ParseOptions`` every read of these CSV files takes (Ray Data's, the
        driver's): the delimiter, and quoted cells may hold line breaks (pandas reads them so;
        without it pyarrow's chunker splits a block inside such a cell and the read fails with
        "CSV parser got out of sync with chunker"). Pure."""
        import pyarrow.csv as pcsv

        return pcsv.ParseOptions(delimiter=self.delimiter, newlines_in_values=True)

    def csv_convert_options(self, columns: list[str]) -> Any:
        """The ``pyarrow.csv.ConvertOptions`` every read of these CSV files takes: only
        ``columns``, the types of :attr:`csv_types`, and the cells pandas reads as missing
        (:data:`PANDAS_NA_VALUES`, an empty cell among them) are missing in every column, text
        ones included, as they are when the file is read whole (pyarrow's default keeps them as
        strings in text columns). Pure."""
        import pyarrow as pa
        import pyarrow.csv as pcsv

        types = {c: pa.type_for_alias(name) for c, name in self.csv_types if c in columns}
        return pcsv.ConvertOptions(
            include_columns=columns, column_types=types, null_values=list(PANDAS_NA_VALUES), strings_can_be_null=True
        )

    def as_read_whole(self, df: pd.DataFrame) -> pd.DataFrame:
        """A batch's columns with the dtypes pandas gives the files read whole
        (:attr:`float_columns`). Pure."""
        cast = [c for c in self.float_columns if c in df.columns and df[c].dtype != np.float64]
        return df.astype({c: np.float64 for c in cast}) if cast else df


def _format(path: str, source: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(
            f"unknown dataset format {suffix or '(no suffix)'!r}",
            source=path,
            key=_KEY,
            fix="stream .parquet, .csv or .tsv files (or remove the file from the folder)",
        )
    return FORMATS[suffix]


def _uri_listing(source: str) -> tuple[list[tuple[str, int]], object]:
    """The files under a URI, listed by pyarrow's file system of its scheme.

    Raises:
        DataError: a scheme pyarrow has no file system for (or whose library is not
            installed), a URI that cannot be listed (credentials, network, permissions).
    """
    from pyarrow import fs

    scheme = source.split("://", 1)[0]
    try:
        filesystem, root = fs.FileSystem.from_uri(source)
    except Exception as e:  # ArrowInvalid for an unknown scheme, OSError for a missing library
        raise DataError(
            f"no file system reads {scheme}:// here ({_one_line(e)})",
            source=source,
            key=_KEY,
            fix="use a local path or a URI of a file system pyarrow reads (s3://, gs://, hdfs://, file://)",
        ) from None
    try:
        info = filesystem.get_file_info(root)
        if info.type == fs.FileType.Directory:
            found = filesystem.get_file_info(fs.FileSelector(root, recursive=True))
            return [(f.path, f.size) for f in found if f.type == fs.FileType.File], filesystem
    except Exception as e:  # pyarrow's file systems raise OSError and their own types
        raise DataError(
            f"cannot list this URI: {_one_line(e)}",
            source=source,
            key=_KEY,
            fix="check the URI, and that this machine has the credentials the cluster reads it with",
        ) from None
    if info.type == fs.FileType.File:
        return [(info.path, info.size)], filesystem
    return [], filesystem


def _listing(source: str, base_dir: Path | None) -> tuple[list[tuple[str, int]], object | None]:
    if is_uri(source) and not source.startswith("file://"):
        return _uri_listing(source)
    local = source[len("file://") :] if source.startswith("file://") else source
    path = dataset_path(local, base_dir)
    if any(c in local for c in "*?["):
        hits = [Path(p) for p in globbing.glob(str(path), recursive=True)]
    elif path.is_dir():
        hits = [p for p in path.rglob("*") if p.suffix.lower() in FORMATS]
    else:
        hits = [path] if path.is_file() else []
    files = [p for p in hits if p.is_file() and not any(part.startswith((".", "_")) for part in p.parts[-1:])]
    return [(str(p), p.stat().st_size) for p in files], None


def _schema(path: str, fmt: str, delimiter: str, filesystem: object | None) -> tuple[list[tuple[str, str]], set[str]]:
    """A file's (column, type) pairs from its footer or header, and its columns of type null.
    CSV types are not compared (each file's inference reads its own first block): a CSV
    column is null when its first block holds no value but missing ones."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        schema = pq.read_schema(path, filesystem=filesystem)
        return [(f.name, str(f.type)) for f in schema], set()
    import pyarrow.csv as pcsv

    opener = filesystem.open_input_stream if filesystem is not None else pa.input_stream  # type: ignore[attr-defined]
    with opener(path) as stream:
        reader = pcsv.open_csv(
            stream,
            parse_options=pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(null_values=list(PANDAS_NA_VALUES), strings_can_be_null=True),
        )
        return [(f.name, "") for f in reader.schema], {f.name for f in reader.schema if pa.types.is_null(f.type)}


def _csv_has_rows(path: str, delimiter: str, filesystem: object | None) -> bool:
    """Whether a CSV file holds a row below its header (reads its first block)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    opener = filesystem.open_input_stream if filesystem is not None else pa.input_stream  # type: ignore[attr-defined]
    with opener(path) as stream:
        parse = pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
        for batch in pcsv.open_csv(stream, parse_options=parse):
            if batch.num_rows:
                return True
    return False


def _nullable_ints(path: str, filesystem: object | None) -> tuple[int, set[str]]:
    """A Parquet file's rows and its integer columns whose footer counts a missing value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path, filesystem=filesystem).metadata
    schema = meta.schema.to_arrow_schema()
    ints = {i for i, f in enumerate(schema) if pa.types.is_integer(f.type)}
    found = set()
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for i in ints:
            stats = group.column(i).statistics
            if stats is not None and stats.has_null_count and stats.null_count > 0:
                found.add(schema.field(i).name)
    return meta.num_rows, found


def _one_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def stream_files(
    source: str, base_dir: Path | None, needed: Iterable[str], numbers: Iterable[str] = (), texts: Iterable[str] = ()
) -> StreamFiles:
    """The files of ``source``, checked: one format, readable, the same schema, every ``needed``
    column (the features' and the split column) in every file. CSV reads take ``numbers`` as
    float64, and those of ``texts`` that some file's first block holds no value of as text
    (see :attr:`StreamFiles.csv_types`).

    Raises:
        DataError: no file, mixed formats, an unreadable file, a schema that differs from the
            first file's (naming the file and the column), a needed column missing from a file,
            no row in any file (a Parquet schema or a CSV header only).
    """
    listing, filesystem = _listing(source, base_dir)
    if not listing:
        raise DataError(
            "no .parquet, .csv or .tsv file found",
            source=source,
            key=_KEY,
            fix="check the path (relative paths start at the sweep file's folder)",
        )
    listing.sort()
    formats = {p: _format(p, source) for p, _ in listing}
    first = listing[0][0]
    fmt = formats[first]
    delimiter = csv_delimiter(Path(first).suffix.lower())
    other = next((p for p, f in formats.items() if f != fmt), None)
    if other is not None:
        raise DataError(
            f"the dataset mixes {fmt} and {formats[other]} files",
            source=other,
            key=_KEY,
            fix="stream files of one format",
        )
    schemas = {}
    untyped: set[str] = set()
    for path, _ in listing:
        try:
            schemas[path], nulls = _schema(path, fmt, delimiter, filesystem)
            untyped |= nulls
        except Exception as e:  # pyarrow's read errors have many types
            raise DataError(
                f"cannot read this file: {_one_line(e)}", source=path, key=_KEY, fix="fix or remove the file"
            ) from None
    want = schemas[first]
    needed = list(needed)
    for path, schema in schemas.items():
        names = [n for n, _ in schema]
        missing = [c for c in needed if c not in names]
        if missing:
            raise DataError(
                f"column {missing[0]!r} is not in this file (its columns: {', '.join(names[:8])})",
                source=path,
                key=_KEY,
                fix="give every file of the dataset the columns the features read",
            )
        if dict(schema) != dict(want):
            mine, theirs = dict(schema), dict(want)
            column = next(
                (c for c in [*theirs, *mine] if mine.get(c) != theirs.get(c)),
                names[0],
            )
            seen = f"{mine[column]}" if column in mine else "missing"
            first_has = f"{theirs[column]}" if column in theirs else "missing"
            raise DataError(
                f"the schema differs from {Path(first).name}'s at column {column!r} "
                f"(here {seen or 'present'}, there {first_has or 'present'})",
                source=path,
                key=_KEY,
                fix="write every file of the dataset with the same columns and types",
            )
    floats: set[str] = set()
    if fmt == "parquet":
        rows = 0
        for path, _ in listing:
            n, nullable = _nullable_ints(path, filesystem)
            rows, floats = rows + n, floats | nullable
        empty = rows == 0
    else:  # the first file with a row ends the look (the first file, as a rule)
        empty = not any(_csv_has_rows(path, delimiter, filesystem) for path, _ in listing)
    if empty:
        raise DataError(
            f"the dataset has no rows: its {len(listing)} file(s) hold "
            f"{'a schema' if fmt == 'parquet' else 'a header'} only",
            source=source,
            key=_KEY,
            fix="point dataset.source to files with rows",
        )
    as_float = [c for c in dict.fromkeys(numbers) if c in needed]
    as_text = [c for c in dict.fromkeys(texts) if c in needed and c in untyped and c not in as_float]
    csv_types = [(c, "float64") for c in as_float] + [(c, "string") for c in as_text]
    return StreamFiles(
        float_columns=tuple(sorted(floats & set(needed))),
        csv_types=tuple(csv_types) if fmt == "csv" else (),
        paths=tuple(p for p, _ in listing),
        format=fmt,
        delimiter=delimiter,
        columns=tuple(n for n, _ in want),
        bytes=sum(size for _, size in listing),
        filesystem=filesystem,
    )


def read_error(files: StreamFiles, columns: list[str], error: BaseException, source: str) -> DataError:
    """The one-line error of a read that failed past the footers and headers (a CSV cell its
    column's inferred type does not take, a row with another number of cells, a file damaged
    past its footer): Ray Data's error names the file but drops pyarrow's words, so the driver
    reads the file it names again, with the same options, for pyarrow's own line (the cell's
    row and value). ``columns``: the columns the sweep reads; ``source``: ``dataset.source``,
    named when no file is. Driver; reads one file at most.
    """
    text = str(error)
    path = next((p for p in sorted(files.paths, key=len, reverse=True) if p in text), None)
    if path is None:
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return DataError(
            f"cannot read the dataset: {lines[0] if lines else type(error).__name__}",
            source=source,
            key=_KEY,
            fix="fix or remove the file that cannot be read",
        )
    why = "the read failed where Ray Data read it"
    try:
        _read_all(files, path, columns)
    except Exception as e:  # pyarrow's read errors have many types
        why = _one_line(e)
    fix = "fix or remove the file"
    column = _csv_column_named(files, path, why)
    if column is not None:
        why = re.sub(r"In CSV column #\d+", f"In CSV column {column!r}", why, count=1)
    if files.format == "csv" and "conversion error" in why:
        fix = (
            "a column only number features read takes numbers only: clean the cell, or make the feature a category"
            if (column, "float64") in files.csv_types
            else "a CSV column's type comes from the file's first block of rows: clean the cell, or write the files "
            "as Parquet"
        )
    return DataError(f"cannot read this file: {why}", source=path, key=_KEY, fix=fix)


def _csv_column_named(files: StreamFiles, path: str, why: str) -> str | None:
    """The column pyarrow's ``In CSV column #<i>`` of ``why`` is (its index in ``path``'s header,
    which is each file's own order), None when ``why`` names none or the header is unreadable."""
    found = re.search(r"In CSV column #(\d+)", why)
    if files.format != "csv" or found is None:
        return None
    try:
        names = [n for n, _ in _schema(path, "csv", files.delimiter, files.filesystem)[0]]
    except Exception:  # the header was read once already; a file gone since names nothing
        return None
    index = int(found.group(1))
    return names[index] if index < len(names) else None


def _read_all(files: StreamFiles, path: str, columns: list[str]) -> None:
    """Read every batch of one file as Ray Data reads it, keeping none (for its error)."""
    import pyarrow as pa

    if files.format == "parquet":
        import pyarrow.parquet as pq

        for _ in pq.ParquetFile(path, filesystem=files.filesystem).iter_batches(columns=columns):
            pass
        return
    import pyarrow.csv as pcsv

    opener = files.filesystem.open_input_stream if files.filesystem is not None else pa.input_stream  # type: ignore[attr-defined]
    with opener(path) as stream:
        reader = pcsv.open_csv(
            stream,
            read_options=pcsv.ReadOptions(use_threads=False),
            parse_options=files.csv_parse_options(),
            convert_options=files.csv_convert_options(columns),
        )
        for _ in reader:
            pass
