"""Whether a sweep streams its dataset (``dataset.streaming``): ``true``, ``false``, or ``auto``
(stream a folder, a glob, a URI, or files whose total size is above :data:`STREAM_ABOVE_BYTES`;
load a smaller single file in memory as before). Runs in the driver; reads no file, only sizes.
"""

from __future__ import annotations

from pathlib import Path

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.sources import dataset_path
from ludwig_hpo.errors import DataError

#: ``dataset.streaming: auto`` streams a dataset larger than this on disk (1 GiB: loaded into
#: pandas a file takes a few times its size, and every DDP rank used to hold all of it).
STREAM_ABOVE_BYTES = 1 << 30


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

    ``true``/``false`` as written; ``auto``: a folder, a glob or a URI streams, a bundled
    ``sklearn:`` dataset never does, a single file streams when larger than
    :data:`STREAM_ABOVE_BYTES`. Runs in the driver (a missing file is refused
    by the reader that then opens it).

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
    if is_many(source, base_dir):
        return True
    path = dataset_path(source, base_dir)
    return path.is_file() and path.stat().st_size > STREAM_ABOVE_BYTES


def refuse_in_memory(cfg: SweepConfig, source: str | None) -> None:
    """Refuse to load in memory a dataset the config streams (``source``: the file the rows were
    read from, None for rows built in code): the in-memory path would hold what
    ``dataset.streaming`` keeps out of memory. Runs in the driver; a stat at most.

    Raises:
        DataError: ``streaming: true``, or ``auto`` and a file above :data:`STREAM_ABOVE_BYTES`.
    """
    mode = cfg.dataset.streaming
    if mode is False or source is None or source.startswith("sklearn:"):
        return
    path = Path(source)
    size = path.stat().st_size if path.is_file() else 0
    if mode is True or size > STREAM_ABOVE_BYTES:
        why = (
            "dataset.streaming is true"
            if mode is True
            else f"the file is {size / 2**30:.1f} GiB (auto streams above 1 GiB)"
        )
        raise DataError(
            f"this dataset streams ({why}), but this step loads it in memory",
            source=source,
            key="dataset.streaming",
            fix="set dataset.streaming: false to load it in memory",
        )
