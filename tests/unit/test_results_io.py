"""``results.json`` round trip: every record field, non-finite numbers, structured params."""

from __future__ import annotations

import json
import math

import pytest

from ludwig_hpo.results import EpochRecord, KFoldRecord, ParamInfo, SweepResult, TrialRecord
from ludwig_hpo.results.io import read_result, write_result

NAN, INF = float("nan"), float("inf")
PARAMS = (
    ParamInfo("trainer.learning_rate", "loguniform", log=True, lower=1e-4, upper=1e-1),
    ParamInfo("image.encoder.num_layers", "randint", lower=1.0, upper=4.0),
    ParamInfo("trainer.optimizer", "choice", categories=("adam", {"type": "sgd", "momentum": 0.9}, [1, 2])),
)


def make_result(objective_last=0.25, objective_best=0.2, epoch_objective=0.3, metric=0.3, fold=0.4, test=0.5):
    trial = TrialRecord(
        "t1",
        "FINISHED",
        {"trainer.learning_rate": 0.01, "trainer.optimizer": {"type": "sgd", "momentum": 0.9}, "sizes": [16, 8]},
        objective_last,
        objective_best,
        (
            EpochRecord(1, epoch_objective, {"validation/label/loss": metric, "train/combined/loss": 0.5}),
            EpochRecord(2, 0.25, {"validation/label/loss": 0.25}),
        ),
        batch_size=32,
        wall_time_s=12.5,
        train_time_s=10.0,
    )
    failed = TrialRecord(
        "t2",
        "FAILED",
        {"trainer.learning_rate": 5.0, "trainer.optimizer": "adam", "sizes": [8]},
        None,
        None,
        error="FloatingPointError: training loss is nan at epoch 1",
    )
    kfold = KFoldRecord(1, "t1", dict(trial.params), (fold, 0.45, 0.42), test, "label/loss")
    return SweepResult(
        "digits-cnn",
        "validation/label/loss",
        "minimize",
        PARAMS,
        (trial, failed),
        (kfold,),
        best_trial_id="t1",
        wall_time_s=99.0,
        output_dir="/out",
        tracking_uri="sqlite:///x.db",
    )


def same(a, b) -> bool:
    """Equality where NaN equals NaN, recursing through records, tuples, lists and dicts."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dataclass_fields__"):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return a == b


def round_trip(tmp_path, result):
    path = tmp_path / "results.json"
    write_result(result, path)
    return read_result(path)


def test_round_trip_finite(tmp_path):
    result = make_result()
    back = round_trip(tmp_path, result)
    assert back == result
    assert back.trials[0].params["trainer.optimizer"] == {"type": "sgd", "momentum": 0.9}
    assert back.trials[0].params["sizes"] == [16, 8]
    assert back.parameters[2].categories == ("adam", {"type": "sgd", "momentum": 0.9}, [1, 2])
    assert back.trials[1].objective_last is None and back.trials[1].history == ()


@pytest.mark.parametrize("value", [INF, -INF])
def test_round_trip_infinite_objectives(tmp_path, value):
    result = make_result(objective_last=value, objective_best=value, epoch_objective=value)
    back = round_trip(tmp_path, result)
    assert back.trials[0].objective_last == value
    assert back.trials[0].objective_best == value
    assert back.trials[0].history[0].objective == value


def test_file_is_strict_json(tmp_path):
    path = tmp_path / "results.json"
    write_result(make_result(objective_last=NAN, objective_best=INF, metric=-INF, fold=NAN), path)
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"], "no temp file left behind"


def test_overwrite(tmp_path):
    path = tmp_path / "results.json"
    write_result(make_result(objective_last=1.0), path)
    write_result(make_result(objective_last=2.0), path)
    assert read_result(path).trials[0].objective_last == 2.0


NON_FINITE = [
    ("nan-objective", {"objective_last": NAN, "objective_best": NAN, "epoch_objective": NAN}),
    ("inf-metric", {"metric": INF}),
    ("nan-metric", {"metric": NAN}),
    ("inf-fold-score", {"fold": INF}),
    ("nan-test-score", {"test": NAN}),
]


@pytest.mark.parametrize("kwargs", [k for _, k in NON_FINITE], ids=[i for i, _ in NON_FINITE])
def test_round_trip_non_finite_everywhere(tmp_path, kwargs):
    result = make_result(**kwargs)
    assert same(round_trip(tmp_path, result), result)


def test_missing_file(tmp_path):
    with pytest.raises(OSError):
        read_result(tmp_path / "nope.json")


def test_malformed_file(tmp_path):
    (tmp_path / "results.json").write_text('{"name": "x"}')
    with pytest.raises((KeyError, ValueError, TypeError)):
        read_result(tmp_path / "results.json")


def test_round_trip_pareto_set_and_old_files_without_it(tmp_path):
    r = SweepResult(
        name="s",
        metric="validation/y/loss",
        goal="minimize",
        parameters=(),
        trials=(),
        objectives=("validation/y/loss", "validation/y/accuracy"),
        pareto_trial_ids=("a", "b"),
    )
    write_result(r, tmp_path / "r.json")
    assert read_result(tmp_path / "r.json") == r
    d = json.loads((tmp_path / "r.json").read_text())
    del d["objectives"], d["pareto_trial_ids"]
    (tmp_path / "old.json").write_text(json.dumps(d))
    assert read_result(tmp_path / "old.json").pareto_trial_ids == ()


def test_an_old_file_shows_a_trial_the_scheduler_stopped_as_stopped_early(tmp_path):
    """Older versions wrote a trial the scheduler stopped as ``KILLED`` with ``stopped_by`` null;
    it reads back as the sweep writes it now, so it shows "stopped early", not "interrupted"."""
    write_result(make_result(), tmp_path / "r.json")
    d = json.loads((tmp_path / "r.json").read_text())
    d["trials"][0].update(status="KILLED", stopped_by=None)
    (tmp_path / "old.json").write_text(json.dumps(d))
    trial = read_result(tmp_path / "old.json").trials[0]
    assert (trial.status, trial.stopped_by, trial.label) == ("FINISHED", "scheduler", "stopped early")
    d["trials"][0].update(status="KILLED", stopped_by="interrupted")
    (tmp_path / "old.json").write_text(json.dumps(d))
    assert read_result(tmp_path / "old.json").trials[0].label == "interrupted"
