"""Typed, frozen sweep-file schema (pydantic): :class:`SweepConfig` and its top-level sections
(dataset, combiner, trainer, backend, k-fold, tracking, report, Ludwig's ``preprocessing``).
Features live in :mod:`ludwig_hpo.config.features`, the search in
:mod:`ludwig_hpo.config.hyperopt`. No I/O: the loader is the only YAML reader.

Every model rejects unknown keys. Cross-field rules that need the whole file (feature
names, metric vs goal, scheduler vs epochs) live in :class:`SweepConfig`'s validator;
parameter paths are checked by the loader through :mod:`ludwig_hpo.config.paths`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from ludwig_hpo.config.base import KeyedValueError, RuleError, _Base
from ludwig_hpo.config.features import DefaultsConfig, InputFeature, OutputFeature, apply_feature_defaults
from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.paths import RawMapping
from ludwig_hpo.config.schedulers import PbtScheduler, check_epochs

#: Metrics each output feature type reports, and whether larger is better.
METRICS: dict[str, dict[str, bool]] = {
    "category": {"loss": False, "accuracy": True},
    "binary": {"loss": False, "accuracy": True, "roc_auc": True},
    "number": {"loss": False, "mae": False},
    "combined": {"loss": False},
}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# ---------------------------------------------------------------------------- data
class SplitConfig(_Base):
    """Fractions of rows for train / validation / test (sum to 1), and the split seed."""

    train: float = Field(default=0.7, gt=0, lt=1)
    validation: float = Field(default=0.15, gt=0, lt=1)
    test: float = Field(default=0.15, gt=0, lt=1)
    seed: int = 42

    @model_validator(mode="after")
    def _sums_to_one(self) -> SplitConfig:
        total = self.train + self.validation + self.test
        if abs(total - 1.0) > 1e-6:
            raise ValueError(
                f"train + validation + test must sum to 1, but got {total:g} "
                f"(train={self.train:g}, validation={self.validation:g}, test={self.test:g})"
            )
        return self


class DatasetConfig(_Base):
    """Where rows come from: a CSV or Parquet path (relative to the sweep file), or
    ``sklearn:<name>`` for a dataset bundled with scikit-learn (digits, breast_cancer, wine)."""

    source: str
    split: SplitConfig = SplitConfig()


# ---------------------------------------------------------------------------- model
class CombinerConfig(_Base):
    """``concat``: concatenate encoder outputs, then ``num_fc_layers`` x (Linear(output_size), ReLU, dropout)."""

    type: Literal["concat"] = "concat"
    num_fc_layers: int = Field(default=1, ge=0, le=8)
    output_size: int = Field(default=64, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)


# ---------------------------------------------------------------------------- trainer
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


class KFoldConfig(_Base):
    """After the search, re-run the ``top_k`` best configurations with ``k``-fold
    cross-validation on train+validation and once on the held-out test split."""

    k: int = Field(default=5, ge=2, le=100)
    top_k: int = Field(default=3, ge=1, le=100)


class TrackingConfig(_Base):
    """MLflow: ``uri`` null = an embedded SQLite store in the sweep's output directory;
    ``register_model``: a registered-model name under which the best model becomes a new version."""

    uri: str | None = None
    experiment: str | None = None
    register_model: str | None = None


class ReportConfig(_Base):
    """``enabled``: write ``report.html`` after the search (and log it to the parent MLflow run)."""

    enabled: bool = True


# ---------------------------------------------------------------------------- Ludwig preprocessing
class LudwigSplitConfig(_Base):
    """Ludwig's ``preprocessing.split``: ``random`` (``probabilities`` train/validation/test),
    ``stratify`` (random, stratified on ``column``) or ``fixed`` (``column`` holds 0 = train,
    1 = validation, 2 = test for each row)."""

    type: Literal["random", "stratify", "fixed"] = "random"
    column: str | None = None
    probabilities: tuple[float, float, float] = (0.7, 0.1, 0.2)

    @model_validator(mode="after")
    def _fits(self) -> LudwigSplitConfig:
        if self.type in ("fixed", "stratify") and not self.column:
            raise RuleError(f"split type {self.type!r} needs column", fix="add column: <the split column's name>")
        if self.type == "random" and self.column:
            raise RuleError("column does not apply to a random split", fix="remove column, or use type: fixed")
        if abs(sum(self.probabilities) - 1) > 1e-6 or min(self.probabilities) <= 0:
            raise RuleError(
                f"probabilities must be three positive fractions summing to 1, got {list(self.probabilities)}",
                fix="use e.g. [0.7, 0.1, 0.2]",
            )
        return self


class GlobalPreprocessing(_Base):
    """Ludwig's top-level ``preprocessing``: only ``split`` is read."""

    split: LudwigSplitConfig = LudwigSplitConfig()


def _raw_scheduler(data: Any) -> RawMapping:
    """The raw scheduler mapping (``hyperopt.scheduler`` or Ludwig's ``hyperopt.executor.scheduler``)."""
    hp = data.get("hyperopt") if isinstance(data, dict) else None
    if not isinstance(hp, dict):
        return {}
    sch = hp.get("scheduler")
    if sch is None and isinstance(hp.get("executor"), dict):
        sch = hp["executor"].get("scheduler")
    return sch if isinstance(sch, dict) else {}


