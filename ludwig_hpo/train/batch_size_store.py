"""Tuned batch sizes persisted across sweeps: JSON files that map a
:func:`~ludwig_hpo.train.batch_size.cache_key` to what the search chose.

Two files hold them: the output folder's (``SweepPaths.batch_sizes``: what this sweep tuned; a
resumed sweep reuses it) and the user's (:func:`user_cache_file`: every sweep on this machine).
The key holds everything that makes a size valid (model shape, device type and name, world
size, precision, torch version...), so an entry is only reused where it was measured.

A file is ``{"version": 1, "entries": {key: entry}}``; an entry is a JSON object with at least
``batch_size`` (int). Writers merge their entries into the file's current ones under an
advisory lock and replace the file atomically (a temporary file renamed over it), so two
sweeps writing at once never leave a torn file. A file that cannot be parsed is ignored with a
warning and rewritten by the next write. Plain Python; runs in the sweep driver and in its
batch-size cache actor.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: Overrides the folder of the user's persisted batch sizes (tests point it at a temporary folder).
CACHE_DIR_ENV = "LUDWIG_HPO_CACHE_DIR"
#: The user's persisted batch sizes, inside :func:`user_cache_dir`.
USER_CACHE_FILE = "batch_sizes.json"
#: The files' format; a file of another version is ignored (and rewritten by the next write).
FORMAT_VERSION = 1


def user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The user's cache folder of this package: ``$LUDWIG_HPO_CACHE_DIR`` if set, else
    ``$XDG_CACHE_HOME/ludwig_hpo``, else ``~/.cache/ludwig_hpo``. Pure (reads ``env``, default
    ``os.environ``)."""
    env = os.environ if env is None else env
    if env.get(CACHE_DIR_ENV):
        return Path(env[CACHE_DIR_ENV]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "ludwig_hpo"


def user_cache_file(env: Mapping[str, str] | None = None) -> Path:
    """The user's persisted batch sizes file (see :func:`user_cache_dir`)."""
    return user_cache_dir(env) / USER_CACHE_FILE


def read_sizes(path: Path) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The entries of ``path`` and a warning, or None.

    A missing file is no entries and no warning. A file that is not valid JSON, not of
    :data:`FORMAT_VERSION`, or whose entries lack an integer ``batch_size`` gives no entries
    (or only its valid ones) and a one-line warning naming the file; it never raises for its
    content. Raises nothing either for an unreadable file (the warning says why).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except OSError as e:
        return {}, f"{path}: cannot read the persisted batch sizes ({e.strerror or e}); they are ignored"
    try:
        doc = json.loads(text)
    except ValueError:
        return (
            {},
            f"{path}: the persisted batch sizes are not valid JSON; they are ignored (the next write replaces them)",
        )
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION or not isinstance(doc.get("entries"), dict):
        return {}, (
            f"{path}: not a version-{FORMAT_VERSION} batch-size file; it is ignored (the next write replaces it)"
        )
    entries = {
        k: v
        for k, v in doc["entries"].items()
        if isinstance(v, dict) and isinstance(v.get("batch_size"), int) and v["batch_size"] >= 1
    }
    bad = len(doc["entries"]) - len(entries)
    return entries, (f"{path}: {bad} malformed batch-size entries are ignored" if bad else None)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``<path>.lock`` (POSIX ``flock``; without it, writers
    still replace the file atomically but may drop each other's newest entries)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_sizes(path: Path, entries: Mapping[str, dict[str, Any]]) -> None:
    """Merge ``entries`` into ``path`` (creating it and its folder), atomically.

    Under the file's lock: read its current entries (a corrupt file counts as none), add or
    replace ``entries``, write everything to a temporary file in the same folder and rename it
    over ``path``. A reader at any moment sees the old file or the new one, never a mix.

    Raises:
        OSError: the folder cannot be created or written (the caller decides whether that
            matters; a sweep goes on without persisting).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        current, _ = read_sizes(path)
        current.update(entries)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"version": FORMAT_VERSION, "entries": current}, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
