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
import typing
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ludwig_hpo.config.backend import BackendConfig, apply_trial_resources
from ludwig_hpo.config.base import KeyedValueError, RuleError, _Base
from ludwig_hpo.config.combiners import CombinerConfig, ConcatCombiner, check_combiner
from ludwig_hpo.config.defaults import DefaultsConfig, apply_feature_defaults
from ludwig_hpo.config.features import InputFeature
from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.llm import (
    AdapterConfig,
    GenerationConfig,
    LLMTextOutputFeature,
    PromptConfig,
    QuantizationConfig,
    adapter_default_type,
    check_llm_features,
    check_llm_sections,
    check_quantization_backend,
    llm_defaults,
)
from ludwig_hpo.config.metrics import GENERATED_METRICS, METRICS
from ludwig_hpo.config.outputs import OutputFeature, OutputFeatures
from ludwig_hpo.config.paths import RawMapping
from ludwig_hpo.config.preprocessing import GlobalPreprocessing, check_balancing
from ludwig_hpo.config.schedulers import PbtScheduler, check_epochs
from ludwig_hpo.config.trainer import TrainerConfig, check_validation_target

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# ---------------------------------------------------------------------------- data
class SplitConfig(_Base):
    """Fractions of rows for train / validation / test (sum to 1), split stratified on the first
    output for classification; a file that sets none of them is split as Ludwig splits it
    (``preprocessing.split``). ``seed`` seeds either split (42, Ludwig's ``random_seed``)."""

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
    ``sklearn:<name>`` for a dataset bundled with scikit-learn (digits, breast_cancer, wine).
    ``streaming``: read the rows with Ray Data, split by a hash of each row and preprocess in
    one distributed pass instead of loading them into the driver; ``auto`` streams a folder, a
    glob, a URI, or a single file larger than a tenth of the machine's memory (at least 256 MB;
    ``$LUDWIG_HPO_STREAM_ABOVE_MB`` sets it), and loads a smaller file in memory
    (docs/streaming.md)."""

    source: str
    split: SplitConfig = SplitConfig()
    streaming: Literal["auto"] | bool = "auto"


class KFoldConfig(_Base):
    """After the search, re-run the ``top_k`` best configurations with ``k``-fold
    cross-validation on train+validation and once on the held-out test split. ``select``: which
    model the sweep ends with: ``cv``, the configuration with the best CV mean when a paired
    t-test over the folds tells it from the search's best (else the search's best), retrained
    on train+validation; ``search``, the search's best trial's own weights."""

    k: int = Field(default=5, ge=2, le=100)
    top_k: int = Field(default=3, ge=1, le=100)
    select: Literal["cv", "search"] = "cv"


class TrackingConfig(_Base):
    """MLflow: ``uri`` null = an embedded SQLite store in the sweep's output directory;
    ``register_model``: a registered-model name under which the best model becomes a new version."""

    uri: str | None = None
    experiment: str | None = None
    register_model: str | None = None


class ReportConfig(_Base):
    """``enabled``: write ``report.html`` after the search (and log it to the parent MLflow run)."""

    enabled: bool = True


def _raw_scheduler(data: Any) -> RawMapping:
    """The raw scheduler mapping (``hyperopt.scheduler`` or Ludwig's ``hyperopt.executor.scheduler``)."""
    hp = data.get("hyperopt") if isinstance(data, dict) else None
    if not isinstance(hp, dict):
        return {}
    sch = hp.get("scheduler")
    if sch is None and isinstance(hp.get("executor"), dict):
        sch = hp["executor"].get("scheduler")
    return sch if isinstance(sch, dict) else {}


# ---------------------------------------------------------------------------- Ludwig's other models
#: Every feature type Ludwig documents; a type among them that has no model here is "not
#: supported yet" rather than an unknown tag.
LUDWIG_FEATURE_TYPES = (
    "binary",
    "number",
    "category",
    "set",
    "bag",
    "sequence",
    "text",
    "timeseries",
    "image",
    "audio",
    "date",
    "h3",
    "vector",
)
#: Ludwig's model types not trained here (``ecd`` and ``llm`` are).
UNSUPPORTED_MODEL_TYPES = ("gbm",)
#: Top-level keys Ludwig documents for its LLM model type only.
LUDWIG_LLM_KEYS = (
    "base_model",
    "model_name",
    "prompt",
    "adapter",
    "quantization",
    "generation",
    "generation_config",
    "model_parameters",
)


def feature_tags(union: Any) -> frozenset[str]:
    """The ``type`` tags of a tagged feature union (``InputFeature``, ``OutputFeature``). Pure."""
    while typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    tags: set[str] = set()
    for model in typing.get_args(union):
        tags.update(typing.get_args(model.model_fields["type"].annotation))
    return frozenset(tags)


def _unsupported_first(data: Any) -> None:
    """The errors that explain every other one of a Ludwig config made for another model (a
    model type, a feature type or an LLM key this platform does not train yet), raised
    before the rest of the file is validated, so they are reported first.

    Raises:
        RuleError: at the key, saying it is not supported yet.
    """
    if not isinstance(data, dict):
        return
    model_type = data.get("model_type")
    if model_type in UNSUPPORTED_MODEL_TYPES:
        raise RuleError(
            f"model_type {model_type} is not supported yet",
            path=("model_type",),
            fix="use model_type: ecd (the default) or llm",
        )
    if model_type == "llm":
        check_llm_sections(data)
        check_llm_features(data)
        return
    for section, union in (("input_features", InputFeature), ("output_features", OutputFeature)):
        features = data.get(section)
        known = feature_tags(union) - ({"text"} if section == "output_features" else set())
        for i, f in enumerate(features if isinstance(features, list) else []):
            kind = f.get("type") if isinstance(f, dict) else None
            if kind == "text" and section == "output_features":
                raise RuleError(
                    "output feature type text (generation) is not supported yet by model_type ecd",
                    path=(section, i, "type"),
                    fix="set model_type: llm (with base_model) to fine-tune a language model that generates it",
                )
            if kind in LUDWIG_FEATURE_TYPES and kind not in known:
                what = " (generation)" if kind in ("text", "sequence") and section == "output_features" else ""
                raise RuleError(
                    f"{section[:-9]} feature type {kind}{what} is not supported yet",
                    path=(section, i, "type"),
                    fix=f"use one of {', '.join(sorted(known))}, or leave this feature out",
                )
    for key in LUDWIG_LLM_KEYS:
        if key in data:
            raise RuleError(
                f"{key!r} is a key of model_type llm, but this file's model_type is {model_type or 'ecd'}",
                path=(key,),
                fix="set model_type: llm to fine-tune a language model, or remove it",
            )


# ---------------------------------------------------------------------------- root
class SweepConfig(_Base):
    """A whole sweep file, validated. ``base_dir`` (not a key) is the sweep file's folder."""

    name: str
    dataset: DatasetConfig
    input_features: list[InputFeature] = Field(min_length=1)
    output_features: OutputFeatures
    combiner: CombinerConfig = ConcatCombiner()
    trainer: TrainerConfig = TrainerConfig()
    backend: BackendConfig = BackendConfig()
    hyperopt: HyperoptConfig
    kfold: KFoldConfig | None = None
    tracking: TrackingConfig = TrackingConfig()
    report: ReportConfig = ReportConfig()
    output_dir: str | None = None
    defaults: DefaultsConfig | None = None
    preprocessing: GlobalPreprocessing | None = None
    model_type: Literal["ecd", "llm"] = "ecd"
    ludwig_version: str | None = None
    #: ``model_type: llm``: the pretrained causal LM (a local folder or a hub id), see ``docs/llm.md``
    base_model: str | None = None
    prompt: PromptConfig | None = None
    adapter: Annotated[AdapterConfig, BeforeValidator(adapter_default_type)] | None = None
    quantization: QuantizationConfig | None = None
    generation: GenerationConfig = GenerationConfig()

    @model_validator(mode="before")
    @classmethod
    def _supported_model(cls, data: Any) -> Any:
        _unsupported_first(data)
        return llm_defaults(data) if isinstance(data, dict) else data

    @model_validator(mode="before")
    @classmethod
    def _epochs_from_max_t(cls, data: Any) -> Any:
        # Ludwig's rule: scheduler.max_t alone sets the epochs; trainer.epochs alone sets max_t.
        sch = _raw_scheduler(data)
        trainer = data.get("trainer") or {} if isinstance(data, dict) else None
        max_t = sch.get("max_t")
        if (
            isinstance(max_t, int)
            and not isinstance(max_t, bool)
            and max_t >= 1  # else the scheduler's own check names max_t, not trainer.epochs
            and sch.get("time_attr", "epoch") != "time_total_s"
            and isinstance(trainer, dict)
            and "epochs" not in trainer
        ):
            return {**data, "trainer": {**trainer, "epochs": max_t}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _trial_resources(cls, data: Any) -> Any:
        # Ludwig's hyperopt.executor.{cpu,gpu}_resources_per_trial are the backend's resources.
        return apply_trial_resources(data)

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
        # dataset.split.seed alone is the seed of Ludwig's split too (Ludwig's random_seed)
        ludwig_split = self.preprocessing is not None and "split" in self.preprocessing.model_fields_set
        if ludwig_split and self.dataset.split.model_fields_set - {"seed"}:
            raise KeyedValueError(
                "the split is set twice: dataset.split and preprocessing.split",
                ("preprocessing", "split"),
                fix="keep only one of them",
            )
        check_balancing(self.preprocessing, [f.type for f in self.output_features])
        names = [f.name for f in (*self.input_features, *self.output_features)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise KeyedValueError(
                f"feature names must be unique, but {dupes} appear more than once", ("input_features",)
            )
        check_combiner(self.combiner, [f.name for f in self.input_features])
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
            owner = [n for n, t in outputs.items() if hp.metric in METRICS.get(t, {})] if ftype == "combined" else []
            raise KeyedValueError(
                f"{hp.metric!r} is not reported for a {ftype} output; use one of {sorted(allowed)}",
                ("hyperopt", "metric"),
                fix=f"set hyperopt.output_feature: {owner[0]} to rank by its {hp.metric}" if owner else None,
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
        check_validation_target(self.trainer, outputs, self.backend)
        if self.is_llm:
            check_quantization_backend(self.quantization, self.backend.use_gpu)
            tr = self.trainer
            watched = [hp.metric, *(o.metric for o in hp.objectives), tr.validation_metric]
            generated = next((m for m in watched if m in GENERATED_METRICS), None)
            if generated is not None and tr.eval_generation_samples == 0:
                raise KeyedValueError(
                    f"{generated} is scored on generated outputs, but trainer.eval_generation_samples is 0",
                    ("trainer", "eval_generation_samples"),
                    fix="set it to the validation rows to generate at each evaluation (e.g. 32), or rank by loss",
                )
        elif self.trainer.type == "finetune":
            raise KeyedValueError(
                "trainer.type finetune is the trainer of model_type llm",
                ("trainer", "type"),
                fix="remove trainer.type (an ecd model's trainer is trainer), or set model_type: llm",
            )
        elif self.trainer.eval_generation_samples != TrainerConfig.model_fields["eval_generation_samples"].default:
            raise KeyedValueError(
                "trainer.eval_generation_samples is read by model_type llm only",
                ("trainer", "eval_generation_samples"),
                fix="remove it, or set model_type: llm",
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
    def is_llm(self) -> bool:
        """True for ``model_type: llm`` (a fine-tuned causal language model)."""
        return self.model_type == "llm"

    @property
    def llm_output(self) -> LLMTextOutputFeature:
        """The text output feature of an llm config.

        Raises:
            TypeError: the config is not ``model_type: llm``.
        """
        out = self.output_features[0]
        if not isinstance(out, LLMTextOutputFeature):
            raise TypeError(f"{self.name!r} is model_type {self.model_type}, which has no llm text output")
        return out

    @property
    def goal_sign(self) -> float:
        """+1 when smaller is better, -1 when larger is better (multiply to minimize)."""
        return 1.0 if self.hyperopt.goal == "minimize" else -1.0
