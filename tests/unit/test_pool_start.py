"""A trial whose start fails in the pools actor (its streamed feeds could not be built, say)
fails with that error and leaves its group free, so the sweep's next trials start instead of
waiting for a group that never frees."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from ludwig_hpo.execution.pool import WorkerPools


def _pools(groups: int) -> WorkerPools:
    pools = WorkerPools(groups, num_workers=2, cpus_per_worker=1, use_gpu=False, data=[SimpleNamespace()])
    for g in pools.groups:  # already built: no worker actors needed to reach the feeds
        g.workers, g.builds = [object(), object()], 1
    return pools


def test_a_failed_feed_build_fails_the_trial_and_frees_its_group():
    pools = _pools(groups=1)
    calls = []

    async def broken_feeds(slot, build, job):
        calls.append((slot, build))
        raise ImportError("no module named 'pyarrow.dataset'")

    pools.feeds.for_run = broken_feeds

    async def two_trials():
        for trial in ("trial_1", "trial_2"):  # the second one needs the group the first one held
            with pytest.raises(ImportError, match="pyarrow.dataset"):
                await pools.start(SimpleNamespace(trial_id=trial, job=None))
            assert pools.groups[0].run is None and pools.runs == {}

    asyncio.run(two_trials())
    assert calls == [(0, 1), (0, 1)]
