"""What the sweep's MLflow parent run records about where it came from: the package versions,
the git commit of the working directory, the sweep file, its resolved config and its search
space. Driver process only."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

import yaml

from ludwig_hpo import __version__
from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.search.space import param_infos
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.protocol import Tracker

#: Seconds each ``git`` call may take before the commit is left out.
GIT_TIMEOUT_S = 10


def versions() -> dict[str, str]:
    """``{package: version}`` of this package, Python, torch, ray, optuna and mlflow
    (``"missing"`` for one that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"ludwig_hpo": __version__, "python": platform.python_version()}
    for pkg in ("torch", "ray", "optuna", "mlflow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    return out


def git_commit(folder: Path) -> str | None:
    """HEAD commit of the git work tree holding ``folder`` (``+dirty`` when it has uncommitted
    changes), or None outside one or without git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=GIT_TIMEOUT_S
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
        return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def parent_tags(loaded: LoadedSweep, paths: SweepPaths, cwd: Path) -> dict[str, Any]:
    """The parent run's tags: the sweep file (path and sha256), host, output folder, versions
    (``version.<package>``), the objectives of a multi-objective sweep, and the git commit of
    ``cwd`` (``git_commit`` with ``+dirty``, ``mlflow.source.git.commit`` without)."""
    cfg = loaded.config
    tags: dict[str, Any] = {
        layout.SWEEP_FILE_TAG: str(loaded.path),
        layout.SWEEP_FILE_SHA256_TAG: hashlib.sha256(loaded.text.encode()).hexdigest(),
        layout.HOST_TAG: platform.node(),
        layout.OUTPUT_DIR_TAG: str(paths.root.resolve()),
        layout.RUN_KIND_TAG: layout.RUN_KIND_SWEEP,
        **{layout.version_tag(k): v for k, v in versions().items()},
    }
    if cfg.hyperopt.multi_objective:  # what `hpo report` needs to redraw the Pareto set
        tags[layout.OBJECTIVES_TAG] = layout.objectives_tag_value(cfg.objectives)
    commit = git_commit(cwd)
    if commit:
        tags[layout.GIT_COMMIT_TAG] = commit
        tags[layout.MLFLOW_GIT_COMMIT_TAG] = commit.removesuffix("+dirty")
    return tags


def parent_params(cfg: SweepConfig) -> dict[str, Any]:
    """The parent run's params: what the search optimizes and how (metric, goal, trial count,
    algorithm, seed, scheduler, epochs, workers, k-fold)."""
    hp = cfg.hyperopt
    return {
        layout.METRIC_PARAM: hp.metric_key,
        layout.GOAL_PARAM: hp.goal,
        layout.NUM_SAMPLES_PARAM: hp.num_trials,
        layout.SEARCH_ALG_PARAM: f"{hp.search_alg.type}/{hp.search_alg.effective_sampler}",
        layout.SEED_PARAM: hp.search_alg.seed,
        layout.SCHEDULER_PARAM: hp.scheduler.type,
        layout.EPOCHS_PARAM: cfg.trainer.epochs,
        layout.NUM_WORKERS_PARAM: cfg.backend.num_workers,
        layout.KFOLD_K_PARAM: cfg.kfold.k if cfg.kfold else None,
        layout.KFOLD_TOP_K_PARAM: cfg.kfold.top_k if cfg.kfold else None,
    }


def search_space_json(cfg: SweepConfig) -> str:
    """``search_space.json``: per parameter, its declared space and how the report draws it
    (:class:`~ludwig_hpo.results.ParamInfo` without the path)."""
    hp = cfg.hyperopt
    space = {
        p: {**s.model_dump(mode="json"), **{k: v for k, v in dataclasses.asdict(info).items() if k != "path"}}
        for (p, s), info in zip(hp.parameters.items(), param_infos(hp.parameters), strict=True)
    }
    return json.dumps(space, indent=2, default=str)


def start_parent_run(store: Tracker, loaded: LoadedSweep, paths: SweepPaths, *, nest_under: str | None = None) -> str:
    """Create the sweep's parent run (``<name>-<YYYYmmdd-HHMMSS>``) with its tags and params,
    and log ``sweep.yaml`` (already written to ``paths``), the resolved config and the search
    space; returns its run id. ``nest_under``: a run of the same store it is a child of (``hpo
    train --from-sweep``: the sweep's parent run).

    Raises:
        Exception: the store's error when a write is refused.
    """
    cfg = loaded.config
    parent = store.start_run(
        layout.parent_run_name(cfg.name, dt.datetime.now()),
        parent_id=nest_under,
        tags=parent_tags(loaded, paths, Path.cwd()),
        params=parent_params(cfg),
    )
    store.log_artifact(parent, paths.sweep_file)
    resolved = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
    store.log_text(parent, resolved, layout.SWEEP_RESOLVED_ARTIFACT)
    store.log_text(parent, search_space_json(cfg), layout.SEARCH_SPACE_ARTIFACT)
    return parent
