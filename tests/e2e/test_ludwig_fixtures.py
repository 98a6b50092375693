"""End-to-end on the Ludwig configs of tests/fixtures/ludwig: every accepted one trains its
own values through a trial's worker entry (``execution/local``, the code each sweep rank runs,
without Ray), and a batch of them runs as real ``hpo sweep`` commands (Ray Tune, Ray Train,
MLflow) against one Ray head started for the module, each writing results.json with scores.

``HPO_LUDWIG_ALL_SWEEPS=1`` sweeps every accepted fixture instead of the batch (minutes each
on a busy machine: not part of the default suite).
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from ludwig_hpo.execution import ray_temp
from tests.ranks import free_port

from ..unit.test_ludwig_fixtures import CONFIGS, EXPECTED_REFUSED, dataset_of
from .test_existing_cluster import NODE_START_TIMEOUT_S, RAY_ENV, _own_leftovers, _ray_exe
from .test_sweep_cli import run_cli

pytestmark = pytest.mark.e2e

ACCEPTED = [c for c in CONFIGS if c.name not in EXPECTED_REFUSED]
#: Trained through the worker entry: the accepted ECD fixtures. An llm fixture names a hub base
#: model this suite cannot download; llm configs train on a local tiny model in
#: tests/unit/test_ludwig_llm_fixtures.py and tests/e2e/test_llm_sweep.py.
TRAINED = [c for c in ACCEPTED if "model_type: llm" not in c.read_text()]
#: Swept by default: Ludwig 0.4's spellings upgraded end to end, and set/bag features.
BATCH = ["titanic_legacy.yaml", "features_set_bag.yaml"]
SWEPT = (
    [c for c in ACCEPTED if "hyperopt:" in c.read_text()]
    if os.environ.get("HPO_LUDWIG_ALL_SWEEPS") == "1"
    else [c for c in ACCEPTED if c.name in BATCH]
)
#: One fixture's sweep (its trials are 1-2 epochs on 240 rows; the rest is start-up).
SWEEP_TIMEOUT_S = 420
#: One fixture's training through the worker entry.
TRAIN_TIMEOUT_S = 180


@pytest.mark.timeout(TRAIN_TIMEOUT_S)
@pytest.mark.parametrize("config", TRAINED, ids=[c.name for c in TRAINED])
def test_each_accepted_fixture_trains_through_the_worker_entry(config, tmp_path, monkeypatch):
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import dataset_folder, load_dataframe, prepare
    from ludwig_hpo.execution.local import run_local
    from ludwig_hpo.execution.spec import TrialSpec
    from ludwig_hpo.train.report_keys import OBJECTIVE, TIME_ATTR

    monkeypatch.chdir(tmp_path)
    loaded = load_sweep(config, dataset_of(config), search=False)
    cfg = loaded.config
    data = prepare(
        load_dataframe(cfg.dataset.source, loaded.base_dir), cfg, dataset_folder(cfg.dataset.source, loaded.base_dir)
    )
    run = run_local(TrialSpec(raw=loaded.raw, storage_path=str(tmp_path)), data, workers=1, device="cpu")
    reports = run.reports[0]
    epochs = [r[TIME_ATTR] for r in reports if TIME_ATTR in r]
    assert epochs and epochs == list(range(1, len(epochs) + 1)) and len(epochs) <= cfg.trainer.epochs
    assert all(math.isfinite(r[OBJECTIVE]) for r in reports if OBJECTIVE in r), reports


@pytest.fixture(scope="module")
def ray_head():
    """The address of a one-node Ray head (2 CPUs, loopback) every sweep of the module joins;
    its process group (``ray start --block``) is stopped at the end."""
    temp_dir = tempfile.mkdtemp(prefix=ray_temp.PREFIX, dir=ray_temp.ROOT)
    env = {**{k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}, **RAY_ENV}
    gcs = free_port()
    head = subprocess.Popen(
        [
            _ray_exe(),
            "start",
            "--head",
            "--port",
            str(gcs),
            "--temp-dir",
            temp_dir,
            "--include-dashboard",
            "false",
            "--ray-client-server-port",
            str(free_port()),
            "--num-cpus",
            "2",
            "--num-gpus",
            "0",
            "--node-ip-address",
            "127.0.0.1",
            "--block",
            "--disable-usage-stats",
        ],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + NODE_START_TIMEOUT_S
        while True:  # the head's GCS accepts connections
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", gcs)) == 0:
                    break
            assert time.time() < deadline, "the Ray head did not start"
            assert head.poll() is None, "ray start --head exited"
            time.sleep(0.5)
        yield f"127.0.0.1:{gcs}", RAY_ENV
    finally:
        try:
            # `ray start --block` stops its node's processes on SIGINT at once (on SIGTERM, after ~30 s)
            os.killpg(head.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=10)
        for pid in _own_leftovers(temp_dir):  # daemons that left the group, named by our temp folder
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)
@pytest.mark.parametrize("config", SWEPT, ids=[c.name for c in SWEPT])
def test_fixture_runs_as_a_sweep_and_scores_its_trials(config, ray_head, tmp_path):
    address, env = ray_head
    proc = run_cli(
        "sweep",
        str(config),
        "--dataset",
        str(dataset_of(config)),
        "--num-workers",
        "1",
        "--address",
        address,
        "--output",
        "results",
        cwd=tmp_path,
        timeout=SWEEP_TIMEOUT_S,
        env_extra=env,
    )
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    folders = list((tmp_path / "results").iterdir())
    assert len(folders) == 1
    result = json.loads((folders[0] / "results.json").read_text())
    trials = result["trials"]
    assert trials and all(t["status"] == "FINISHED" for t in trials), [t["status"] for t in trials]
    for t in trials:
        assert t["history"], t
        scores = t["history"][-1]["metrics"]
        assert scores and all(math.isfinite(v) for v in scores.values() if isinstance(v, float)), scores
    if config.name == "titanic_legacy.yaml":  # the upgrades were said once, on stderr
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
        assert any("training: is Ludwig's old name for trainer:" in w for w in warnings), proc.stderr[-2000:]
        assert len(warnings) == len(set(warnings))
        assert set(trials[0]["params"]) == {"trainer.learning_rate"}
