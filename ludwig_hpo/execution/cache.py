"""The sweep's batch-size cache as a Ray actor, so every trial (on any node) shares it, backed
by the persisted batch-size files (:mod:`ludwig_hpo.train.batch_size_store`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ludwig_hpo.train.batch_size_store import read_sizes, user_cache_file, write_sizes
from ludwig_hpo.train.report_keys import SOURCE_PERSISTED_CACHE, SOURCE_SWEEP_CACHE


@dataclass(frozen=True)
class PersistedSizes:
    """Where a sweep's tuned batch sizes persist, and what it starts from.

    Attributes:
        files: the files every newly tuned size is written to (the output folder's, the user's).
        entries: sizes tuned by earlier sweeps (or by this sweep before it was interrupted),
            by cache key; empty when the user asked to tune again (``--retune-batch-size``).
        warnings: one line per file that could not be read (it was ignored).
    """

    files: tuple[Path, ...] = ()
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def load_persisted(sweep_file: Path, user_file: Path | None, *, retune: bool) -> PersistedSizes:
    """Read the persisted batch sizes of a sweep about to start (driver only).

    ``sweep_file``'s entries (the output folder's: a resumed sweep's own) win over
    ``user_file``'s. With ``retune`` neither is read (every key is probed again), but both are
    still written. ``user_file`` None: no user-wide cache.
    """
    files = (sweep_file,) if user_file is None else (sweep_file, user_file)
    if retune:
        return PersistedSizes(files=files)
    entries: dict[str, dict[str, Any]] = {}
    problems = []
    for path in reversed(files):  # the output folder's last: its entries win
        found, problem = read_sizes(path)
        entries.update(found)
        if problem:
            problems.append(problem)
    return PersistedSizes(files=files, entries=entries, warnings=tuple(problems))


def persisted_sizes(sweep_file: Path, *, auto: bool, retune: bool) -> PersistedSizes:
    """What a sweep's cache actor starts from (driver only): nothing when no batch size is
    ``auto``, else :func:`load_persisted` of the output folder's ``sweep_file`` and the user's
    file (:func:`~ludwig_hpo.train.batch_size_store.user_cache_file`)."""
    if not auto:
        return PersistedSizes()
    return load_persisted(sweep_file, user_cache_file(), retune=retune)


class BatchSizeCacheActor:
    """Holds tuned batch sizes by key; run as a Ray actor (``num_cpus=0``) by the sweep driver,
    on the driver's node (the persisted files are on its disk).

    ``get`` answers an entry with its ``source``: ``"persisted cache"`` for a size read from the
    persisted files, ``"sweep cache"`` for one an earlier trial of this sweep tuned. ``put``
    also merges the entry into every persisted file; a file that cannot be written is skipped
    from then on, and ``problems()`` says why (the driver prints it; the sweep goes on).
    ``stats()`` returns ``{"hits": n, "misses": n, "entries": n, "persisted_hits": n}``.
    """

    def __init__(self, persisted: PersistedSizes | None = None) -> None:
        persisted = persisted or PersistedSizes()
        self.persisted = {k: dict(v) for k, v in persisted.entries.items()}
        self.entries: dict[str, dict[str, Any]] = {}
        self.files = persisted.files
        self.unwritable: dict[Path, str] = {}
        self.hits = 0
        self.persisted_hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        if key in self.entries:
            self.hits += 1
            return {**self.entries[key], "source": SOURCE_SWEEP_CACHE}
        if key in self.persisted:
            self.hits += 1
            self.persisted_hits += 1
            return {**self.persisted[key], "source": SOURCE_PERSISTED_CACHE}
        self.misses += 1
        return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        value = {k: v for k, v in value.items() if k != "source"}
        self.entries[key] = value
        for path in self.files:
            if path in self.unwritable:
                continue
            try:
                write_sizes(path, {key: value})
            except OSError as e:
                self.unwritable[path] = f"{path}: cannot persist tuned batch sizes ({e.strerror or e})"

    def problems(self) -> list[str]:
        """One line per persisted file that could not be written."""
        return list(self.unwritable.values())

    def stats(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "entries": len(self.entries),
            "persisted_hits": self.persisted_hits,
        }


class RayBatchSizeCache:
    """The :class:`~ludwig_hpo.train.batch_size.BatchSizeCache` view of a cache actor's handle
    (used in Train workers)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def get(self, key: str) -> dict[str, Any] | None:
        import ray

        return ray.get(self.handle.get.remote(key))

    def put(self, key: str, value: dict[str, Any]) -> None:
        import ray

        ray.get(self.handle.put.remote(key, value))


def cache_for(handle: Any) -> RayBatchSizeCache | None:
    """The cache view of ``handle``, or None when the sweep has no cache actor."""
    return RayBatchSizeCache(handle) if handle is not None else None


def start_cache_actor(persisted: PersistedSizes | None = None) -> Any:
    """Start the sweep's cache actor (driver only, inside a running Ray cluster) on this node,
    seeded with ``persisted`` sizes and writing new ones to its files; returns its handle."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0)(BatchSizeCacheActor).options(scheduling_strategy=here).remote(persisted)
