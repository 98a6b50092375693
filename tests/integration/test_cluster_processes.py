"""A local cluster for warm worker groups and one-process trials (no Ray Train jobs) runs no
dashboard process, and what a sweep asks of Ray still works on it: actors, tasks, the object
store and Ray Data. A real Ray cluster, stopped at the end of the module."""

from __future__ import annotations

import contextlib
import sys

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process tree read with psutil on Linux"),
]


@pytest.fixture(scope="module")
def cluster():
    from ludwig_hpo.execution.cluster import local_cluster

    with local_cluster(num_cpus=2, num_gpus=0, trial_slots=1, train_jobs=False):
        yield


def _commands() -> list[str]:
    import psutil

    commands = []
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it ended meanwhile
            commands.append(" ".join(p.cmdline()))
    return commands


def test_a_cluster_without_train_jobs_starts_no_dashboard_process(cluster):
    import ray

    commands = _commands()
    assert any("gcs_server" in c for c in commands) and any("raylet" in c for c in commands), commands
    assert not [c for c in commands if "dashboard/dashboard.py" in c or c.startswith("ray-dashboard-")], commands
    assert ray.get_runtime_context().gcs_address  # the driver is connected
    from ray._private import worker

    assert worker._global_node.webui_url == ""  # as Ray has it for a dashboard that serves nothing


def test_actors_tasks_the_object_store_and_ray_data_work_without_it(cluster):
    import numpy as np
    import ray

    @ray.remote(num_cpus=0)
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def add(self, k: int) -> int:
            self.n += k
            return self.n

    @ray.remote(num_cpus=1)
    def total(a: np.ndarray) -> float:
        return float(a.sum())

    counter = Counter.remote()
    assert ray.get([counter.add.remote(1), counter.add.remote(2)]) == [1, 3]
    ref = ray.put(np.arange(1000, dtype=np.float64))
    assert ray.get(total.remote(ref)) == 499500.0
    ray.kill(counter)

    import ray.data

    rows = ray.data.range(100, override_num_blocks=4).map(lambda r: {"id": r["id"] * 2}).take_all()
    assert sorted(r["id"] for r in rows) == list(range(0, 200, 2))
