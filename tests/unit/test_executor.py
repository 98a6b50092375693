"""Which trial executor a sweep uses, what its trials reserve, and the config field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ludwig_hpo.config.backend import BackendConfig
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
    assert "; set backend.trial_executor: fresh" in choose_executor("auto", use_gpu=False).reason
    assert "; set backend.trial_executor: pooled" in choose_executor("auto", use_gpu=True).reason


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


# ---------------------------------------------------------------- a lost worker's description

_EOF_DEATH = (
    "The actor died unexpectedly before finishing this task.\n\tclass_name: PoolWorker\n\tpid: 4242\n"
    "\tip: 127.0.0.1\nThe actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file."
)


@pytest.mark.parametrize(
    ("message", "view", "how"),
    [
        (_EOF_DEATH, {}, "was killed by signal 9 (SIGKILL)"),
        (_EOF_DEATH, {"oom_kills_at_start": 3, "oom_kills": 4}, "was killed by the kernel's OOM killer (SIGKILL)"),
        (_EOF_DEATH, {"oom_kills_at_start": 3, "oom_kills": 3}, "was killed by signal 9 (SIGKILL)"),
        (_EOF_DEATH, {"fatal": "Segmentation fault"}, "crashed (Fatal Python error: Segmentation fault)"),
        (
            "Worker exit type: USER_ERROR Worker exit detail: Worker exits with an exit code 3.",
            {},
            "exited with code 3",
        ),
        ("Task was killed due to the node running low on memory.", {}, "was killed by Ray's memory monitor"),
        (_EOF_DEATH, {"node_gone": True}, "was lost with its node"),
    ],
    ids=["sigkill", "kernel-oom", "no-new-oom", "crash", "exit-code", "ray-oom", "node-lost"],
)
def test_a_lost_workers_end_is_told_from_rays_message_and_its_nodes_view(message, view, how):
    from ludwig_hpo.execution.worker_loss import how_it_ended

    assert how_it_ended(message, view).startswith(how)


def test_a_lost_worker_is_one_line_naming_rank_pid_node_and_how_through_pickling_and_tracebacks():
    import pickle

    from ludwig_hpo.errors import WorkerLoss, WorkerLostError, one_line_error

    loss = WorkerLoss(1, 2, pid=4242, node="127.0.0.1", how="was killed by signal 9 (SIGKILL)")
    err = pickle.loads(pickle.dumps(WorkerLostError(loss)))
    assert err.loss == loss
    line = "rank 1 of 2 (pid 4242) on node 127.0.0.1 was killed by signal 9 (SIGKILL) during training"
    assert str(err) == line
    # as Tune's error file holds it: a peer's collective error, then ours
    text = f"RuntimeError: rank 0: Connection reset by peer\n\nludwig_hpo.errors.WorkerLostError: {line}\n"
    assert one_line_error(text) == f"WorkerLostError: {line}"


# ---------------------------------------------------------------------------- Ludwig's backend
def test_a_trial_without_backend_is_one_worker_as_ludwig_trains_it():
    b = BackendConfig()
    assert (b.num_workers, b.use_gpu, b.strategy) == (1, "auto", "ddp")
    assert BackendConfig.model_validate({"type": "local"}).num_workers == 1


def test_ludwigs_ray_backend_trainer_section_sets_the_workers():
    b = BackendConfig.model_validate(
        {
            "type": "ray",
            "trainer": {
                "num_workers": 3,
                "use_gpu": True,
                "strategy": {"type": "fsdp"},
                "resources_per_worker": {"CPU": 2, "GPU": 0.5},
            },
            "processor": {"type": "dask", "parallelism": 4},
            "cache_dir": "s3://bucket/cache",
            "cache_credentials": {"key": "x"},
            "loader": {"fully_executed": False, "window_size_bytes": 500},
        }
    )
    assert (b.num_workers, b.use_gpu, b.strategy, b.cpus_per_worker, b.gpus_per_worker) == (3, True, "fsdp", 2, 0.5)
    assert BackendConfig.model_validate({"trainer": {"resources_per_worker": {"GPU": 0}}}).use_gpu is False
    # the flat keys (and so --num-workers) win over the trainer section's
    assert BackendConfig.model_validate({"num_workers": 4, "trainer": {"num_workers": 2}}).num_workers == 4


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ({"type": "local", "num_workers": 2}, "backend type local trains each trial in one process"),
        ({"type": "deepspeed"}, "backend type 'deepspeed' is not supported yet"),
        ({"type": "ray", "trainer": {"strategy": "deepspeed"}}, "strategy 'deepspeed' is not supported yet"),
        ({"trainer": {"strategy": {"type": "ddp", "find_unused": True}}}, "option 'find_unused' is not supported"),
        ({"trainer": {"max_retries": 3}}, "backend.trainer.max_retries is not supported yet"),
        ({"trainer": {"resources_per_worker": {"CPU": 1, "TPU": 1}}}, "custom resource 'TPU' per worker"),
    ],
)
def test_ludwig_backend_keys_not_supported_are_one_line(backend, message):
    with pytest.raises(ValidationError, match=message):
        BackendConfig.model_validate(backend)


@pytest.mark.parametrize(
    ("backend", "executor", "expected"),
    [
        ({}, {"cpu_resources_per_trial": 2}, (1, 2.0, "auto", 1.0)),
        ({"type": "ray", "trainer": {"num_workers": 2}}, {"cpu_resources_per_trial": 4}, (2, 2.0, "auto", 1.0)),
        ({}, {"gpu_resources_per_trial": 0}, (1, 1.0, False, 1.0)),
        ({}, {"cpu_resources_per_trial": 3, "gpu_resources_per_trial": 1}, (1, 3.0, True, 1.0)),
        ({"num_workers": 2}, {"gpu_resources_per_trial": 1}, (2, 1.0, True, 0.5)),
    ],
)
def test_ludwigs_resources_per_trial_become_the_workers_resources(backend, executor, expected):
    from ludwig_hpo.config.backend import apply_trial_resources

    raw = apply_trial_resources({"backend": backend, "hyperopt": {"executor": executor}})
    b = BackendConfig.model_validate(raw["backend"])
    assert (b.num_workers, b.cpus_per_worker, b.use_gpu, b.gpus_per_worker) == expected


@pytest.mark.parametrize(
    ("backend", "executor", "message"),
    [
        ({}, {"gpu_resources_per_trial": 2}, "gpu_resources_per_trial 2 exceeds the trial's 1 worker"),
        ({"cpus_per_worker": 2}, {"cpu_resources_per_trial": 2}, "a trial's resources are set twice"),
        ({"use_gpu": True}, {"gpu_resources_per_trial": 0}, "gpu_resources_per_trial is 0 but backend use_gpu is"),
    ],
)
def test_resources_per_trial_that_contradict_the_backend_are_one_line(backend, executor, message):
    from ludwig_hpo.config.backend import apply_trial_resources

    with pytest.raises(ValueError, match=message):
        apply_trial_resources({"backend": backend, "hyperopt": {"executor": executor}})
