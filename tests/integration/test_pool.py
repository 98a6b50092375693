"""The ``pooled`` trial executor on a real Ray cluster: warm DDP worker groups (gloo, 2 CPU
workers) running successive Tune trials, against the ``fresh`` executor (one Ray Train job
per trial). One Ray cluster for the module; every test stops the groups it started."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.errors import one_line_error
from ludwig_hpo.execution.pool import WorkerPools
from ludwig_hpo.execution.resources import plan_resources

from ..conftest import SWEEPS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


@pytest.fixture(scope="module")
def cluster():
    from ludwig_hpo.execution.cluster import local_cluster

    with local_cluster(num_cpus=2, num_gpus=0, trial_slots=2):
        yield


def test_the_clusters_processes_are_outside_the_drivers_process_group(cluster):
    """A signal to the driver's process group must not reach the raylet before the driver."""
    import subprocess

    import ray

    @ray.remote(num_cpus=0)
    def session() -> int:
        return os.getsid(0)

    ps = subprocess.run(
        ["ps", "-o", "pgid=,comm=", "--ppid", str(os.getpid())], capture_output=True, text=True, check=True
    ).stdout
    rows = (line.split(None, 1) for line in ps.splitlines() if line.strip())
    daemons = {name: int(pgid) for pgid, name in rows if name != "ps"}  # ps itself is in our group
    assert {"gcs_server", "raylet"} <= set(daemons), daemons
    assert os.getpgid(0) not in set(daemons.values()), daemons
    # a worker leads a process group of its own in any case; it is in the raylet's session
    assert ray.get(session.remote()) == daemons["raylet"] != os.getsid(0), daemons


def test_the_local_cluster_runs_only_the_processes_a_sweep_uses(cluster):
    """No autoscaler monitor, no log monitor, and the dashboard's state API as its only module
    (Ray Train's placement-group cleaner asks it whether a controller is alive)."""
    import contextlib

    import psutil
    import ray
    from ray.util.state import get_actor

    from ludwig_hpo.execution.cluster import DASHBOARD_MODULES

    commands = []
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it ended meanwhile
            commands.append(" ".join(p.cmdline()))
    assert any("gcs_server" in c for c in commands) and any("dashboard/dashboard.py" in c for c in commands), commands
    assert not [c for c in commands if "log_monitor.py" in c or "autoscaler/_private/monitor.py" in c], commands
    modules = {
        c.split()[0].removeprefix("ray-dashboard-").rsplit("-", 1)[0]
        for c in commands
        if c.startswith("ray-dashboard-")
    }
    assert modules == set(DASHBOARD_MODULES), commands

    @ray.remote(num_cpus=0)
    class Probe:
        def ping(self) -> bool:
            return True

    probe = Probe.remote()
    assert ray.get(probe.ping.remote())
    assert get_actor(probe._actor_id.hex()).state == "ALIVE"
    ray.kill(probe)


def _loaded(**trainer):
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    raw = {**loaded.raw, "trainer": {**loaded.raw["trainer"], "batch_size": 32, **trainer}}
    from ludwig_hpo.config.schema import SweepConfig

    cfg = SweepConfig.model_validate(raw)
    return raw, cfg, prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)


class _Recorder:
    """A Tune callback keeping every trial's per-epoch results and final status."""

    def __new__(cls, on_result=None):
        from ray.tune import Callback

        class Recorder(Callback):
            def __init__(self):
                self.results: dict[str, list[dict]] = {}
                self.status: dict[str, str] = {}
                self.config: dict[str, dict] = {}
                self.errors: dict[str, str] = {}

            def on_trial_result(self, iteration, trials, trial, result, **info):
                self.results.setdefault(trial.trial_id, []).append(dict(result))
                self.config[trial.trial_id] = dict(trial.config)
                if on_result is not None:
                    on_result(self, trial, result)

            def on_trial_complete(self, iteration, trials, trial, **info):
                self.status[trial.trial_id] = "TERMINATED"

            def on_trial_error(self, iteration, trials, trial, **info):
                self.status[trial.trial_id] = "ERROR"
                self.config[trial.trial_id] = dict(trial.config)
                path = getattr(trial, "error_file", None)
                text = open(path).read() if path and os.path.isfile(path) else str(trial.get_error())
                self.errors[trial.trial_id] = one_line_error(text)

        return Recorder()


