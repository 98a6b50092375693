"""Whether a sweep streams its dataset (``dataset.streaming``): ``true``, ``false``, or ``auto``
(stream a folder, a glob, a URI, or a single file larger than :func:`stream_threshold`; load a
smaller single file in memory). Runs in the driver; reads no file, a stat and the machine's
memory size at most.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.sources import dataset_path
from ludwig_hpo.errors import DataError

#: Environment variable: the size in MB above which ``auto`` streams a single file, replacing
#: the rule of :func:`stream_threshold` (``0``: every file streams).
THRESHOLD_ENV = "LUDWIG_HPO_STREAM_ABOVE_MB"
#: ``auto`` streams a single file larger than this fraction of the machine's memory...
MEMORY_FRACTION = 0.1
#: ...or than this many bytes, whichever is larger (a smaller file loads in seconds).
THRESHOLD_FLOOR = 256 * 10**6


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


def _cgroup_limit() -> int | None:
    """The memory limit of this process's container (cgroup v2, then v1), None without one."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # v1 writes a huge number for "no limit"
            return int(text)
    return None


def machine_memory() -> int:
    """The bytes of memory this process may use: the machine's total, or its container's limit
    when lower. Total rather than available, so one file goes the same way on every run on a
    machine (its rows then split the same way when the sweep is resumed). Driver; reads
    ``/sys/fs/cgroup`` and psutil."""
    import psutil

    total = int(psutil.virtual_memory().total)
    limit = _cgroup_limit()
    return min(total, limit) if limit is not None else total


@dataclass(frozen=True)
class Threshold:
    """The size above which ``auto`` streams a single file.

    Attributes:
        bytes: the threshold in bytes.
        why: how it was chosen, for ``hpo validate`` (e.g. ``"a tenth of this machine's
            23.5 GB of memory"``).
    """

    bytes: int
    why: str


def stream_threshold(env: dict[str, str] | None = None) -> Threshold:
    """The size above which ``dataset.streaming: auto`` streams a single CSV/Parquet file:
    ``$LUDWIG_HPO_STREAM_ABOVE_MB`` MB when set, else a tenth of :func:`machine_memory`, at
    least 256 MB. A tenth because pandas holds a file at several times its size on disk
    (numbers as float64, text as Python objects) and the split and preprocessed copies come on
    top. ``env``: the environment (default ``os.environ``). Driver.

    Raises:
        DataError: ``$LUDWIG_HPO_STREAM_ABOVE_MB`` is not a number of MB >= 0.
    """
    raw = (os.environ if env is None else env).get(THRESHOLD_ENV)
    if raw is not None and raw.strip():
        try:
            mb = float(raw)
        except ValueError:
            mb = -1.0
        if not mb >= 0:  # also refuses nan
            raise DataError(
                f"{raw!r} is not a size in MB (an environment variable)",
                key=THRESHOLD_ENV,
                fix=f"set {THRESHOLD_ENV} to a number of MB >= 0 (0 streams every file), or unset it",
            )
        return Threshold(int(mb * 1e6), f"{THRESHOLD_ENV}={raw.strip()}")
    memory = machine_memory()
    fraction = int(memory * MEMORY_FRACTION)
    if fraction < THRESHOLD_FLOOR:
        return Threshold(
            THRESHOLD_FLOOR, f"the floor of {size_text(THRESHOLD_FLOOR)}; a tenth of {size_text(memory)} is less"
        )
    return Threshold(fraction, f"a tenth of this machine's {size_text(memory)} of memory")


def size_text(n: int | float) -> str:
    """``n`` bytes in kB, MB or GB, one decimal (``"41.2 GB"``). Pure."""
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


@dataclass(frozen=True)
class StreamChoice:
    """Whether a sweep streams its dataset, and why.

    Attributes:
        streams: the rows are read with Ray Data (else loaded in memory).
        why: the reason in words, for ``hpo validate`` (e.g. ``"dataset.streaming: auto and
            the file's 41.2 GB is above 2.5 GB (a tenth of ...)"``).
    """

    streams: bool
    why: str


def streaming_choice(cfg: SweepConfig, base_dir: Path | None, env: dict[str, str] | None = None) -> StreamChoice:
    """Whether the sweep streams ``cfg.dataset.source`` (``base_dir``: the sweep file's folder;
    ``env``: the environment, default ``os.environ``), and why.

    ``true``/``false`` as written; ``auto``: a folder, a glob or a URI streams (the in-memory
    loader reads one file); a single CSV/Parquet file streams when its size is above
    :func:`stream_threshold`, else loads in memory; a bundled ``sklearn:`` dataset never
    streams. Runs in the driver; a stat at most (a missing file is refused by the reader that
    then opens it).

    Raises:
        DataError: ``streaming: true`` on a bundled ``sklearn:`` dataset; a bad
            ``$LUDWIG_HPO_STREAM_ABOVE_MB``.
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
        return StreamChoice(False, "a bundled dataset")
    if mode != "auto":
        return StreamChoice(bool(mode), f"dataset.streaming: {str(mode).lower()}")
    if is_many(source, base_dir):
        return StreamChoice(True, "dataset.streaming: auto and a folder, glob or URI")
    path = dataset_path(source, base_dir)
    if not path.is_file():
        return StreamChoice(False, "dataset.streaming: auto and one file")  # its reader says it is missing
    size = path.stat().st_size
    threshold = stream_threshold(env)
    side = "above" if size > threshold.bytes else "not above"
    return StreamChoice(
        size > threshold.bytes,
        f"dataset.streaming: auto and the file's {size_text(size)} is {side} {size_text(threshold.bytes)} ({threshold.why})",
    )


def streaming_wanted(cfg: SweepConfig, base_dir: Path | None) -> bool:
    """:attr:`StreamChoice.streams` of :func:`streaming_choice`. Driver.

    Raises:
        DataError: as :func:`streaming_choice`.
    """
    return streaming_choice(cfg, base_dir).streams


def refuse_in_memory(cfg: SweepConfig, source: str | None) -> None:
    """Refuse to load in memory a dataset the config streams (``source``: the file the rows were
    read from, None for rows built in code): the in-memory path would hold what
    ``dataset.streaming: true`` keeps out of memory. ``auto`` is not refused here: a command
    that reads one file in memory (``hpo predict``, ``hpo evaluate``) is given a file by its
    user. Runs in the driver; reads nothing.

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
