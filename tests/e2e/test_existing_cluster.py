"""End-to-end on an existing two-node Ray cluster: a head and a second node started with
``ray start`` on loopback (each with 2 CPUs), ``hpo sweep --address`` against it, and the
Train workers of the trials found on both nodes. Both nodes are stopped by the process
groups of the ``ray start --block`` processes this test started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from ludwig_hpo.execution import ray_temp
from tests.ranks import free_port

from ..conftest import SWEEPS
from .test_sweep_cli import run_cli

#: How long a Ray node may take to start (seconds; a few on an idle machine, far more under load).
NODE_START_TIMEOUT_S = 240

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2 * NODE_START_TIMEOUT_S + 600)]

RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2"}


def _ray_exe() -> str:
    return shutil.which("ray") or str(Path(sys.executable).parent / "ray")


def _node_ports() -> list[str]:
    # Two nodes on one machine: every per-node port must differ (the defaults are fixed).
    return [
        "--node-manager-port",
        str(free_port()),
        "--object-manager-port",
        str(free_port()),
        "--dashboard-agent-listen-port",
        str(free_port()),
        "--dashboard-agent-grpc-port",
        str(free_port()),
        "--metrics-export-port",
        str(free_port()),
        "--runtime-env-agent-port",
        str(free_port()),
        "--min-worker-port",
        "0",
        "--max-worker-port",
        "0",
    ]


def _python(code: str, env: dict) -> str:
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        text=True,
        capture_output=True,
        timeout=NODE_START_TIMEOUT_S + 60,
        check=True,
    ).stdout


def _own_leftovers(marker: str) -> list[int]:
    """PIDs of processes whose command line names this test's private temp folder."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