#: How long a gated trial's rank 0 waits at the boundary before the test's assertions say so.
GATE_TIMEOUT_S = 300.0


class GatedPools(WorkerPools):
    """The sweep's pools actor, except that rank 0 of a trial whose learning rate is in
    ``gated`` waits at its first epoch boundary (its metrics already handed to the trial)
    until the trial is stopped (:meth:`stop`) or the test opens the gate (:meth:`open_gate`).
    The group is thus at a known point whatever the machine's speed."""

    def __init__(self, *args, gated: tuple[float, ...] = ()) -> None:
        super().__init__(*args)
        self.gated = set(gated)
        self.gates: dict[str, asyncio.Event] = {}  # token -> its gate, until rank 0 reaches it
        self.held: dict[str, asyncio.Event] = {}  # token -> the gate rank 0 waits at

    async def start(self, spec):
        token = await super().start(spec)  # no report can arrive before this returns
        if spec.params.get("trainer.learning_rate") in self.gated:
            self.gates[token] = asyncio.Event()
        return token

    async def report(self, token, metrics):
        stop = await super().report(token, metrics)
        gate = self.gates.pop(token, None)
        if gate is None or stop:
            return stop
        self.held[token] = gate
        try:
            await asyncio.wait_for(gate.wait(), GATE_TIMEOUT_S)
        except asyncio.TimeoutError:
            pass
        run = self.runs.get(token)
        return run is None or run.stop

    async def stop(self, token):
        await super().stop(token)
        if token in self.held:
            self.held[token].set()

    async def holding(self) -> list[str]:
        """The trial ids whose rank 0 waits at the gate now."""
        return [self.runs[t].trial_id for t, g in self.held.items() if not g.is_set() and t in self.runs]

    async def open_gate(self) -> None:
        for gate in self.held.values():
            gate.set()


def _sweep(
    tmp_path,
    executor: str,
    learning_rates: list[float],
    *,
    num_workers: int = 2,
    concurrent: int = 1,
    scheduler=None,
    on_result=None,
    name: str = "t",
    gated: tuple[float, ...] = (),
    pools_cls: type | None = None,
    **trainer,
):
    """Run one trial per learning rate (in this order) with ``executor``; returns
    (recorder, pools info or None). The trials of the ``gated`` learning rates wait at their
    first epoch boundary (:class:`GatedPools`). A ``pools_cls`` replaces the pools actor's class;
    its warm-up then ends before the first trial starts."""
    import ray
    from ray import tune

    from ludwig_hpo.execution.trainable import TrialContext, search_trial, trial_resources

    raw, cfg, data = _loaded(**trainer)
    raw = {**raw, "backend": {**raw["backend"], "num_workers": num_workers}}
    plan = plan_resources(
        num_workers=num_workers,
        use_gpu=False,
        cpus_per_worker=1.0,
        cluster_cpus=2,
        cluster_gpus=0,
        max_concurrent=concurrent,
    )
    data_ref = [ray.put(data)]
    pools = None
    if executor == "pooled":
        pools = (
            ray.remote(pools_cls or GatedPools)
            .options(num_cpus=0, max_concurrency=1000)
            .remote(concurrent, num_workers, 1.0, False, data_ref, gated=gated)
        )
        warming = pools.warm.remote()
        if pools_cls is not None:
            ray.get(warming)
    ctx = TrialContext(
        raw=raw,
        data=data_ref,
        storage_path=str(tmp_path / "train"),
        num_workers=num_workers,
        use_gpu=False,
        cpus_per_worker=1.0,
        mode="max",
        pools=pools,
    )
    rec = _Recorder(on_result)
    rec.pools = pools
    try:
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(search_trial, ctx=ctx), trial_resources(plan, executor)),
            param_space={"trainer.learning_rate": tune.grid_search(learning_rates)},
            tune_config=tune.TuneConfig(
                max_concurrent_trials=concurrent, reuse_actors=pools is not None, scheduler=scheduler
            ),
            run_config=tune.RunConfig(
                name=name,
                storage_path=str(tmp_path / "ray"),
                verbose=0,
                callbacks=[rec],
                failure_config=tune.FailureConfig(max_failures=0),
            ),
        )
        tuner.fit()
        info = None
        if pools is not None:  # a stopped trial's group may still be finishing its epoch
            assert ray.get(pools.idle.remote(60.0))
            info = ray.get(pools.info.remote())
    finally:
        if pools is not None:
            ray.get(pools.shutdown.remote())
            ray.kill(pools)
    return rec, info