# ---------------------------------------------------------------------------- root
class SweepConfig(_Base):
    """A whole sweep file, validated. ``base_dir`` (not a key) is the sweep file's folder."""

    name: str
    dataset: DatasetConfig
    input_features: list[InputFeature] = Field(min_length=1)
    output_features: list[OutputFeature] = Field(min_length=1)
    combiner: CombinerConfig = CombinerConfig()
    trainer: TrainerConfig = TrainerConfig()
    backend: BackendConfig = BackendConfig()
    hyperopt: HyperoptConfig
    kfold: KFoldConfig | None = None
    tracking: TrackingConfig = TrackingConfig()
    report: ReportConfig = ReportConfig()
    output_dir: str | None = None
    defaults: DefaultsConfig | None = None
    preprocessing: GlobalPreprocessing | None = None
    model_type: Literal["ecd"] = "ecd"
    ludwig_version: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _epochs_from_max_t(cls, data: Any) -> Any:
        # Ludwig's rule: scheduler.max_t alone sets the epochs; trainer.epochs alone sets max_t.
        sch = _raw_scheduler(data)
        trainer = data.get("trainer") or {} if isinstance(data, dict) else None
        max_t = sch.get("max_t")
        if (
            max_t is not None
            and sch.get("time_attr", "epoch") != "time_total_s"
            and isinstance(trainer, dict)
            and "epochs" not in trainer
        ):
            return {**data, "trainer": {**trainer, "epochs": max_t}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        # defaults.<type>.<section> fills every feature of that type; the feature's own values win.
        if not isinstance(data, dict) or not isinstance(data.get("defaults"), dict):
            return data
        return apply_feature_defaults(data)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME_RE.match(v) or ".." in v:
            raise ValueError(f"name {v!r} must be letters, digits, '_', '.', '-' (it names the output folder)")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> SweepConfig:
        if self.preprocessing is not None and "split" in self.dataset.model_fields_set:
            raise KeyedValueError(
                "the split is set twice: dataset.split and preprocessing.split",
                ("preprocessing", "split"),
                fix="keep only one of them",
            )
        names = [f.name for f in (*self.input_features, *self.output_features)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise KeyedValueError(
                f"feature names must be unique, but {dupes} appear more than once", ("input_features",)
            )
        hp = self.hyperopt
        outputs = {f.name: f.type for f in self.output_features}
        if hp.output_feature != "combined" and hp.output_feature not in outputs:
            raise KeyedValueError(
                f"{hp.output_feature!r} is not an output feature; use one of {sorted(outputs) + ['combined']}",
                ("hyperopt", "output_feature"),
            )
        ftype = "combined" if hp.output_feature == "combined" else outputs[hp.output_feature]
        allowed = METRICS[ftype]
        if hp.metric not in allowed:
            raise KeyedValueError(
                f"{hp.metric!r} is not reported for a {ftype} output; use one of {sorted(allowed)}",
                ("hyperopt", "metric"),
            )
        want = "maximize" if allowed[hp.metric] else "minimize"
        if hp.goal != want:
            raise KeyedValueError(
                f"goal is {hp.goal!r} but {hp.metric!r} is better when "
                f"{'larger' if want == 'maximize' else 'smaller'}; set goal: {want}",
                ("hyperopt", "goal"),
            )
        for i, o in enumerate(hp.objectives):
            where = ("hyperopt", "metric", i)
            feature = o.output_feature or hp.output_feature
            if feature != "combined" and feature not in outputs:
                raise KeyedValueError(
                    f"{feature!r} is not an output feature; use one of {sorted(outputs) + ['combined']}", where
                )
            kind = "combined" if feature == "combined" else outputs[feature]
            if o.metric not in METRICS[kind]:
                raise KeyedValueError(
                    f"{o.metric!r} is not reported for a {kind} output; use one of {sorted(METRICS[kind])}", where
                )
            better = "maximize" if METRICS[kind][o.metric] else "minimize"
            if o.goal is not None and o.goal != better:
                raise KeyedValueError(
                    f"goal of {o.metric!r} is {o.goal!r} but it is better when "
                    f"{'larger' if better == 'maximize' else 'smaller'}; set goal: {better}",
                    where,
                )
        check_epochs(hp.scheduler, self.trainer.epochs)
        multi_worker_fresh = self.backend.trial_executor == "fresh" and self.backend.num_workers > 1
        if isinstance(hp.scheduler, PbtScheduler) and multi_worker_fresh:
            raise KeyedValueError(
                "pbt needs the checkpoints of multi-worker trials in Tune, which only pooled worker groups hand over",
                ("backend", "trial_executor"),
                fix="use trial_executor: pooled (or auto) with pbt",
            )
        return self

    @property
    def objectives(self) -> list[tuple[str, str]]:
        """``[(reported key, goal)]`` of every optimized metric: the primary one, or each of a
        multi-objective search's metrics in the order written."""
        hp = self.hyperopt
        if not hp.multi_objective:
            return [(hp.metric_key, hp.goal)]
        outputs = {f.name: f.type for f in self.output_features}
        out = []
        for o in hp.objectives:
            feature = o.output_feature or hp.output_feature
            kind = "combined" if feature == "combined" else outputs[feature]
            out.append((hp.objective_key(o), "maximize" if METRICS[kind][o.metric] else "minimize"))
        return out

    @property
    def goal_sign(self) -> float:
        """+1 when smaller is better, -1 when larger is better (multiply to minimize)."""
        return 1.0 if self.hyperopt.goal == "minimize" else -1.0