@pytest.fixture(scope="module")
def two_nodes():
    """(GCS address, dashboard URL, {node id: "head" | "second"}) of a running 2-node cluster."""
    # one private temp folder per node (their sockets would collide); short: socket paths are length-limited
    temp_dirs = [tempfile.mkdtemp(prefix=ray_temp.PREFIX, dir=ray_temp.ROOT) for _ in range(2)]
    env = {**{k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}, **RAY_ENV}
    gcs, dash = free_port(), free_port()
    address = f"127.0.0.1:{gcs}"
    procs: list[subprocess.Popen] = []
    try:
        common = [
            "--num-cpus",
            "2",
            "--num-gpus",
            "0",
            "--node-ip-address",
            "127.0.0.1",
            "--block",
            "--disable-usage-stats",
        ]
        procs.append(
            subprocess.Popen(
                [
                    _ray_exe(),
                    "start",
                    "--head",
                    "--port",
                    str(gcs),
                    "--temp-dir",
                    temp_dirs[0],
                    "--include-dashboard",
                    "true",
                    "--dashboard-host",
                    "127.0.0.1",
                    "--dashboard-port",
                    str(dash),
                    "--ray-client-server-port",
                    str(free_port()),
                    "--resources",
                    '{"head_node": 1}',
                    *common,
                    *_node_ports(),
                ],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.time() + NODE_START_TIMEOUT_S
        while True:  # the head's GCS accepts connections
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", gcs)) == 0:
                    break
            assert time.time() < deadline, "the Ray head did not start"
            assert procs[0].poll() is None, "ray start --head exited"
            time.sleep(0.5)
        procs.append(
            subprocess.Popen(
                [
                    _ray_exe(),
                    "start",
                    "--address",
                    address,
                    "--temp-dir",
                    temp_dirs[1],
                    "--resources",
                    '{"second_node": 1}',
                    *common,
                    *_node_ports(),
                ],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        nodes = json.loads(
            _python(
                "import json, time, ray\n"
                f"ray.init(address={address!r}, logging_level='ERROR')\n"
                f"deadline = time.time() + {NODE_START_TIMEOUT_S}\n"
                "while len([n for n in ray.nodes() if n['Alive']]) < 2 and time.time() < deadline:\n"
                "    time.sleep(0.5)\n"
                "print(json.dumps({n['NodeID']: ('head' if 'head_node' in n['Resources'] else 'second')\n"
                "                  for n in ray.nodes() if n['Alive']}))\n",
                env,
            )
            .strip()
            .splitlines()[-1]
        )
        assert sorted(nodes.values()) == ["head", "second"], nodes
        yield address, f"http://127.0.0.1:{dash}", nodes, env
    finally:
        # `ray start --block` stops its node's processes on SIGINT at once (on SIGTERM, after ~30 s)
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        time.sleep(1)
        for temp_dir in temp_dirs:
            for pid in _own_leftovers(temp_dir):  # daemons that left the group, named by our temp folder
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            shutil.rmtree(temp_dir, ignore_errors=True)


def test_sweep_on_an_existing_two_node_cluster_uses_both_nodes(two_nodes, tmp_path):
    address, dashboard, nodes, env = two_nodes
    raw = yaml.safe_load((SWEEPS / "breast_cancer_tiny.yaml").read_text())
    raw["dataset"]["source"] = "sklearn:breast_cancer"
    raw["trainer"] = {**raw["trainer"], "batch_size": 16, "epochs": 2}
    raw["hyperopt"]["executor"] = {"num_samples": 2}
    raw["hyperopt"]["scheduler"] = {"type": "fifo"}
    raw["kfold"] = None
    raw["report"] = {"enabled": False}
    raw["backend"] = {**raw.get("backend", {}), "trial_executor": "fresh"}  # one Train worker group per trial
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    proc = run_cli(
        "sweep", "sweep.yaml", "--address", address, "--num-workers", "2", "--output", "results", cwd=tmp_path
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    # Two nodes x 2 one-CPU workers, 2-worker trials: two trials at once.
    assert "2 node(s), 4 CPU / 0 GPU -> 2 trial(s) at once" in proc.stdout, proc.stdout
    assert f"ray: connected to {address} (2 node(s))" in proc.stdout
    workers = json.loads(
        _python(
            "import json\n"
            "from ray.util.state import list_actors\n"
            f"actors = list_actors(address={dashboard!r}, filters=[('class_name', '=', 'RayTrainWorker')],\n"
            "                     limit=10000, detail=True, raise_on_missing_output=False)\n"
            "print(json.dumps([[a.node_id, a.placement_group_id, a.pid] for a in actors]))\n",
            env,
        )
        .strip()
        .splitlines()[-1]
    )
    groups: dict[str, list[str]] = {}
    for node_id, pg, pid in workers:
        groups.setdefault(pg, []).append(f"{nodes.get(node_id, node_id)}(pid {pid})")
    print("worker groups (one per trial):", json.dumps(groups, indent=1))
    assert len(groups) == 2, groups  # one Train worker group per trial
    used = {nodes.get(node_id) for node_id, _, _ in workers}
    assert used == {"head", "second"}, f"trials did not use both nodes: {groups}"
    results = json.loads((tmp_path / "results" / raw["name"] / "results.json").read_text())
    assert [t["status"] for t in results["trials"]] == ["FINISHED", "FINISHED"]


def test_unreachable_address_is_a_one_line_error(tmp_path):
    port = free_port()  # nothing listens there
    proc = run_cli(
        "sweep",
        str(SWEEPS / "breast_cancer_tiny.yaml"),
        "--address",
        f"127.0.0.1:{port}",
        "--output",
        "results",
        cwd=tmp_path,
        timeout=180,
    )
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("error: --address: cannot connect to the Ray cluster at") and "\n" not in line, line
    assert not (tmp_path / "results").exists()


def test_hpo_train_trains_the_base_configuration_once_and_saves_the_model(tmp_path):
    proc = run_cli(
        "train",
        str(SWEEPS / "breast_cancer_tiny.yaml"),
        "--num-workers",
        "2",
        "--set",
        "trainer.batch_size=16",
        "--set",
        "trainer.learning_rate=0.02",
        "--output",
        "results",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"train failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    out = tmp_path / "results" / "breast-cancer-tiny-train"
    assert (out / "best_model" / "model.pt").is_file()
    assert "2 epochs, 2 worker(s), ddp, fp32" in proc.stdout
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("breast-cancer-tiny")
    runs = client.search_runs([exp.experiment_id])
    child = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(child) == 1 and child[0].info.status == "FINISHED"
    assert float(child[0].data.params["trainer.learning_rate"]) == 0.02
    assert child[0].data.metrics["effective_learning_rate"] == 0.02
    assert child[0].data.tags["world_size"] == "2"
