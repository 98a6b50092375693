"""Resource planning: how many trials fit on a cluster at once, or the exact reason none does."""

from __future__ import annotations

import pytest

from ludwig_hpo.errors import ResourceError
from ludwig_hpo.execution.resources import NodeShape, nodes_from_ray, plan_resources

# (cluster cpus, cluster gpus, workers, cpus per worker, use_gpu, max_concurrent, num_samples) -> concurrency
FITS = [
    ((8, 0, 2, 1.0, False, "auto", None), 4),
    ((8, 0, 2, 1.0, False, "auto", 3), 3),
    ((8, 0, 2, 1.0, False, 2, 10), 2),
    ((8, 0, 2, 1.0, False, 16, 10), 4),
    ((2, 0, 2, 1.0, False, "auto", 10), 1),
    ((2, 0, 1, 1.0, False, "auto", 10), 2),
    ((3, 0, 2, 1.0, False, "auto", 10), 1),
    ((2, 0, 2, 0.5, False, "auto", 10), 2),
    ((0.9, 0, 3, 0.1, False, "auto", 10), 3),  # 3 x 0.1 is 0.30000000000000004: float noise does not cost a slot
    ((1, 0, 3, 1 / 3, False, "auto", 10), 1),
    ((8, 4, 2, 1.0, True, "auto", 10), 2),
    ((8, 4, 1, 2.0, True, "auto", 10), 4),
    ((8, 8, 1, 1.0, True, "auto", 3), 3),
    ((16, 4, 4, 1.0, True, "auto", None), 1),
    ((16, 4, 2, 1.0, False, "auto", None), 8),  # GPUs present but unused
    ((64, 1, 1, 1.0, True, 1, 1), 1),
]


@pytest.mark.parametrize(("args", "concurrent"), FITS, ids=[str(a) for a, _ in FITS])
def test_concurrency(args, concurrent):
    cpus, gpus, workers, cpw, use_gpu, max_conc, samples = args
    plan = plan_resources(
        num_workers=workers,
        use_gpu=use_gpu,
        cpus_per_worker=cpw,
        cluster_cpus=cpus,
        cluster_gpus=gpus,
        max_concurrent=max_conc,
        num_samples=samples,
    )
    assert plan.max_concurrent == concurrent
    assert plan.cpus_per_trial == pytest.approx(workers * cpw)
    assert plan.gpus_per_trial == (workers if use_gpu else 0)
    assert f"{concurrent} trial(s) at once" in plan.describe()


# nodes as (cpus, gpus), workers, cpus per worker, gpus per worker (0: no GPU) -> concurrency
CLUSTERS = [
    ([(2, 0), (2, 0)], 2, 1.0, 0, 2),  # the loopback two-node test cluster
    ([(2, 0), (2, 0)], 4, 1.0, 0, 1),  # a trial's workers spread over both nodes
    ([(3, 0), (3, 0)], 2, 2.0, 0, 1),  # 1 two-CPU worker per node: the spare CPUs do not make a third
    ([(4, 2), (4, 2)], 2, 1.0, 1, 2),  # one worker per GPU
    ([(4, 2), (4, 2)], 4, 1.0, 1, 1),
    ([(8, 1), (8, 1), (8, 1)], 1, 1.0, 1, 3),
    ([(8, 2)], 2, 1.0, 0.5, 2),  # fractional GPUs: two trials share the two GPUs
    ([(8, 2)], 2, 1.0, 0.25, 4),
    ([(16, 8), (2, 0)], 4, 1.0, 1, 2),  # the CPU-only node takes no GPU worker
    ([(64, 0), (1, 0)], 8, 4.0, 0, 2),
]


@pytest.mark.parametrize(
    ("nodes", "workers", "cpw", "gpw", "concurrent"),
    CLUSTERS,
    ids=[f"{c[0]}-{c[1]}x{c[2]}cpu{c[3]}gpu" for c in CLUSTERS],
)
def test_concurrency_on_multi_node_clusters(nodes, workers, cpw, gpw, concurrent):
    plan = plan_resources(
        num_workers=workers,
        use_gpu=bool(gpw),
        cpus_per_worker=cpw,
        gpus_per_worker=gpw or 1.0,
        nodes=[NodeShape(c, g) for c, g in nodes],
        existing_cluster=True,
    )
    assert plan.max_concurrent == concurrent
    assert plan.nodes == len(nodes)
    assert plan.trial_token == {"memory": 1}


# (cluster cpus, cluster gpus, workers, cpus per worker, use_gpu) -> (key, exact one-line error)
REFUSED = [
    (
        (2, 0, 4, 1.0, False),
        "backend.num_workers: a trial needs 4 workers x 1 CPU = 4 CPUs but the cluster has 2; "
        "fix: set backend.num_workers <= 2 or lower backend.cpus_per_worker",
    ),
    (
        (2, 0, 2, 1.5, False),
        "backend.num_workers: a trial needs 2 workers x 1.5 CPU = 3 CPUs but the cluster has 2; "
        "fix: set backend.num_workers <= 1 or lower backend.cpus_per_worker",
    ),
    (
        (8, 1, 2, 1.0, True),
        "backend.use_gpu: a trial needs 2 GPUs (1 per worker) but the cluster has 1; "
        "fix: lower backend.num_workers or set backend.use_gpu: false",
    ),
    (
        (8, 0, 1, 1.0, True),
        "backend.use_gpu: a trial needs 1 GPUs (1 per worker) but no node has 1 "
        "(most on one node: 0); fix: set backend.use_gpu: false",
    ),
    (
        (4, 0, 1, 8.0, False),
        "backend.cpus_per_worker: one worker needs 8 CPUs but the cluster has 4; fix: set backend.cpus_per_worker <= 4",
    ),
]


