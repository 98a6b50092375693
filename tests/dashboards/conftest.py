"""SweepResult fixtures for the report tests, built in code (no Ray, no torch)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

# The repository root, so that ``dashboards`` and ``ludwig_hpo`` import from the checkout.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

# Importing Optuna's importance module sets KMP_* environment variables (through torch);
# import it here, once, so no test is blamed for leaking them.
import optuna.importance  # noqa: E402, F401

from ludwig_hpo.results import (  # noqa: E402
    EpochRecord,
    KFoldRecord,
    ParamInfo,
    SweepResult,
    TrialRecord,
)

LR = ParamInfo("trainer.learning_rate", "loguniform", log=True, lower=1e-4, upper=1e-1)
LAYERS = ParamInfo("image.encoder.num_layers", "randint", lower=1, upper=4)
OPTIMIZER = ParamInfo("trainer.optimizer", "choice", categories=("adam", {"type": "sgd", "momentum": 0.9}, [1, 2]))


def make_trial(
    trial_id: str,
    params: dict,
    objective: float | None,
    status: str = "FINISHED",
    epochs: int = 3,
    stopped_by: str | None = None,
) -> TrialRecord:
    """A trial whose metric falls to ``objective`` over ``epochs`` epochs (``stopped_by``:
    who stopped it early, e.g. ``"scheduler"``)."""
    if objective is None:
        return TrialRecord(trial_id, status, params, None, None, error="RuntimeError: boom")
    history = tuple(
        EpochRecord(e, objective + 0.1 * (epochs - e), {"validation/label/loss": objective})
        for e in range(1, epochs + 1)
    )
    return TrialRecord(
        trial_id,
        status,
        params,
        objective,
        objective,
        history,
        batch_size=64,
        wall_time_s=12.5,
        train_time_s=10.0,
        stopped_by=stopped_by,
        stopped_at_epoch=epochs if stopped_by else None,
    )


def make_sweep(trials, parameters=(LR, LAYERS, OPTIMIZER), kfold=(), goal="minimize", name="digits-cnn"):
    finished = [t for t in trials if t.objective_best is not None]
    pick = min if goal == "minimize" else max
    best = pick(finished, key=lambda t: t.objective_best).trial_id if finished else None
    return SweepResult(
        name=name,
        metric="validation/label/loss",
        goal=goal,
        parameters=tuple(parameters),
        trials=tuple(trials),
        kfold=tuple(kfold),
        best_trial_id=best,
        wall_time_s=3725.0,
        output_dir="results/digits-cnn",
        tracking_uri="sqlite:///results/mlflow.db",
    )


def realistic_sweep(n_trials: int = 20, seed: int = 0) -> SweepResult:
    """``n_trials`` trials over lr (log), layers (int) and optimizer (choice incl. a dict),
    two failed and three stopped early by the scheduler, and k-fold of the top 3 configurations with 3 folds."""
    rng = random.Random(seed)
    trials = []
    for i in range(n_trials):
        params = {
            LR.path: 10 ** rng.uniform(-4, -1),
            LAYERS.path: rng.randint(1, 3),
            OPTIMIZER.path: rng.choice(OPTIMIZER.categories),
        }
        tid = f"a1b2_{i:05d}"
        if i in (4, 11):
            trials.append(make_trial(tid, params, None, status="FAILED"))
            continue
        loss = 0.2 + abs(params[LR.path] - 3e-3) * 8 + 0.05 * params[LAYERS.path] + rng.uniform(0, 0.1)
        stopped = "scheduler" if i in (2, 7, 15) else None
        trials.append(make_trial(tid, params, loss, epochs=2 if stopped else 10, stopped_by=stopped))
    ranked = sorted((t for t in trials if t.objective_best is not None), key=lambda t: t.objective_best)
    kfold = [
        KFoldRecord(
            rank,
            t.trial_id,
            t.params,
            tuple(t.objective_best + rng.uniform(-0.03, 0.05) for _ in range(3)),
            t.objective_best + rng.uniform(0.0, 0.06),
            "label/loss",
        )
        for rank, t in enumerate(ranked[:3], start=1)
    ]
    return make_sweep(trials, kfold=kfold)


@pytest.fixture(scope="session")
def sweep() -> SweepResult:
    """A realistic finished sweep (immutable, so shared by all tests)."""
    return realistic_sweep()


@pytest.fixture(name="make_trial")
def _make_trial_fixture():
    return make_trial


@pytest.fixture(name="make_sweep")
def _make_sweep_fixture():
    return make_sweep


@pytest.fixture(name="params")
def _params_fixture():
    """The three searched parameters: (lr: loguniform, layers: randint, optimizer: choice)."""
    return LR, LAYERS, OPTIMIZER
