"""The sweep's model checks (:func:`ludwig_hpo.model.checks.check_prepared`) in a short-lived
process of their own. Driver only.

The checks build the model's losses and encoders, so they import torch (and, for Hugging Face
encoders, transformers). Run in the driver, those imports would stay resident for the whole
sweep although the driver never trains; in a child they are gone before the sweep's cluster
starts. The child is spawned (a fresh interpreter), not forked: the driver may hold threads
(an existing cluster's Ray client, MLflow's).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ludwig_hpo.config.schema import SweepConfig


def _check(cfg: SweepConfig, meta: Mapping[str, Any], source: str, network: bool) -> list[str]:
    from ludwig_hpo.model.checks import check_prepared

    return check_prepared(cfg, meta, source, network=network)


def check_model(cfg: SweepConfig, meta: Mapping[str, Any], source: str, *, network: bool = True) -> list[str]:
    """:func:`~ludwig_hpo.model.checks.check_prepared` of ``cfg`` against the prepared data's
    ``meta`` (``source``: the sweep file the errors name), run in a spawned child process that
    ends when it returns. Driver only; blocks until the child is done.

    Returns:
        the checks' notes.

    Raises:
        ConfigError: what the checks raise (it crosses the process boundary unchanged).
        RuntimeError: the child process died without an answer.
    """
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(_check, cfg, meta, source, network).result()
        except BrokenProcessPool as e:
            raise RuntimeError(f"the model checks' process died before it answered ({e})") from None
