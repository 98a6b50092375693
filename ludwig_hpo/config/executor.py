"""``hyperopt.executor``: how many trials, how many at once, their resources and the time
budget, with Ludwig's names and defaults; and Ludwig's ``executor.type: optuna`` read as the
same search on the Ray executor. Typed and frozen; no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, model_validator

from ludwig_hpo.config.base import RuleError, _Base
from ludwig_hpo.config.schedulers import Scheduler

#: Ludwig's time budget of a whole search when the file names none, in seconds.
LUDWIG_TIME_BUDGET_S = 3600.0


class ExecutorConfig(_Base):
    """The search's budget and each trial's resources.

    ``num_samples``: trials of the search (times the grid size when ``grid_search``
    parameters exist). ``max_concurrent_trials``: ``auto`` (or Ludwig's null) = as many as the
    cluster fits. ``time_budget_s``: seconds after which the search ends, running trials
    included (Ludwig's default 3600; null: no limit). ``max_failures``: run a failed trial
    again up to this many times before it counts as FAILED.

    Ludwig's ``cpu_resources_per_trial`` / ``gpu_resources_per_trial`` (CPUs and GPUs of a
    whole trial) become the backend's per-worker resources
    (:func:`ludwig_hpo.config.backend.apply_trial_resources`); unset, the ``backend`` section
    decides. ``kubernetes_namespace`` is accepted and not needed: trial results reach the
    driver through Ray and MLflow, never through files synced between pods.
    """

    type: Literal["ray"] = "ray"
    num_samples: int = Field(default=10, ge=1, le=1_000_000)
    max_concurrent_trials: Union[Literal["auto"], Annotated[int, Field(ge=1)]] = "auto"
    time_budget_s: float | None = Field(default=LUDWIG_TIME_BUDGET_S, gt=0)
    max_failures: int = Field(default=0, ge=0, le=100)
    cpu_resources_per_trial: float | None = Field(default=None, gt=0)
    gpu_resources_per_trial: int | None = Field(default=None, ge=0)
    kubernetes_namespace: str | None = None
    scheduler: Scheduler | None = Field(
        default=None, exclude=True, description="Ludwig's place of hyperopt.scheduler (read as hyperopt.scheduler)"
    )

    @model_validator(mode="before")
    @classmethod
    def _ludwig_forms(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "trial_driver_resources" in data:
            raise RuleError(
                "executor.trial_driver_resources is not supported yet (a trial's driver here reserves only a "
                "token resource; its workers hold the CPUs and GPUs)",
                path=("hyperopt", "executor", "trial_driver_resources"),
                fix="remove it; set backend.trainer.resources_per_worker for the workers' resources",
            )
        if "max_concurrent_trials" in data and data["max_concurrent_trials"] is None:
            return {**data, "max_concurrent_trials": "auto"}  # Ludwig's null: no limit but the cluster's
        return data


#: What Ludwig's optuna executor's ``sampler`` names, as an Optuna sampler of this package
#: (``auto``: Optuna has no AutoSampler, so Ludwig falls back to TPE).
_OPTUNA_EXECUTOR_SAMPLERS = {"auto": "tpe", "tpe": "tpe", "gp": "gp", "cmaes": "cmaes", "random": "random"}
_OPTUNA_EXECUTOR_KEYS = {
    "type", "num_samples", "sampler", "pruner", "study_name", "storage", "n_startup_trials", "time_budget_s",
}  # fmt: skip
_WHERE = ("hyperopt", "executor")


def read_optuna_executor(hyperopt: dict[str, Any]) -> dict[str, Any]:
    """Ludwig's ``executor: {type: optuna, sampler, pruner, storage, study_name,
    n_startup_trials, num_samples}`` as the same search on the Ray executor: an Optuna
    ``search_alg`` with that sampler, trials one at a time (Ludwig's optuna executor runs them
    in sequence), no time budget unless ``time_budget_s`` is written (the docs' executor key,
    kept with the Ray executor's meaning: no trial starts after it, running ones stop). Its ``pruner`` stops no trial in Ludwig (its
    trials never report intermediate values), so the scheduler stays fifo. Any other
    ``hyperopt`` mapping is returned unchanged. Pure.

    Raises:
        RuleError: an option this executor does not have, a ``storage`` (not supported
            yet), or ``search_alg`` / a scheduler written beside it (Ludwig ignores them).
    """
    ex = hyperopt.get("executor")
    if not (isinstance(ex, dict) and ex.get("type") == "optuna"):
        return hyperopt
    unknown = sorted(set(ex) - _OPTUNA_EXECUTOR_KEYS)
    if unknown:
        raise RuleError(
            f"{unknown[0]!r} is not an option of the optuna executor",
            path=(*_WHERE, unknown[0]),
            fix=f"use {', '.join(sorted(_OPTUNA_EXECUTOR_KEYS - {'type'}))}, or executor type: ray",
        )
    if ex.get("storage") is not None:
        raise RuleError(
            "executor.storage (an Optuna study storage) is not supported yet; the sweep's trials are kept in "
            "MLflow and results.json",
            path=(*_WHERE, "storage"),
            fix="remove storage",
        )
    for other in ("search_alg", "scheduler"):
        if other in hyperopt:
            raise RuleError(
                f"hyperopt.{other} is set beside executor type optuna, which has its own sampler",
                path=("hyperopt", other),
                fix=f"remove hyperopt.{other}, or use executor type: ray",
            )
    sampler = ex.get("sampler", "auto")
    if sampler not in _OPTUNA_EXECUTOR_SAMPLERS:
        raise RuleError(
            f"sampler {sampler!r} is not a sampler of the optuna executor",
            path=(*_WHERE, "sampler"),
            fix=f"use one of {', '.join(_OPTUNA_EXECUTOR_SAMPLERS)}",
        )
    if ex.get("pruner") not in (None, "median", "hyperband"):
        raise RuleError(
            f"pruner {ex['pruner']!r} is not a pruner of the optuna executor",
            path=(*_WHERE, "pruner"),
            fix="use median or hyperband, or remove pruner",
        )
    search_alg: dict[str, Any] = {"type": "optuna", "sampler": _OPTUNA_EXECUTOR_SAMPLERS[sampler]}
    if "n_startup_trials" in ex:
        search_alg["n_startup_trials"] = ex["n_startup_trials"]
    executor: dict[str, Any] = {"max_concurrent_trials": 1, "time_budget_s": ex.get("time_budget_s")}
    if "num_samples" in ex:
        executor["num_samples"] = ex["num_samples"]
    return {**hyperopt, "search_alg": search_alg, "executor": executor}
