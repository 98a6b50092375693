"""The sweep's batch-size cache as a Ray actor, so every trial (on any node) shares it."""

from __future__ import annotations

from typing import Any


class BatchSizeCacheActor:
    """Holds tuned batch sizes by key; run as a Ray actor (``num_cpus=0``) by the sweep driver.

    ``stats()`` returns ``{"hits": n, "misses": n, "entries": n}``.
    """

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        value = self.entries.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.entries[key] = value

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self.entries)}


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


def start_cache_actor() -> Any:
    """Start the sweep's cache actor (driver only, inside a running Ray cluster); returns its handle."""
    import ray

    return ray.remote(num_cpus=0)(BatchSizeCacheActor).remote()
