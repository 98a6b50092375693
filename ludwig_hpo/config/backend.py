"""The ``backend`` section: how many workers train each trial, on what, with which strategy.
Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field

from ludwig_hpo.config.base import _Base


class BackendConfig(_Base):
    """How each trial runs: ``num_workers`` workers (gloo on CPU, NCCL on GPU), one GPU each.

    ``strategy``: ``ddp`` (every worker holds the whole model; gradients are all-reduced) or
    ``fsdp`` (parameters, gradients and optimizer state sharded across the workers).
    """

    num_workers: int = Field(default=2, ge=1, le=4096)
    use_gpu: Union[Literal["auto"], bool] = "auto"
    strategy: Literal["ddp", "fsdp"] = "ddp"
    cpus_per_worker: float = Field(default=1.0, gt=0)
    #: ``fresh``: a new Ray Train job per trial; ``pooled``: warm worker groups started once
    #: per sweep; ``auto``: pooled on CPU, fresh on GPU.
    trial_executor: Literal["auto", "fresh", "pooled"] = "auto"
    #: GPUs each worker reserves with ``use_gpu``: 1 (a GPU of its own; trials never share
    #: one) or a fraction (several workers, possibly of different trials, share a GPU).
    gpus_per_worker: float = Field(default=1.0, gt=0, le=1)
