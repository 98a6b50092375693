"""Keep a streamed dataset's prepared splits in Ray's object store when they fit in a share of it.

A streamed split is a lazy pipeline: every epoch of every trial reads its files and applies the
fitted preprocessing again. When the prepared rows of all splits together are small beside the
cluster's object store, that repeated pass is pure overhead, so the driver runs each split's
pipeline once (``Dataset.materialize()``) and hands the executors the materialized datasets
instead: the ranks still stream their shards (``streaming_split``), but from blocks already in
the store. This is Ray Data's own advice for data fed over many epochs ("materialize the
preprocessed dataset if it fits in the object store"). Data above the share stays a lazy
pipeline, so a dataset larger than the store is never held in it whole.

Runs in the driver, after :func:`~ludwig_hpo.execution.streaming.prepare.prepare_streamed`, on a
started Ray.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ludwig_hpo.data.streaming.record import SPLITS, StreamedData

#: The share of the cluster's object store the prepared splits may take to be kept there; the
#: rest stays for Ray Data's streaming buffers, the trials' objects and the warm pools.
CACHE_SHARE = 0.25
#: Rows of the training split read to estimate the prepared bytes per row.
SAMPLE_ROWS = 256


@dataclass(frozen=True)
class CacheDecision:
    """Whether the prepared splits were kept in the object store, and why (the console's line).

    Attributes:
        cached: the splits are materialized.
        estimate_bytes: the prepared splits' estimated size (all rows, all splits).
        limit_bytes: :data:`CACHE_SHARE` of the cluster's object store.
    """

    cached: bool
    estimate_bytes: int
    limit_bytes: int

    def text(self) -> str:
        """One console line: ``data: ...`` without the prefix."""
        size = f"{self.estimate_bytes / 2**20:.1f} MB prepared"
        limit = f"{CACHE_SHARE:.0%} of the object store ({self.limit_bytes / 2**20:.0f} MB)"
        if self.cached:
            return f"{size}, within {limit}: the splits are prepared once and kept in the object store"
        return f"{size}, above {limit}: every epoch streams from the files"


def _value_bytes(v: np.ndarray) -> int:
    if v.dtype != object:
        return int(v.nbytes)
    # strings, token lists: the payload, not the pointers numpy counts
    return int(sum(len(x) if isinstance(x, (str, bytes)) else np.asarray(x).nbytes for x in v.ravel()))


def prepared_row_bytes(streamed: StreamedData) -> float:
    """Bytes per prepared row, from the first :data:`SAMPLE_ROWS` rows of the training split
    (reads only those). 0.0 for an empty sample."""
    batch = streamed.datasets["train"].take_batch(SAMPLE_ROWS, batch_format="numpy")
    n = len(next(iter(batch.values()))) if batch else 0
    return sum(_value_bytes(np.asarray(v)) for v in batch.values()) / n if n else 0.0


def cache_if_fits(streamed: StreamedData, object_store_bytes: int) -> tuple[StreamedData, CacheDecision]:
    """``streamed`` with every split materialized in the object store when the prepared splits'
    estimate is at most :data:`CACHE_SHARE` of ``object_store_bytes``, else unchanged.

    Args:
        streamed: the lazy splits (:func:`~ludwig_hpo.execution.streaming.prepare.prepare_streamed`).
        object_store_bytes: the cluster's object store (``ray.cluster_resources()``).

    Returns:
        (the data to hand the executors, the decision). Materialized blocks are owned by the
        driver: they live as long as the sweep's driver holds the returned record.
    """
    estimate = int(prepared_row_bytes(streamed) * streamed.num_rows)
    limit = int(CACHE_SHARE * object_store_bytes)
    if estimate > limit:
        return streamed, CacheDecision(False, estimate, limit)
    datasets: dict[str, Any] = {name: streamed.datasets[name].materialize() for name in SPLITS}
    return dataclasses.replace(streamed, datasets=datasets), CacheDecision(True, estimate, limit)


def kept_in_store(streamed: StreamedData) -> bool:
    """True when :func:`cache_if_fits` kept ``streamed``'s splits in the object store."""
    from ray.data.dataset import MaterializedDataset

    return all(isinstance(streamed.datasets[name], MaterializedDataset) for name in SPLITS)
