"""The ``trainer`` section: how one trial trains (optimizer, batch size, precision, epochs).
Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from ludwig_hpo.config.base import _Base


class OptimizerConfig(_Base):
    """The optimizer: ``adam``, ``adamw`` or ``sgd``, with ``weight_decay`` (all three) and
    ``momentum`` (``sgd`` only)."""

    type: Literal["adam", "adamw", "sgd"] = "adam"
    weight_decay: float = Field(default=0.0, ge=0)
    momentum: float = Field(default=0.9, ge=0, lt=1)


class TrainerConfig(_Base):
    """Training of one trial. ``batch_size`` is per DDP worker; ``auto`` lets each trial pick it
    by a throughput search (at most ``max_batch_size``).

    ``precision``: ``fp32``, or autocast to ``bf16`` / ``fp16`` (``fp16`` with a gradient
    scaler). ``gradient_accumulation_steps``: batches per optimizer step (gradients are not
    synchronized across workers on the accumulating batches). ``learning_rate_scaling``: the
    learning rate actually used is ``learning_rate`` x 1 (``constant``), x world size
    (``linear``) or x sqrt(world size) (``sqrt``). ``nan_policy``: what a NaN or infinite
    training loss does (``fail`` the trial, or ``skip_batch``).
    """

    epochs: int = Field(default=10, ge=1, le=100_000)
    learning_rate: float = Field(default=1e-3, gt=0)
    batch_size: Union[Literal["auto"], Annotated[int, Field(ge=1)]] = "auto"
    max_batch_size: int = Field(default=1024, ge=1)
    eval_batch_size: Union[Literal["auto"], Annotated[int, Field(ge=1)]] = 512
    optimizer: OptimizerConfig = OptimizerConfig()
    seed: int = 42
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    gradient_accumulation_steps: int = Field(default=1, ge=1, le=4096)
    learning_rate_scaling: Literal["constant", "linear", "sqrt"] = "constant"
    #: a NaN or infinite training loss: ``fail`` the trial (FAILED, the scheduler counts it as
    #: the worst value), or ``skip_batch``: skip that batch's optimizer step (counted in
    #: ``nonfinite_batches``) and fail only when a whole epoch is non-finite.
    nan_policy: Literal["fail", "skip_batch"] = "fail"