def _by_lr(rec) -> dict[float, list[dict]]:
    return {rec.config[t]["trainer.learning_rate"]: rs for t, rs in rec.results.items()}


KEYS = ("objective", "validation/malignant/loss", "validation/malignant/roc_auc", "train/combined/running_loss")


def test_three_trials_in_a_row_on_one_warm_group_match_fresh_trials(cluster, tmp_path):
    lrs = [3e-2, 1e-3, 1e-2]
    fresh, _ = _sweep(tmp_path / "fresh", "fresh", lrs)
    pooled, info = _sweep(tmp_path / "pooled", "pooled", lrs)
    assert set(fresh.status.values()) == {"TERMINATED"} and set(pooled.status.values()) == {"TERMINATED"}
    # one group, started once, ran all three trials one after the other
    assert [g["builds"] for g in info["groups"]] == [1]
    assert [h["slot"] for h in info["history"]] == [0, 0, 0] and {h["build"] for h in info["history"]} == {1}
    f, p = _by_lr(fresh), _by_lr(pooled)
    assert f.keys() == p.keys() == set(lrs)
    for lr in lrs:
        assert [r["epoch"] for r in p[lr]] == [1, 2]
        for a, b in zip(f[lr], p[lr], strict=True):
            for k in KEYS:
                assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), (lr, a["epoch"], k)
        assert p[lr][0]["world_size"] == 2
        # each group started at its first try
        assert f[lr][0]["worker_group_restarts"] == p[lr][0]["worker_group_restarts"] == 0
        assert all("worker_group_restarts" not in r for r in f[lr][1:] + p[lr][1:])  # the first report only
    # the written checkpoints reached Tune (which keeps them in the trial's folder), the last
    # epoch's always; the folders rank 0 handed over are gone
    for rs in p.values():
        assert rs[-1].get("checkpoint_dir_name")
        assert all(bool(r.get("checkpoint_dir_name")) == ("checkpoint_epoch" in r) for r in rs)
    assert not list((tmp_path / "pooled" / "train").glob("*/pending_*"))


def test_a_raising_trial_fails_and_leaves_the_group_usable(cluster, tmp_path):
    # lr 1e6 with SGD diverges: every rank raises FloatingPointError at the same epoch
    rec, info = _sweep(tmp_path, "pooled", [1e6, 1e-2], optimizer={"type": "sgd"})
    status = {rec.config[t]["trainer.learning_rate"]: s for t, s in rec.status.items()}
    assert status == {1e6: "ERROR", 1e-2: "TERMINATED"}
    assert [h["status"] for h in info["history"]] == ["failed", "finished"]
    assert {h["build"] for h in info["history"]} == {1}  # the same group ran the next trial
    assert len(_by_lr(rec)[1e-2]) == 2


