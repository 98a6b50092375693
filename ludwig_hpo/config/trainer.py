"""The ``trainer`` section: how one trial trains (optimizer, schedule, stopping, batch size,
precision, epochs), with Ludwig's keys and defaults. Typed, frozen; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ludwig_hpo.config.backend import BackendConfig
from ludwig_hpo.config.base import KeyedValueError, RuleError, _Base
from ludwig_hpo.config.metrics import METRICS
from ludwig_hpo.config.optimizers import AdamOptimizer, GradientClippingConfig, Optimizer

#: ``reduce_eval_split`` as Ludwig spells it -> the split's prefix in the epoch report.
SPLIT_PREFIX = {"training": "train", "validation": "validation"}
#: Ludwig's learning-rate decays not implemented here.
_UNSUPPORTED_DECAYS = ("one_cycle", "inverse_sqrt", "polynomial", "wsd")


def _none_is_default(value: Any) -> Any:
    # Ludwig reads a null section as its defaults (the section's own "disabled" values are keys)
    return {} if value is None else value


class LRSchedulerConfig(_Base):
    """The learning rate per optimizer step, as Ludwig's ``learning_rate_scheduler``: a linear
    warmup from 0 by ``1 / w`` per step, ``w = max(warmup_fraction x total steps,
    warmup_evaluations x steps per epoch)`` (a fraction of a step kept, as in Ludwig), for
    ``ceil(w)`` steps, then ``decay`` from the warmup's end: null (constant),
    ``linear`` (to 0 at the last step), ``exponential`` (``decay_rate ** (1 + step /
    decay_steps)``, the exponent rounded up with ``staircase``) or ``cosine`` (annealing to
    ``eta_min`` with warm restarts every ``t_0`` steps, default one epoch, each period ``t_mult``
    times longer). ``reduce_on_plateau``: how many times at most the rate is multiplied by
    ``reduce_on_plateau_rate`` when ``reduce_eval_metric`` of ``trainer.validation_field`` on
    ``reduce_eval_split`` (``training`` or ``validation``) did not improve (by more than a
    relative 1e-4) for more than ``reduce_on_plateau_patience`` epochs. Total steps:
    ``train_steps``, else ``epochs`` x steps per epoch. A null section is these defaults.
    """

    decay: Literal["linear", "exponential", "cosine"] | None = None
    decay_rate: float = Field(default=0.96, ge=0, le=1)
    decay_steps: int = Field(default=10000, ge=1)
    staircase: bool = False
    warmup_evaluations: float = Field(default=0, ge=0)
    warmup_fraction: float = Field(default=0.0, ge=0)
    reduce_on_plateau: int = Field(default=0, ge=0)
    reduce_on_plateau_patience: int = Field(default=10, ge=0)
    reduce_on_plateau_rate: float = Field(default=0.1, ge=0, le=1)
    reduce_eval_metric: str = "loss"
    reduce_eval_split: str = "training"
    t_0: int | None = Field(default=None, ge=1)
    t_mult: int = Field(default=1, ge=1)
    eta_min: float = Field(default=0.0, ge=0, le=1)

    @field_validator("decay", mode="before")
    @classmethod
    def _decay_known(cls, v: Any) -> Any:
        if v in _UNSUPPORTED_DECAYS:
            raise RuleError(
                f"learning_rate_scheduler.decay: {v} is not supported yet",
                fix="use linear, exponential, cosine or null",
            )
        return v

    @field_validator("reduce_eval_split")
    @classmethod
    def _split_known(cls, v: str) -> str:
        if v == "test":
            raise RuleError(
                "learning_rate_scheduler.reduce_eval_split: test is not supported yet (a search never scores the "
                "test split while it trains)",
                fix="use training or validation",
            )
        if v not in SPLIT_PREFIX:
            raise RuleError(f"unknown split {v!r}", fix="use training or validation")
        return v


#: Ludwig's multi-task loss balancing strategies (``ludwig/modules/loss_balancing.py``); only
#: ``none``, the ``loss.weight``-weighted sum of the output losses, is trained.
LossBalancing = Literal["none", "log_transform", "uncertainty", "famo", "gradnorm", "nash_mtl", "pareto_mtl"]

#: Ludwig trainer keys accepted at their inert value only: ``{key: (inert value, why)}``.
_NOT_YET: dict[str, tuple[Any, str]] = {
    "steps_per_checkpoint": (0, "evaluation happens once per epoch"),
    "checkpoints_per_epoch": (0, "evaluation happens once per epoch"),
    "increase_batch_size_on_plateau": (0, "the batch size is fixed for a trial"),
    "bucketing_field": (None, "batches are drawn at random"),
    "compile": (False, "the model runs eagerly"),
    "effective_batch_size": ("auto", "set batch_size and gradient_accumulation_steps"),
    "skip_all_evaluation": (False, "every epoch is scored"),
    "enable_profiling": (False, "no profiler runs"),
}


class TrainerConfig(_Base):
    """Training of one trial, with Ludwig's keys and defaults. ``batch_size`` is per DDP worker;
    ``auto`` lets each trial pick it by a throughput search (at most ``max_batch_size``). An
    epoch trains every training row, its short last batch too unless that batch holds a single
    row (Ludwig's batcher).
    ``eval_batch_size`` null or 0: the training batch size. ``train_steps``: stop after exactly
    that many optimizer steps (it overrides ``epochs``; the last epoch may be partial).

    ``early_stop``: stop a trial after that many epochs in a row without an improvement of
    ``validation_metric`` of ``validation_field`` on the validation split (-1 or 0: never; a
    NaN counts as 0, as in Ludwig); the trial ends finished, stopped by ``early_stop``.
    ``evaluate_training_set``: also score the whole training split each epoch (``train/...``).
    ``regularization_type`` / ``regularization_lambda``: lambda x the sum of all weights'
    absolute values (``l1``), squares (``l2``) or both (``l1_l2``) added to the training loss.
    ``gradient_clipping``: see :class:`~ludwig_hpo.config.optimizers.GradientClippingConfig`.
    ``should_shuffle: false`` keeps the training rows in the split's order.

    ``precision``: ``fp32``, or autocast to ``bf16`` / ``fp16`` (``fp16`` with a gradient
    scaler). ``use_mixed_precision: true`` is ``precision: fp16`` on a GPU and does nothing on a
    CPU (as in Ludwig). ``gradient_accumulation_steps``: batches per optimizer step (gradients
    are not synchronized across workers on the accumulating batches). ``learning_rate_scaling``:
    the learning rate actually used is ``learning_rate`` x 1 (``constant``), x world size
    (``linear``, Ludwig's default) or x sqrt(world size) (``sqrt``). ``nan_policy``: what a NaN
    or infinite training loss does (``fail`` the trial, or ``skip_batch``).
    ``learning_rate: auto``, sub-epoch evaluation (``steps_per_checkpoint``,
    ``checkpoints_per_epoch``), ``increase_batch_size_on_plateau``, ``bucketing_field``,
    ``compile``, ``effective_batch_size`` and profiling are not supported yet (an error says so).
    ``loss_balancing``: Ludwig's default ``none`` (the weighted sum); its other strategies are
    not supported yet.
    ``type``: ``trainer`` (model_type ecd) or ``finetune`` (model_type llm, its default):
    Ludwig's fine-tuning trainer, these keys with ``eval_batch_size`` 2 by default;
    ``eval_generation_samples`` (ours) validation rows are generated at each evaluation for the
    generated-output metrics (0: none).
    ``enable_gradient_checkpointing``: recompute each transformer block's activations in the
    backward pass (pretrained encoders' layers and our transformer encoder and combiners' blocks),
    trading compute for activation memory; a model without such a block refuses it.
    """

    type: Literal["trainer", "finetune"] = "trainer"
    epochs: int = Field(default=100, ge=1, le=100_000)
    train_steps: int | None = Field(default=None, ge=1)
    learning_rate: float = Field(default=1e-3, gt=0)
    learning_rate_scheduler: Annotated[LRSchedulerConfig, BeforeValidator(_none_is_default)] = LRSchedulerConfig()
    batch_size: Union[Literal["auto"], Annotated[int, Field(ge=1)]] = "auto"
    max_batch_size: int = Field(default=1024, ge=1)
    eval_batch_size: Union[Literal["auto"], Annotated[int, Field(ge=0)], None] = None
    optimizer: Optimizer = AdamOptimizer(type="adam")
    gradient_clipping: Annotated[GradientClippingConfig, BeforeValidator(_none_is_default)] = GradientClippingConfig()
    early_stop: int = Field(default=5, ge=-1)
    loss_balancing: LossBalancing = "none"
    validation_field: str = "combined"
    validation_metric: str = "loss"
    evaluate_training_set: bool = False
    regularization_type: Literal["l1", "l2", "l1_l2"] | None = "l2"
    regularization_lambda: float = Field(default=0.0, ge=0, le=1)
    should_shuffle: bool = True
    seed: int = 42
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    use_mixed_precision: bool = False
    gradient_accumulation_steps: int = Field(default=1, ge=1, le=4096)
    learning_rate_scaling: Literal["constant", "linear", "sqrt"] = "linear"
    #: a NaN or infinite training loss: ``fail`` the trial (FAILED, the scheduler counts it as
    #: the worst value), or ``skip_batch``: skip that batch's optimizer step (counted in
    #: ``nonfinite_batches``) and fail only when a whole epoch is non-finite.
    nan_policy: Literal["fail", "skip_batch"] = "fail"
    steps_per_checkpoint: int = Field(default=0, ge=0)
    checkpoints_per_epoch: int = Field(default=0, ge=0)
    increase_batch_size_on_plateau: int = Field(default=0, ge=0)
    increase_batch_size_on_plateau_patience: int = Field(default=5, ge=0)
    increase_batch_size_on_plateau_rate: float = Field(default=2.0, ge=0)
    increase_batch_size_on_plateau_max: int = Field(default=512, ge=1)
    increase_batch_size_eval_metric: str = "loss"
    increase_batch_size_eval_split: str = "training"
    bucketing_field: str | None = None
    compile: bool = False
    effective_batch_size: Union[Literal["auto"], Annotated[int, Field(ge=1)]] = "auto"
    #: recompute each transformer block in the backward pass (see ``ludwig_hpo.train.recompute``)
    enable_gradient_checkpointing: bool = False
    skip_all_evaluation: bool = False
    enable_profiling: bool = False
    #: ``finetune`` (model_type llm): validation rows whose outputs are generated at each
    #: evaluation, for the generated-output metrics (``exact_match``, ``rouge_l``); 0: none
    eval_generation_samples: int = Field(default=32, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _ludwig_spellings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("type") == "finetune":
            if "eval_batch_size" not in data:
                data = {**data, "eval_batch_size": 2}  # Ludwig's FineTuneTrainerConfig default
            if "base_learning_rate" in data:  # Ludwig's finetune trainer carries it at 0, unread
                if data["base_learning_rate"] not in (0, 0.0):
                    raise KeyedValueError(
                        "base_learning_rate is not supported (the learning rate is trainer.learning_rate)",
                        ("trainer", "base_learning_rate"),
                        fix="remove base_learning_rate and set trainer.learning_rate",
                    )
                data = {k: v for k, v in data.items() if k != "base_learning_rate"}
        if "layers_to_freeze_regex" in data:
            raise KeyedValueError(
                "layers_to_freeze_regex (freezing the layers a regex names) is not supported yet",
                ("trainer", "layers_to_freeze_regex"),
                fix="remove it: an adapter freezes the base weights, and without one every weight trains",
            )
        if data.get("learning_rate") == "auto":
            raise KeyedValueError(
                "learning_rate: auto (Ludwig's learning-rate search) is not supported yet",
                ("trainer", "learning_rate"),
                fix="set a number (Ludwig's default is 0.001) or search it in hyperopt.parameters",
            )
        if data.get("gradient_accumulation_steps") == "auto":
            raise KeyedValueError(
                "gradient_accumulation_steps: auto is not supported yet",
                ("trainer", "gradient_accumulation_steps"),
                fix="set an integer (1: one batch per optimizer step)",
            )
        opt = data.get("optimizer")
        if isinstance(opt, dict) and "lr" in opt:
            # the torch spelling inside the optimizer: the trainer's learning rate
            lr = opt["lr"]
            if "learning_rate" in data and data["learning_rate"] != lr:
                raise KeyedValueError(
                    f"the learning rate is set twice: trainer.learning_rate {data['learning_rate']} and "
                    f"trainer.optimizer.lr {lr}",
                    ("trainer", "optimizer", "lr"),
                    fix="keep only trainer.learning_rate",
                )
            data = {**data, "learning_rate": lr, "optimizer": {k: v for k, v in opt.items() if k != "lr"}}
        return data

    @model_validator(mode="after")
    def _supported(self) -> TrainerConfig:
        if self.loss_balancing != "none":
            raise KeyedValueError(
                f"{self.loss_balancing!r} is not supported yet (the combined loss is the loss.weight-weighted "
                "sum of the output losses)",
                ("trainer", "loss_balancing"),
                fix="remove it or set loss_balancing: none",
            )
        for key, (inert, why) in _NOT_YET.items():
            if getattr(self, key) != inert:
                raise KeyedValueError(
                    f"{key} is not supported yet ({why})", ("trainer", key), fix=f"remove it or set it to {inert!r}"
                )
        if self.use_mixed_precision and "precision" in self.model_fields_set and self.precision != "fp16":
            raise KeyedValueError(
                f"use_mixed_precision: true is fp16 autocast, but precision is {self.precision}",
                ("trainer", "use_mixed_precision"),
                fix="keep only one of use_mixed_precision and precision",
            )
        if self.optimizer.type == "lbfgs" and (self.gradient_accumulation_steps > 1 or self.precision != "fp32"):
            raise KeyedValueError(
                "lbfgs re-evaluates each batch inside its step: it takes neither gradient accumulation nor "
                "mixed precision",
                ("trainer", "optimizer", "type"),
                fix="set gradient_accumulation_steps: 1 and precision: fp32, or use another optimizer",
            )
        if self.optimizer.type == "lbfgs" and self.nan_policy == "skip_batch":
            raise KeyedValueError(
                "lbfgs steps inside each batch, so a non-finite batch cannot be skipped",
                ("trainer", "nan_policy"),
                fix="use nan_policy: fail with lbfgs",
            )
        return self


def check_validation_target(trainer: TrainerConfig, outputs: Mapping[str, str], backend: BackendConfig) -> None:
    """``validation_field`` names an output feature (or ``combined``) that reports
    ``validation_metric`` and ``learning_rate_scheduler.reduce_eval_metric``; ``lbfgs`` runs on
    one worker, and FSDP takes no weight regularization. Pure.

    Args:
        outputs: ``{output feature name: type}``.
        backend: the ``backend`` section (workers and strategy).

    Raises:
        KeyedValueError: at the offending key, with the allowed values.
    """
    field = trainer.validation_field
    if field != "combined" and field not in outputs:
        raise KeyedValueError(
            f"{field!r} is not an output feature; use one of {sorted(outputs) + ['combined']}",
            ("trainer", "validation_field"),
        )
    kind = "combined" if field == "combined" else outputs[field]
    allowed = METRICS.get(kind, {})
    checks = (
        (trainer.validation_metric, ("trainer", "validation_metric")),
        (
            trainer.learning_rate_scheduler.reduce_eval_metric,
            ("trainer", "learning_rate_scheduler", "reduce_eval_metric"),
        ),
    )
    for metric, where in checks:
        if metric not in allowed:
            raise KeyedValueError(
                f"{metric!r} is not reported for {field!r} (a {kind} output); use one of {sorted(allowed)}", where
            )
    if trainer.optimizer.type == "lbfgs" and backend.num_workers > 1:
        # its line search runs on each worker's own loss: the workers could take different steps
        raise KeyedValueError(
            f"lbfgs trains on one worker, but backend.num_workers is {backend.num_workers}",
            ("trainer", "optimizer", "type"),
            fix="set backend.num_workers: 1, or use another optimizer",
        )
    if trainer.regularization_lambda > 0 and trainer.regularization_type and backend.strategy == "fsdp":
        raise KeyedValueError(
            "regularization_lambda with backend.strategy: fsdp is not supported yet (the weights are sharded)",
            ("trainer", "regularization_lambda"),
            fix="use strategy: ddp, or regularize through the optimizer's weight_decay",
        )


def larger_is_better(kind: str, metric: str) -> bool:
    """Whether a larger ``metric`` of an output of type ``kind`` (or ``combined``) is better. Pure."""
    return METRICS.get(kind, {}).get(metric, False)
