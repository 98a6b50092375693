"""Resource planning: how many DDP trials fit on the cluster at once, or why none does."""

from __future__ import annotations

import pytest

from ludwig_hpo.errors import ResourceError
from ludwig_hpo.resources import plan_resources

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
    plan = plan_resources(num_workers=workers, use_gpu=use_gpu, cpus_per_worker=cpw, cluster_cpus=cpus,
                          cluster_gpus=gpus, max_concurrent=max_conc, num_samples=samples)
    assert plan.max_concurrent == concurrent
    assert plan.cpus_per_trial == pytest.approx(workers * cpw)
    assert plan.gpus_per_trial == (workers if use_gpu else 0)
    assert f"{concurrent} trial(s) at once" in plan.describe()


# (cluster cpus, cluster gpus, workers, cpus per worker, use_gpu) -> (key, message part, fix part)
REFUSED = [
    ((2, 0, 4, 1.0, False), "backend.num_workers", "needs 4 workers x 1 CPU = 4 CPUs but the cluster has 2",
     "set backend.num_workers <= 2 or lower backend.cpus_per_worker"),
    ((2, 0, 2, 1.5, False), "backend.num_workers", "= 3 CPUs but the cluster has 2", "set backend.num_workers <= 1"),
    ((8, 1, 2, 1.0, True), "backend.use_gpu", "needs 2 GPUs (one per worker) but the cluster has 1",
     "lower backend.num_workers or set backend.use_gpu: false"),
    ((8, 0, 1, 1.0, True), "backend.use_gpu", "needs 1 GPUs (one per worker) but the cluster has 0",
     "set backend.use_gpu: false"),
]


@pytest.mark.parametrize(("args", "key", "message", "fix"), REFUSED, ids=[str(r[0]) for r in REFUSED])
def test_refused(args, key, message, fix):
    cpus, gpus, workers, cpw, use_gpu = args
    with pytest.raises(ResourceError) as info:
        plan_resources(num_workers=workers, use_gpu=use_gpu, cpus_per_worker=cpw, cluster_cpus=cpus,
                       cluster_gpus=gpus)
    err = info.value
    assert err.key == key
    assert message in err.message
    assert fix in err.fix
    assert isinstance(err, RuntimeError)
    assert "\n" not in str(err)


def test_describe_mentions_gpu():
    plan = plan_resources(num_workers=2, use_gpu=True, cpus_per_worker=1.0, cluster_cpus=8, cluster_gpus=2)
    assert plan.describe() == "2 DDP worker(s) x 1 CPU + 2 GPU per trial; cluster 8 CPU / 2 GPU -> 1 trial(s) at once"


def test_single_worker_too_big_suggests_fewer_cpus_per_worker():
    with pytest.raises(ResourceError) as info:
        plan_resources(num_workers=1, use_gpu=False, cpus_per_worker=8.0, cluster_cpus=4, cluster_gpus=0)
    assert "<= 0" not in info.value.fix
    assert "backend.cpus_per_worker" in info.value.fix