def test_a_trial_stopped_by_asha_frees_the_group_at_the_next_epoch_boundary(cluster, tmp_path):
    from ray.tune.schedulers import AsyncHyperBandScheduler

    asha = AsyncHyperBandScheduler(
        time_attr="epoch", metric="objective", mode="max", max_t=8, grace_period=1, reduction_factor=2
    )
    # the good trial finishes; the hopeless one (lr 1e-7) is below the rung's cutoff at epoch 1,
    # and its group waits at that epoch's boundary until the stop reaches it
    rec, info = _sweep(tmp_path, "pooled", [3e-2, 1e-7, 1e-2], scheduler=asha, epochs=8, gated=(1e-7,))
    by_lr = _by_lr(rec)
    assert [r["epoch"] for r in by_lr[3e-2]] == list(range(1, 9))
    assert len(by_lr[1e-7]) == 1  # Tune saw one epoch and stopped it
    hist = {h["trial_id"]: h for h in info["history"]}
    stopped = next(t for t in rec.results if rec.config[t]["trainer.learning_rate"] == 1e-7)
    assert hist[stopped]["status"] == "stopped"
    # the stop reached the group at the boundary of epoch 1, and every rank left there
    assert (hist[stopped]["epochs_at_stop"], hist[stopped]["epochs"]) == (1, 1)
    assert {h["build"] for h in info["history"]} == {1} and len(info["history"]) == 3


def _wait_gone(pid: int, timeout_s: float = 120.0) -> None:
    """Until process ``pid`` is gone (reaped by its parent, the raylet)."""
    import time

    deadline = time.monotonic() + timeout_s
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), f"process {pid} outlived SIGKILL"


def _node_ip() -> str:
    import ray

    return ray.util.get_node_ip_address()


def test_a_killed_worker_fails_its_trial_with_its_rank_signal_and_node_and_the_next_trial_gets_a_new_group(
    cluster, tmp_path, capfd
):
    import ray

    killed = []

    def kill_rank1(rec, trial, result):
        # the first trial's rank 0 waits at its first epoch boundary: rank 1 dies mid-trial
        if not killed:
            assert ray.get(rec.pools.holding.remote()) == [trial.trial_id]
            pid = ray.get(rec.pools.info.remote())["groups"][0]["pids"][1]
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid)
            killed.append((trial.trial_id, pid))
            ray.get(rec.pools.open_gate.remote())

    rec, info = _sweep(tmp_path, "pooled", [1e-2, 3e-2], on_result=kill_rank1, epochs=4, gated=(1e-2,))
    assert len(killed) == 1
    victim, pid = killed[0]
    assert rec.status[victim] == "ERROR"
    assert rec.errors[victim].startswith(f"WorkerLostError: rank 1 of 2 (pid {pid}) on node {_node_ip()} "), rec.errors
    assert "SIGKILL" in rec.errors[victim] and rec.errors[victim].endswith("during training")
    assert [s for t, s in rec.status.items() if t != victim] == ["TERMINATED"]
    assert [h["status"] for h in info["history"]] == ["failed", "finished"]
    assert [h["build"] for h in info["history"]] == [1, 2]  # the next trial ran on a new group
    assert pid not in info["groups"][0]["pids"]
    printed = "".join(capfd.readouterr())
    assert "(raylet)" not in printed and "A worker died" not in printed, printed[-2000:]  # Ray's raw line


def _pid_then_wait(spec, data) -> None:
    """A fresh job's stand-in loop: each rank writes its pid beside the trial's checkpoints,
    then waits (rank 1 until it is killed; rank 0 until Ray Train ends the job)."""
    import time
    from pathlib import Path

    import ray.train

    rank = ray.train.get_context().get_world_rank()
    folder = Path(spec.storage_path) / spec.trial_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank{rank}.pid.tmp").write_text(str(os.getpid()))
    (folder / f"rank{rank}.pid.tmp").rename(folder / f"rank{rank}.pid")
    while True:
        time.sleep(0.1)


def _fresh_trial_with_a_stand_in_loop(config: dict) -> None:
    from ray import tune

    from ludwig_hpo.execution.fresh import fit_fresh
    from ludwig_hpo.execution.spec import TrialSpec

    spec = TrialSpec(raw={}, trial_id=tune.get_context().get_trial_id(), storage_path=config["storage"])
    fit_fresh(spec, [None], num_workers=2, use_gpu=False, cpus_per_worker=1.0, gpus_per_worker=1.0, loop=_pid_then_wait)


