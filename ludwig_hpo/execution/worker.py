"""The one worker entry of every trial executor: resolve the trial's config, attach the
sweep's batch-size cache, run :func:`~ludwig_hpo.train.loop.train_loop`.

Used on every rank by the fresh Ray Train job (:mod:`ludwig_hpo.execution.fresh`), by the
Tune trial actor of a fresh 1-worker trial (:mod:`ludwig_hpo.execution.trainable`), by a
warm group's ranks (:mod:`ludwig_hpo.execution.pool_worker`) and by the Ray-free local
processes (:mod:`ludwig_hpo.execution.local`). Each of those only adapts the per-epoch
reports to its own channel. Imports no Ray (the cache view imports it only when a cache
handle is given).
"""

from __future__ import annotations

import random

import numpy as np
import torch

from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.execution.cache import cache_for
from ludwig_hpo.execution.spec import TrialSpec
from ludwig_hpo.train.loop import Reporter, train_loop
from ludwig_hpo.train.stream_feed import JobStream


def run_worker(
    spec: TrialSpec,
    data: PreparedData | JobStream,
    device: torch.device,
    report: Reporter,
    *,
    local_world_size: int | None = None,
) -> torch.nn.Module:
    """Train ``spec``'s trial on this rank, calling ``report`` after every epoch.

    Runs on every rank of the trial (or alone), inside an initialized ``torch.distributed``
    process group when the trial has more than one rank. Python's and numpy's global random
    state are seeded from ``trainer.seed`` plus the job's seed offset first: a process that
    runs several trials (a warm group's worker) must not carry one trial's random state into
    the next, and every executor gives a trial the same state (``train_loop`` seeds torch itself).

    Args:
        spec: the trial; its ``params`` are applied to its ``raw`` sweep mapping here.
        data: the sweep's prepared data (the same object on every rank), or this rank's
            streamed shard of the job (:mod:`ludwig_hpo.train.stream_feed`).
        device: this rank's device (``cuda:<i>`` or ``cpu``).
        report: the executor's per-epoch reporter (see :data:`~ludwig_hpo.train.loop.Reporter`).
        local_world_size: ranks on this machine (they split its CPU memory budget); defaults
            to the world size.

    Returns:
        The trained model, unwrapped, on ``device``.

    Raises:
        ConfigError: the sampled parameters do not validate together.
        FloatingPointError: the training loss became NaN or infinite.
        BatchSizeError: ``batch_size: auto`` found no size that fits in memory.
        Exception: whatever ``report`` raised (e.g. a pooled trial's stop signal).
    """
    cfg = resolve_trial_config(spec.raw, spec.params)
    seed = cfg.trainer.seed + spec.job.seed_offset
    random.seed(seed)
    np.random.seed(seed % 2**32)
    return train_loop(
        cfg,
        data,
        spec.job,
        report,
        device=device,
        cache=cache_for(spec.batch_cache),
        local_world_size=local_world_size,
    )
