"""``hyperopt``: the search space, objectives and metric, with the search algorithm of
:mod:`ludwig_hpo.config.search_alg`, the budget of :mod:`ludwig_hpo.config.executor` and the
Tune scheduler of :mod:`ludwig_hpo.config.schedulers`. Typed and frozen; no I/O. Option names
and defaults follow Ludwig and Ray Tune.

Rules that need only this section (sampler options, grid, ``points_to_evaluate``) are
checked here; rules that need the features or the trainer live in
:class:`~ludwig_hpo.config.schema.SweepConfig`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from ludwig_hpo.config.base import KeyedValueError, KeyPath, RuleError, _Base, default_type
from ludwig_hpo.config.executor import ExecutorConfig, read_optuna_executor
from ludwig_hpo.config.paths import ROOT, SECTIONS
from ludwig_hpo.config.schedulers import FifoScheduler, PbtScheduler, Scheduler, check_pbt, pbt_mutable
from ludwig_hpo.config.search_alg import SAMPLER_OPTIONS, Sampler, SearchAlgConfig
from ludwig_hpo.config.spaces import LISTED_SPACES, GridSearchSpace, ParamSpace, grid_size
from ludwig_hpo.tracking.layout import best_param
from ludwig_hpo.tracking.names import MAX_KEY_LENGTH, mlflow_key

__all__ = [
    "SAMPLER_OPTIONS",
    "ExecutorConfig",
    "HyperoptConfig",
    "Objective",
    "Sampler",
    "SearchAlgConfig",
]


class Objective(_Base):
    """One objective of a multi-objective search: ``metric`` of ``output_feature`` (default:
    ``hyperopt.output_feature``) on ``hyperopt.split``; ``goal`` defaults to the metric's
    direction and must agree with it."""

    metric: str
    goal: Literal["minimize", "maximize"] | None = None
    output_feature: str | None = None


_OBJECTIVE_JSON = {
    "type": "object",
    "additionalProperties": False,
    "required": [],
    "properties": {
        "metric": {"type": "string"},
        "name": {"type": "string"},
        "goal": {"enum": ["minimize", "maximize"]},
        "output_feature": {"type": "string"},
    },
}
#: What the sweep file may write under ``hyperopt.metric``: one metric, or a list of metrics
#: (names or ``{metric | name, goal, output_feature}``) for a multi-objective search.
METRIC_JSON_SCHEMA = {
    "anyOf": [
        {"type": "string"},
        {"type": "array", "minItems": 1, "items": {"anyOf": [{"type": "string"}, _OBJECTIVE_JSON]}},
    ],
    "default": "loss",
    "title": "Metric",
}

#: Samplers that optimize several objectives at once (Pareto front).
MULTI_OBJECTIVE_SAMPLERS = ("tpe", "nsga2", "random", "grid")


class HyperoptConfig(_Base):
    """The search: optimize ``<split>/<output_feature>/<metric>`` toward ``goal``."""

    goal: Literal["minimize", "maximize"] = "minimize"
    metric: Annotated[str, WithJsonSchema(METRIC_JSON_SCHEMA)] = "loss"
    split: Literal["train", "validation"] = "validation"
    output_feature: str = "combined"
    parameters: dict[str, ParamSpace] = Field(min_length=1)
    #: Ludwig's default when the file has no search_alg: Ray Tune's random variant generator.
    search_alg: SearchAlgConfig = SearchAlgConfig(type="variant_generator")
    scheduler: Scheduler = FifoScheduler()
    executor: ExecutorConfig = ExecutorConfig()

    objectives: list[Objective] = []

    _fill_scheduler = field_validator("scheduler", mode="before")(default_type("fifo"))

    @model_validator(mode="before")
    @classmethod
    def _metric_list(cls, data: Any) -> Any:
        # metric: [loss, {metric: accuracy, goal: maximize}] (Ludwig's list form uses `name`)
        if not isinstance(data, dict) or not isinstance(data.get("metric"), list):
            return data
        if "objectives" in data:
            raise RuleError(
                "objectives are set twice: a metric list and objectives",
                path=("hyperopt", "objectives"),
                fix="keep only one of them",
            )
        items = [
            {"metric": m}
            if isinstance(m, str)
            else ({("metric" if k == "name" else k): v for k, v in m.items()} if isinstance(m, dict) else m)
            for m in data["metric"]
        ]
        if not items or not isinstance(items[0], dict) or not isinstance(items[0].get("metric"), str):
            raise RuleError(
                "a metric list needs at least one metric name",
                path=("hyperopt", "metric"),
                fix="write metric: [loss, accuracy] or metric: loss",
            )
        first = items[0]
        out = {**data, "metric": first["metric"], "objectives": items}
        for key in ("goal", "output_feature"):
            if first.get(key) is not None and key not in data:
                out[key] = first[key]
        return out

    @model_validator(mode="before")
    @classmethod
    def _ludwig_executor_scheduler(cls, data: Any) -> Any:
        # Ludwig writes the scheduler under hyperopt.executor.scheduler; its optuna executor
        # is the same search as an Optuna search_alg on the ray executor.
        if isinstance(data, dict):
            data = read_optuna_executor(data)
        ex = data.get("executor") if isinstance(data, dict) else None
        if isinstance(ex, dict) and "scheduler" in ex:
            if "scheduler" in data:
                raise RuleError(
                    "the scheduler is set twice: hyperopt.scheduler and hyperopt.executor.scheduler",
                    path=("hyperopt", "executor", "scheduler"),
                    fix="keep only one of them",
                )
            ex = dict(ex)
            return {**data, "scheduler": ex.pop("scheduler"), "executor": ex}
        return data

    @model_validator(mode="before")
    @classmethod
    def _pbt_samples_at_random(cls, data: Any) -> Any:
        # PBT explores by itself; Tune runs it only with its own random variant generator.
        if not isinstance(data, dict):
            return data
        sch = data.get("scheduler")
        if sch is None and isinstance(data.get("executor"), dict):
            sch = data["executor"].get("scheduler")
        if not (isinstance(sch, dict) and sch.get("type") == "pbt"):
            return data
        sa = data.get("search_alg")
        if sa is None:
            return {**data, "search_alg": {"type": "random"}}
        if isinstance(sa, dict) and sa.get("type", "optuna") not in ("random", "variant_generator"):
            raise RuleError(
                f"the pbt scheduler samples its first population at random and then explores by "
                f"itself; it cannot follow search_alg.type {sa.get('type', 'optuna')!r}",
                path=("hyperopt", "search_alg", "type"),
                fix="use search_alg: {type: random} with pbt",
            )
        return data

    @field_validator("parameters", mode="before")
    @classmethod
    def _no_sample_from(cls, v: Any) -> Any:
        # Ray Tune's sample_from takes a Python function, which a YAML file cannot hold.
        for path, space in v.items() if isinstance(v, dict) else ():
            if isinstance(space, dict) and space.get("space") == "sample_from":
                raise RuleError(
                    "space sample_from (a Python function of the other values) is not supported yet",
                    path=("hyperopt", "parameters", path, "space"),
                    fix="use choice, a '.' block of settings that belong together, or a numeric space",
                )
        return v

    @field_validator("split", mode="before")
    @classmethod
    def _no_test(cls, v: Any) -> Any:
        if v == "test":
            raise ValueError(
                "selecting trials on the test split leaks it into the search; "
                "use 'validation' (the test split scores the top configurations after the search)"
            )
        return v

    @model_validator(mode="after")
    def _search_fits_space(self) -> HyperoptConfig:
        params = self.parameters
        for path in params:
            key = mlflow_key(best_param(path))  # the longest key a parameter's path takes in MLflow
            if len(key) > MAX_KEY_LENGTH:
                raise KeyedValueError(
                    f"parameter path {path[:40]!r}... is {len(key)} characters as the MLflow key {key[:12]!r}..., "
                    f"over MLflow's {MAX_KEY_LENGTH}",
                    ("hyperopt", "parameters", path),
                    fix="give the feature it names a shorter name and keep its column: {name: <short>, column: <column>}",
                )
        root = params.get(ROOT)
        if root is not None:
            _check_root_blocks(root)
        sa = self.search_alg
        if self.multi_objective:
            if sa.effective_sampler not in MULTI_OBJECTIVE_SAMPLERS:
                raise KeyedValueError(
                    f"the {sa.effective_sampler!r} sampler optimizes one metric, but {len(self.objectives)} are given",
                    ("hyperopt", "search_alg", "sampler"),
                    fix="use sampler: nsga2 or tpe, or a single metric",
                )
            if self.scheduler.type != "fifo":
                raise KeyedValueError(
                    f"scheduler {self.scheduler.type!r} stops trials on one metric, but "
                    f"{len(self.objectives)} are optimized",
                    ("hyperopt", "scheduler"),
                    fix="use scheduler: {type: fifo} with several metrics",
                )
        if isinstance(self.scheduler, PbtScheduler):
            check_pbt(self.scheduler, params)
        if sa.type == "grid":
            self._check_grid()
        _check_points(sa.points_to_evaluate, params)
        if len(sa.points_to_evaluate) > self.num_trials:
            raise KeyedValueError(
                f"{len(sa.points_to_evaluate)} points_to_evaluate exceed the {self.num_trials} trials of the sweep",
                ("hyperopt", "search_alg", "points_to_evaluate"),
                fix="raise executor.num_samples or remove points",
            )
        return self

    def _check_grid(self) -> None:
        params = self.parameters
        others = [p for p, s in params.items() if not isinstance(s, GridSearchSpace)]
        if others:
            raise KeyedValueError(
                f"search_alg.type grid needs every parameter to be grid_search, but {others[0]!r} "
                f"is {params[others[0]].space}",
                ("hyperopt", "parameters", others[0]),
                fix="use space: grid_search with values, or search_alg.type: optuna",
            )
        n = grid_size(params)
        if "num_samples" in self.executor.model_fields_set and self.executor.num_samples not in (1, n):
            raise KeyedValueError(
                f"num_samples ({self.executor.num_samples}) contradicts the grid's {n} points "
                "(a grid runs each point once)",
                ("hyperopt", "executor", "num_samples"),
                fix="remove num_samples",
            )

    @property
    def pbt_mutated(self) -> dict[str, Any]:
        """The PBT scheduler's ``hyperparam_mutations``, or, when the file gives none, every
        searched parameter PBT may change (:func:`pbt_mutable`) with its own space (None)."""
        given = self.scheduler.hyperparam_mutations if isinstance(self.scheduler, PbtScheduler) else None
        return dict(given) if given is not None else {p: None for p in self.parameters if pbt_mutable(p)}

    @property
    def metric_key(self) -> str:
        """The reported metric the search optimizes, e.g. ``"validation/label/loss"``."""
        return f"{self.split}/{self.output_feature}/{self.metric}"

    @property
    def multi_objective(self) -> bool:
        """True when several metrics are optimized at once (results carry the Pareto set)."""
        return len(self.objectives) > 1

    def objective_key(self, o: Objective) -> str:
        """The reported key of one objective, e.g. ``"validation/label/accuracy"``."""
        return f"{self.split}/{o.output_feature or self.output_feature}/{o.metric}"

    @property
    def grid_points(self) -> int:
        """Points of the Cartesian product of the ``grid_search`` parameters (1 if none)."""
        return grid_size(self.parameters)

    @property
    def num_trials(self) -> int:
        """Trials the search runs: the grid's points for ``type: grid``, else ``num_samples``
        times the grid's points (Ray Tune's rule)."""
        if self.search_alg.type == "grid":
            return self.grid_points
        return self.grid_points * self.executor.num_samples


def _check_root_blocks(root: ParamSpace) -> None:
    """The ``"."`` parameter lists non-empty mappings of the sections a block may set."""
    where: KeyPath = ("hyperopt", "parameters", ROOT)
    if not isinstance(root, LISTED_SPACES):
        raise KeyedValueError(
            f"the '.' parameter must be a choice or grid_search of config blocks, not {root.space}",
            where,
            fix="use space: choice with categories that are mappings",
        )
    for block in root.probe_values():
        if not isinstance(block, dict) or not block:
            raise KeyedValueError(
                f"each category of the '.' parameter must be a non-empty mapping of config sections, got {block!r}",
                where,
                fix="write categories like {trainer: {learning_rate: 0.01}}",
            )
        bad = sorted(set(block) - set(SECTIONS))
        if bad:
            raise KeyedValueError(
                f"a '.' block may set only {', '.join(SECTIONS)}, not {bad[0]!r}",
                where,
                fix="move that setting out of the search or into its section",
            )


def _check_points(points: list[dict[str, Any]], params: Mapping[str, ParamSpace]) -> None:
    """Each of ``points_to_evaluate`` sets searched parameters to values inside their spaces,
    and no grid fixes the points instead."""
    for i, point in enumerate(points):
        where: KeyPath = ("hyperopt", "search_alg", "points_to_evaluate", i)
        if any(isinstance(s, GridSearchSpace) for s in params.values()):
            raise KeyedValueError(
                "points_to_evaluate cannot be combined with grid_search parameters",
                where,
                fix="remove points_to_evaluate (the grid fixes the points)",
            )
        for path, value in point.items():
            if path not in params:
                close = difflib.get_close_matches(path, list(params), n=1, cutoff=0.6)
                raise KeyedValueError(
                    f"{path!r} is not a searched parameter",
                    (*where, path),
                    fix=f"did you mean {close[0]!r}?" if close else f"use one of {', '.join(params)}",
                )
            problem = params[path].problem_with(value)
            if problem:
                raise KeyedValueError(
                    f"{problem} of the {params[path].space} space of {path!r}",
                    (*where, path),
                    fix="use a value inside the parameter's space",
                )