def test_a_killed_train_worker_fails_its_fresh_trial_with_its_rank_signal_and_node(cluster, tmp_path):
    import threading
    import time

    from ray import tune

    storage = tmp_path / "train"
    killed: list[int] = []
    done = threading.Event()

    def kill_rank1() -> None:  # once rank 1 wrote its pid: it is in the trial's loop
        while not done.is_set():
            found = list(storage.glob("*/rank1.pid"))
            if found:
                pid = int(found[0].read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_rank1, daemon=True)
    killer.start()
    rec = _Recorder()
    try:
        tune.Tuner(
            tune.with_resources(_fresh_trial_with_a_stand_in_loop, {"cpu": 0, "trial_slot": 1}),
            param_space={"storage": str(storage)},
            run_config=tune.RunConfig(
                name="fresh-kill",
                storage_path=str(tmp_path / "ray"),
                verbose=0,
                callbacks=[rec],
                failure_config=tune.FailureConfig(max_failures=0),
            ),
        ).fit()
    finally:
        done.set()
        killer.join()
    assert len(killed) == 1 and list(rec.status.values()) == ["ERROR"]
    (error,) = rec.errors.values()
    assert error.startswith(f"WorkerLostError: rank 1 of 2 (pid {killed[0]}) on node {_node_ip()} "), error
    assert "SIGKILL" in error and error.endswith("during training")


def test_two_trials_at_once_never_share_a_group(cluster, tmp_path):
    rec, info = _sweep(tmp_path, "pooled", [1e-2, 3e-2, 1e-3, 2e-2], num_workers=1, concurrent=2)
    assert set(rec.status.values()) == {"TERMINATED"} and len(rec.status) == 4
    hist = info["history"]
    assert {h["slot"] for h in hist} == {0, 1}  # both groups were used
    for slot in (0, 1):
        runs = sorted((h["start"], h["end"]) for h in hist if h["slot"] == slot)
        for (_, end), (start, _) in zip(runs, runs[1:], strict=False):
            assert start >= end, f"group {slot} ran two trials at once"
    assert [g["builds"] for g in info["groups"]] == [1, 1]


def _short_trial(config: dict) -> None:
    """A trial much shorter than a trial actor's start: two reports and no training."""
    from ray import tune

    for epoch in (1, 2):
        tune.report({"epoch": epoch, "objective": config["trainer.learning_rate"] + 1.0 / epoch})


