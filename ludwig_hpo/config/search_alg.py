"""``hyperopt.search_alg``: how trials' parameters are chosen, with Ludwig's and Ray Tune's
names and defaults. Typed and frozen; no I/O.

Ludwig hands ``search_alg`` to Ray Tune's ``create_searcher``; the searchers this package
runs are Ray Tune's random variant generator (``variant_generator`` / ``random``) and Optuna
(``optuna``), both sampled by Optuna's samplers; ``grid`` runs the Cartesian product of the
``grid_search`` parameters. Ray Tune's other searchers need packages this one does not
install: each gets one line naming the Optuna sampler of the same family.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ludwig_hpo.config.base import RuleError, _Base

#: Ludwig's seed when a sweep names none: its ``random_seed`` (42), which it hands to the
#: search algorithm that has no seed of its own.
LUDWIG_RANDOM_SEED = 42

Sampler = Literal["tpe", "random", "cmaes", "gp", "qmc", "nsga2"]
#: Sampler options and the samplers that take them.
SAMPLER_OPTIONS: dict[str, tuple[str, ...]] = {
    "n_startup_trials": ("tpe", "cmaes", "gp"),
    "multivariate": ("tpe",),
    "population_size": ("nsga2", "cmaes"),
    "qmc_type": ("qmc",),
}

#: Ray Tune's searchers Ludwig accepts that need a package not installed here, and the
#: Optuna sampler of the same family to use instead.
UNSUPPORTED_SEARCHERS: dict[str, str] = {
    "hyperopt": "tpe",  # HyperOptSearch is a Tree-structured Parzen Estimator, as Optuna's tpe
    "bohb": "tpe",  # BOHB's model is a TPE-like density estimator (its halving is the hb_bohb scheduler)
    "ax": "gp",
    "bayesopt": "gp",
    "hebo": "gp",
    "skopt": "gp",
    "dragonfly": "gp",
    "nevergrad": "cmaes",
    "zoopt": "cmaes",
    "cfo": "cmaes",
    "blendsearch": "tpe",
}


def _refuse_unsupported(data: Any) -> Any:
    """Raise the one line of a searcher Ludwig accepts but this package does not run."""
    kind = data.get("type") if isinstance(data, dict) else None
    if isinstance(kind, str) and kind.lower() in UNSUPPORTED_SEARCHERS:
        sampler = UNSUPPORTED_SEARCHERS[kind.lower()]
        raise RuleError(
            f"search_alg.type {kind!r} is not supported yet (Ray Tune's {kind} searcher needs a package "
            "not installed with ludwig_hpo)",
            path=("hyperopt", "search_alg", "type"),
            fix=f"use search_alg: {{type: optuna, sampler: {sampler}}} (the same family of search) "
            "or {type: variant_generator}",
        )
    return data


class SearchAlgConfig(_Base):
    """How trials' parameters are chosen.

    ``type``: ``variant_generator`` / ``random`` (Ludwig's default when ``search_alg`` is
    absent: independent random samples), ``optuna`` (an Optuna ``sampler``; the default when a
    ``search_alg`` mapping names no type, as Ludwig's type-less default is hyperopt's TPE),
    or ``grid`` (every point of the Cartesian product of the ``grid_search`` parameters once).

    ``seed`` (Ray Tune's ``random_state`` for the variant generator, accepted under either
    name) makes the suggested sequence reproducible; without one the search is seeded with
    Ludwig's random seed, 42, as Ludwig does. ``n_startup_trials``: random trials before the
    model-based sampler takes over (Optuna's defaults: 10 for tpe and gp, 1 for cmaes).
    ``points_to_evaluate``: configurations (``{parameter path: value}``, possibly partial)
    run first, in order.
    """

    type: Literal["optuna", "grid", "variant_generator", "random"] = "optuna"
    sampler: Sampler = "tpe"
    seed: int | None = LUDWIG_RANDOM_SEED
    n_startup_trials: int = Field(default=10, ge=0)
    multivariate: bool = False
    population_size: int | None = Field(default=None, ge=2)
    qmc_type: Literal["sobol", "halton"] = "sobol"
    points_to_evaluate: list[dict[str, Any]] = []

    @model_validator(mode="before")
    @classmethod
    def _ludwig_names(cls, data: Any) -> Any:
        data = _refuse_unsupported(data)
        if not isinstance(data, dict) or "random_state" not in data:
            return data
        if "seed" in data:
            raise RuleError(
                "the search seed is set twice: search_alg.seed and search_alg.random_state",
                path=("hyperopt", "search_alg", "random_state"),
                fix="keep only one of them",
            )
        out = {k: v for k, v in data.items() if k != "random_state"}
        return {**out, "seed": data["random_state"]}

    @model_validator(mode="after")
    def _options_fit_sampler(self) -> SearchAlgConfig:
        given = self.model_fields_set
        if self.type != "optuna" and "sampler" in given:
            raise RuleError(
                f"sampler {self.sampler!r} is set but search_alg.type is {self.type!r}",
                path=("hyperopt", "search_alg", "sampler"),
                fix="remove sampler, or use type: optuna",
            )
        sampler = self.sampler if self.type == "optuna" else "random"
        for option, samplers in SAMPLER_OPTIONS.items():
            if option in given and sampler not in samplers:
                raise RuleError(
                    f"{option} does not apply to the {sampler!r} sampler (only to {', '.join(samplers)})",
                    path=("hyperopt", "search_alg", option),
                    fix=f"remove {option}",
                )
        return self

    @property
    def effective_sampler(self) -> str:
        """The Optuna sampler actually used: ``random`` for the random types, ``grid`` for grid."""
        if self.type == "grid":
            return "grid"
        return "random" if self.type in ("variant_generator", "random") else self.sampler


#: ``search_alg`` when the file has none: Ludwig's default, Ray Tune's random variant generator.
LUDWIG_DEFAULT_SEARCH_ALG: dict[str, Any] = {"type": "variant_generator"}
