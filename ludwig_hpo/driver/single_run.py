"""``hpo train``: one training run of a sweep file's base configuration (or of a finished
sweep's best configuration) as one Ray Train job, tracked and saved like a sweep's trial.

It is a sweep of exactly one trial: the same data preparation, resource planning, Train
job, MLflow child run under a parent run, and ``best_model/`` folder; no search, no early
stopping, no k-fold, no report. With ``--from-sweep`` its runs go to the sweep's store, its
parent run nested under the sweep's parent run, so the sweep's MLflow UI shows them. Driver only.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import yaml
from pydantic import ValidationError
from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import ConfigError, DataError
from ludwig_hpo.results import SweepResult


def single_run_sweep(loaded: LoadedSweep, tracking_uri: str | None = None) -> LoadedSweep:
    """``loaded`` reduced to one trial of its base configuration: a one-point search space
    (the configured ``trainer.learning_rate``, so the run logs it as its parameter), FIFO,
    no time budget, no k-fold, no report; named ``<name>-train``, tracked in the file's MLflow experiment (in
    the store ``tracking_uri`` when given: a sweep's). Pure."""
    raw = copy.deepcopy(loaded.raw)
    hp = dict(raw.get("hyperopt") or {})
    hp["parameters"] = {
        "trainer.learning_rate": {"space": "choice", "categories": [loaded.config.trainer.learning_rate]}
    }
    hp["scheduler"] = {"type": "fifo"}
    # no time budget: a search's (Ludwig's default, one hour) would end the training run
    hp["executor"] = {"num_samples": 1, "max_concurrent_trials": 1, "time_budget_s": None}
    raw["hyperopt"] = hp
    raw["kfold"] = None
    raw["report"] = {"enabled": False}
    raw["name"] = f"{loaded.config.name}-train"
    # tracked beside the file's sweeps
    raw["tracking"] = {
        **(raw.get("tracking") or {}),
        "experiment": loaded.config.tracking.experiment or loaded.config.name,
        **({"uri": tracking_uri} if tracking_uri else {}),
    }
    return dataclasses.replace(loaded, raw=raw, config=SweepConfig.model_validate(raw))


def best_config_of(sweep_dir: Path, loaded: LoadedSweep) -> LoadedSweep:
    """``loaded`` with the best trial's configuration of a finished sweep (its
    ``best_model/config.yaml``) in place of the file's base configuration (``--from-sweep``).

    Raises:
        DataError: ``sweep_dir`` holds no ``best_model/config.yaml``.
        ConfigError: that configuration does not validate.
    """
    paths = SweepPaths(sweep_dir)
    path = paths.best_config
    shown = path.relative_to(paths.root).as_posix()
    if not path.is_file():
        raise DataError(
            f"no {shown} in this folder",
            source=str(sweep_dir),
            fix="pass the output folder printed by 'hpo sweep' (a sweep with at least one finished trial)",
        )
    raw = yaml.safe_load(path.read_text())
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(
            f"the best configuration does not validate ({e.errors()[0]['msg']})",
            source=str(path),
            fix="rerun the sweep with this version of hpo",
        ) from None
    return dataclasses.replace(loaded, config=cfg, raw=raw)


def train_once(
    loaded: LoadedSweep,
    console: Console,
    *,
    output_root: Path | None = None,
    address: str | None = None,
    from_sweep: Path | None = None,
) -> SweepResult:
    """Train ``loaded``'s configuration once; returns the one-trial result. With
    ``from_sweep`` (the output folder ``loaded``'s best configuration came from), the run is
    logged into that sweep's MLflow store and experiment, its parent run a child of the
    sweep's parent run.

    Raises:
        UserError: bad data, resources, cluster address or tracking store (before anything
            is created), or ``from_sweep`` holds no ``state.json``.
    """
    from ludwig_hpo.driver.state import read_state
    from ludwig_hpo.driver.sweep import Sweep

    # the folder holds a training run, not a sweep, from its first state.json on: `hpo ui`
    # does not take it for the newest sweep, even when the run is stopped before its end
    if from_sweep is None:
        return Sweep(single_run_sweep(loaded), console, output_root=output_root, address=address, kind="train").run()
    state = read_state(from_sweep)
    if state is None:
        raise DataError(
            f"no {SweepPaths(from_sweep).state.name} in this folder",
            source=str(from_sweep),
            fix="pass the output folder printed by 'hpo sweep'",
        )
    single = single_run_sweep(loaded, tracking_uri=state.tracking_uri)
    return Sweep(
        single, console, output_root=output_root, address=address, nest_under=state.parent_run_id, kind="train"
    ).run()