def test_short_trials_reuse_the_first_trials_actors_and_start_no_other(cluster, tmp_path):
    # Tune hands a finished trial's actor to the next trial; with FIFO's choice of the trial to
    # run, it went to the oldest waiting trial, whose own new actor was starting and was then
    # killed, freeing its slot for yet another new actor: one actor start per short trial.
    from ray import tune
    from ray.util.state import list_actors

    from ludwig_hpo.search.algorithms import make_searcher
    from ludwig_hpo.search.schedulers import make_scheduler

    def trial_actors() -> set[str]:
        # Tune's function-trainable actors, whatever their state. Ray lists their class as
        # "ImplicitFunc" or, for some trainables (this one after the module's earlier
        # trials), "wrap_function.<locals>.ImplicitFunc": match the last name.
        actors = list_actors(limit=10_000, raise_on_missing_output=False)
        return {a.actor_id for a in actors if a.class_name.rpartition(".")[2] == "ImplicitFunc"}

    hp = load_sweep(SWEEPS / "breast_cancer_tiny.yaml").config.hyperopt
    before = trial_actors()
    rec = _Recorder()
    tune.Tuner(
        tune.with_resources(_short_trial, {"cpu": 0, "trial_slot": 1}),
        tune_config=tune.TuneConfig(
            search_alg=make_searcher(hp),
            scheduler=make_scheduler(hp, 2),
            num_samples=24,
            max_concurrent_trials=2,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(
            name="short",
            storage_path=str(tmp_path / "ray"),
            verbose=0,
            callbacks=[rec],
            failure_config=tune.FailureConfig(max_failures=0),
        ),
    ).fit()
    assert list(rec.status.values()) == ["TERMINATED"] * 24
    assert len(trial_actors() - before) == 2


def _first_start_loses_rank1(marker: str):
    """A Ray Train worker-group callback: while ``marker`` does not exist, a start of the job's
    group creates it and rank 1's process exits once the group's actors exist, before their
    train context is set up (before the training function runs); later starts go on."""
    from ray.train.v2._internal.execution.callback import WorkerGroupCallback

    class FirstStartLosesRank1(WorkerGroupCallback):
        def before_init_train_context(self, workers) -> dict:
            from pathlib import Path

            import ray

            if not Path(marker).exists():
                Path(marker).write_text("rank 1 exits")
                ray.get(workers[1].actor.execute.remote(os._exit, 1))
            return {}

    return FirstStartLosesRank1()


def _fresh_trial_whose_first_start_fails(config: dict, raw: dict, data: list) -> None:
    from ray import tune

    from ludwig_hpo.execution.fresh import fit_fresh
    from ludwig_hpo.execution.spec import TrialSpec

    spec = TrialSpec(raw=raw, trial_id=tune.get_context().get_trial_id(), storage_path=config["storage"], mode="max")
    callbacks = [_first_start_loses_rank1(config["marker"])]
    fit_fresh(spec, data, num_workers=2, use_gpu=False, cpus_per_worker=1.0, gpus_per_worker=1.0, callbacks=callbacks)


def test_a_fresh_trial_whose_group_lost_a_worker_while_starting_says_so_in_its_first_report(cluster, tmp_path):
    import ray
    from ray import tune

    raw, _, data = _loaded(epochs=2)
    raw = {**raw, "backend": {**raw["backend"], "num_workers": 2}}
    marker = tmp_path / "first-start-failed"
    rec = _Recorder()
    tune.Tuner(
        tune.with_resources(
            tune.with_parameters(_fresh_trial_whose_first_start_fails, raw=raw, data=[ray.put(data)]),
            {"cpu": 0, "trial_slot": 1},
        ),
        param_space={"storage": str(tmp_path / "train"), "marker": str(marker)},
        run_config=tune.RunConfig(
            name="fresh-restart",
            storage_path=str(tmp_path / "ray"),
            verbose=0,
            callbacks=[rec],
            failure_config=tune.FailureConfig(max_failures=0),
        ),
    ).fit()
    assert marker.is_file()  # the first start lost rank 1 (and Ray Train started the group again)
    assert list(rec.status.values()) == ["TERMINATED"], rec.errors
    (results,) = rec.results.values()
    assert [r["epoch"] for r in results] == [1, 2]
    assert results[0]["worker_group_restarts"] == 1 and results[0]["world_size"] == 2


class FirstBuildLosesItsRanks(WorkerPools):
    """The pools actor, except that its first group build loses its ranks (SIGKILL, once they
    answered their address) before their set-up. Both: a rank left alone would wait in
    ``torch.distributed``'s rendezvous for its lost peer."""

    def __init__(self, *args, gated: tuple[float, ...] = ()) -> None:
        super().__init__(*args)
        self.calls = 0

    async def _all(self, refs):
        answers = await super()._all(refs)
        self.calls += 1
        if self.calls == 1:  # the first build's addresses: (node, ip, port, pid) per rank
            for _, _, _, pid in answers:
                os.kill(pid, signal.SIGKILL)
        return answers


def test_a_pooled_trial_whose_group_was_started_again_after_a_lost_worker_says_so(cluster, tmp_path):
    rec, info = _sweep(tmp_path, "pooled", [1e-2, 3e-2], pools_cls=FirstBuildLosesItsRanks)
    assert set(rec.status.values()) == {"TERMINATED"}, rec.errors
    by_lr = _by_lr(rec)
    first, second = by_lr[1e-2][0], by_lr[3e-2][0]  # in this order on the one group
    assert first["worker_group_restarts"] == 1  # the warm-up's build failed; the first trial's start built it
    assert second["worker_group_restarts"] == 0
    assert [g["builds"] for g in info["groups"]] == [1]
