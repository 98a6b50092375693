"""Which trial executor a sweep uses, what its trials reserve, and the config field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ludwig_hpo.config.schema import BackendConfig
from ludwig_hpo.execution.executor import choose_executor
from ludwig_hpo.execution.resources import plan_resources
from ludwig_hpo.execution.trainable import trial_resources


@pytest.mark.parametrize(
    ("requested", "use_gpu", "expected"),
    [
        ("auto", False, "pooled"),
        ("auto", True, "fresh"),
        ("fresh", False, "fresh"),
        ("pooled", True, "pooled"),
        ("pooled", False, "pooled"),
    ],
)
def test_choose_executor(requested, use_gpu, expected):
    choice = choose_executor(requested, use_gpu=use_gpu)
    assert choice.executor == expected
    assert choice.reason.startswith("auto:" if requested == "auto" else "backend.trial_executor:")


def test_auto_says_why_and_how_to_change_it():
    assert "set trial_executor: fresh" in choose_executor("auto", use_gpu=False).reason
    assert "set trial_executor: pooled" in choose_executor("auto", use_gpu=True).reason


def test_trial_executor_field_defaults_to_auto_and_rejects_unknown_values():
    assert BackendConfig().trial_executor == "auto"
    with pytest.raises(ValidationError):
        BackendConfig(trial_executor="warm")


@pytest.mark.parametrize(
    ("workers", "executor", "expected"),
    [
        (2, "fresh", {"cpu": 0, "trial_slot": 1}),
        (2, "pooled", {"cpu": 0, "trial_slot": 1}),
        (1, "fresh", {"cpu": 1.0, "gpu": 0, "trial_slot": 1}),  # trains in the trial actor
        (1, "pooled", {"cpu": 0, "trial_slot": 1}),  # the warm group's worker holds the CPU
    ],
)
def test_pooled_trials_reserve_only_a_slot(workers, executor, expected):
    plan = plan_resources(num_workers=workers, use_gpu=False, cpus_per_worker=1.0, cluster_cpus=2, cluster_gpus=0)
    assert trial_resources(plan, executor) == expected


def test_a_trial_spec_survives_pickling_between_processes():
    import pickle

    from ludwig_hpo.execution.spec import TrialSpec
    from ludwig_hpo.train.loop import Job

    spec = TrialSpec(
        raw={"name": "x", "trainer": {"epochs": 2}},
        params={"trainer.learning_rate": 0.01},
        job=Job("fold", fold=1, epochs=3, stop_epochs=(1, 2)),
        trial_id="t1",
        storage_path="/tmp/train",
        mode="max",
    )
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_a_trial_context_refuses_an_unknown_mode():
    from ludwig_hpo.execution.trainable import TrialContext

    with pytest.raises(ValueError, match="'min' or 'max'"):
        TrialContext(raw={}, data=[], storage_path="", num_workers=1, use_gpu=False, cpus_per_worker=1.0, mode="low")