@pytest.mark.parametrize(("args", "line"), REFUSED, ids=[str(r[0]) for r in REFUSED])
def test_refused(args, line):
    cpus, gpus, workers, cpw, use_gpu = args
    with pytest.raises(ResourceError) as info:
        plan_resources(num_workers=workers, use_gpu=use_gpu, cpus_per_worker=cpw, cluster_cpus=cpus, cluster_gpus=gpus)
    assert info.value.one_line() == line
    assert isinstance(info.value, RuntimeError)


MULTI_NODE_REFUSED = [
    (
        [(2, 0), (2, 0)],
        2,
        4.0,
        0,
        "backend.cpus_per_worker: one worker needs 4 CPUs but the largest node has 2; "
        "fix: set backend.cpus_per_worker <= 2",
    ),
    (
        [(3, 0), (3, 0)],
        3,
        2.0,
        0,
        "backend.num_workers: a trial needs 3 workers of 2 CPU but the cluster's 2 nodes "
        "hold only 2 such workers; fix: set backend.num_workers <= 2 or lower backend.cpus_per_worker",
    ),
    (
        [(4, 1), (4, 1)],
        3,
        1.0,
        1,
        "backend.use_gpu: a trial needs 3 GPUs (1 per worker) but the cluster has 2; "
        "fix: lower backend.num_workers or set backend.use_gpu: false",
    ),
    (
        [(4, 0.5)],
        1,
        1.0,
        1,
        "backend.use_gpu: a trial needs 1 GPUs (1 per worker) but no node has 1 "
        "(most on one node: 0.5); fix: lower backend.gpus_per_worker",
    ),
]


@pytest.mark.parametrize(
    ("nodes", "workers", "cpw", "gpw", "line"), MULTI_NODE_REFUSED, ids=[str(r[0]) for r in MULTI_NODE_REFUSED]
)
def test_refused_on_multi_node_clusters(nodes, workers, cpw, gpw, line):
    with pytest.raises(ResourceError) as info:
        plan_resources(
            num_workers=workers,
            use_gpu=bool(gpw),
            cpus_per_worker=cpw,
            gpus_per_worker=gpw or 1.0,
            nodes=[NodeShape(c, g) for c, g in nodes],
        )
    assert info.value.one_line() == line


def test_nodes_from_ray_skips_dead_nodes():
    nodes = [
        {"Alive": True, "Resources": {"CPU": 2.0, "GPU": 1.0, "memory": 1e9}},
        {"Alive": False, "Resources": {"CPU": 64.0}},
        {"Alive": True, "Resources": {"CPU": 4.0}},
    ]
    assert nodes_from_ray(nodes) == [NodeShape(2, 1), NodeShape(4, 0)]


def test_describe():
    plan = plan_resources(num_workers=2, use_gpu=True, cpus_per_worker=1.0, cluster_cpus=8, cluster_gpus=2)
    assert plan.describe() == "2 worker(s) x 1 CPU + 1 GPU per trial; cluster 8 CPU / 2 GPU -> 1 trial(s) at once"
    assert plan.trial_token == {"trial_slot": 1}


@pytest.mark.parametrize(("cpus", "asked", "fit"), [(4, 3, 2), (2, 2, 1)])
def test_max_concurrent_trials_above_what_fits_is_lowered_with_one_line_saying_why(cpus, asked, fit):
    plan = plan_resources(
        num_workers=2, use_gpu=False, cpus_per_worker=1.0, cluster_cpus=cpus, max_concurrent=asked, num_samples=10
    )
    assert plan.max_concurrent == fit
    note = plan.concurrency_note()
    assert note is not None and "\n" not in note
    assert note == (
        f"note: max_concurrent_trials {asked} cannot be honoured: {asked} concurrent trials of 2 worker(s) x 1 CPU "
        f"need {2 * asked} CPUs; this cluster has {cpus} CPUs, so {fit} run at once: lower "
        "hyperopt.executor.cpu_resources_per_trial (backend.cpus_per_worker) or backend.num_workers, "
        f"or run on {2 * asked} CPUs"
    )


def test_max_concurrent_trials_short_of_gpus_names_the_gpu_request():
    plan = plan_resources(
        num_workers=1, use_gpu=True, cpus_per_worker=1.0, cluster_cpus=8, cluster_gpus=1, max_concurrent=2
    )
    assert plan.max_concurrent == 1
    assert plan.concurrency_note() == (
        "note: max_concurrent_trials 2 cannot be honoured: 2 concurrent trials of 1 worker(s) x 1 CPU + 1 GPU "
        "need 2 CPUs / 2 GPUs; this cluster has 8 CPUs / 1 GPUs, so 1 run at once: lower "
        "hyperopt.executor.gpu_resources_per_trial or backend.num_workers, or run on 2 CPUs / 2 GPUs"
    )


@pytest.mark.parametrize("asked", ["auto", 1, 2])
def test_max_concurrent_trials_that_fits_says_nothing(asked):
    plan = plan_resources(
        num_workers=2, use_gpu=False, cpus_per_worker=1.0, cluster_cpus=4, max_concurrent=asked, num_samples=10
    )
    assert plan.concurrency_note() is None
