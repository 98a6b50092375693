"""Whether a sweep streams its dataset (``dataset.streaming``): ``true``, ``false``, or ``auto``
(stream a folder, a glob or a URI; load a single file in memory, whatever its size, as before
streaming existed). Runs in the driver; reads no file, a stat at most.
"""

from __future__ import annotations

from pathlib import Path

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.sources import dataset_path
from ludwig_hpo.errors import DataError


def is_uri(source: str) -> bool:
    """True for ``scheme://...`` (``s3://``, ``gs://``, ``file://``): a source only Ray Data reads. Pure."""
    return "://" in source


def is_many(source: str, base_dir: Path | None) -> bool:
    """True when ``source`` names more than one file: a folder, a glob or a URI. Pure but for a stat."""
    if source.startswith("sklearn:"):
        return False
    if is_uri(source) or any(c in source for c in "*?["):
        return True
    return dataset_path(source, base_dir).is_dir()


def streaming_wanted(cfg: SweepConfig, base_dir: Path | None) -> bool:
    """Whether the sweep streams ``cfg.dataset.source`` (``base_dir``: the sweep file's folder).

    ``true``/``false`` as written; ``auto``: a folder, a glob or a URI streams, a single
    CSV/Parquet file never does (whatever its size: it loads in memory exactly as it did
    before ``dataset.streaming`` existed), nor a bundled ``sklearn:`` dataset. Runs in the
    driver; a stat at most (a missing file is refused by the reader that then opens it).

    Raises:
        DataError: ``streaming: true`` on a bundled ``sklearn:`` dataset.
    """
    mode = cfg.dataset.streaming
    source = cfg.dataset.source
    if source.startswith("sklearn:"):
        if mode is True:
            raise DataError(
                "a bundled dataset is loaded in memory, it cannot stream",
                source=source,
                key="dataset.streaming",
                fix="remove dataset.streaming or point dataset.source to Parquet or CSV files",
            )
        return False
    if mode != "auto":
        return bool(mode)
    return is_many(source, base_dir)


def refuse_in_memory(cfg: SweepConfig, source: str | None) -> None:
    """Refuse to load in memory a dataset the config streams (``source``: the file the rows were
    read from, None for rows built in code): the in-memory path would hold what
    ``dataset.streaming: true`` keeps out of memory. ``auto`` never streams one file, so it
    is never refused here. Runs in the driver; reads nothing.

    Raises:
        DataError: ``streaming: true`` on a file.
    """
    if cfg.dataset.streaming is not True or source is None or source.startswith("sklearn:"):
        return
    raise DataError(
        "this dataset streams (dataset.streaming is true), but this step loads it in memory",
        source=source,
        key="dataset.streaming",
        fix="set dataset.streaming: false (or auto) to load it in memory",
    )
