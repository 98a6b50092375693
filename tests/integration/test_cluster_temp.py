"""A local cluster's temp folder outlives a sweep killed with SIGKILL; the next local cluster
of the same user removes it (and keeps a live sweep's). Real Ray clusters, one at a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ludwig_hpo.execution.ray_temp import OWNER_FILE, ROOT

from ..conftest import ROOT as REPO

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc"),
]

#: A driver that starts a local cluster, says so, and waits to be killed.
DRIVER = """
import signal, sys, time
from ludwig_hpo.execution.cluster import local_cluster
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leaves the cluster in order
with local_cluster(num_cpus=1, num_gpus=0, trial_slots=1):
    print("up", flush=True)
    time.sleep(600)
"""


def _folder_of(pid: int) -> Path | None:
    for folder in ROOT.glob("hpo-ray-*"):
        try:
            if json.loads((folder / OWNER_FILE).read_text())["pid"] == pid:
                return folder
        except (OSError, ValueError, KeyError):
            continue
    return None


def _users_of(folder: Path) -> list[int]:
    """Live processes whose command line names ``folder`` (the cluster's daemons)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(folder).encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_the_next_local_cluster_removes_a_killed_sweeps_temp_folder_and_keeps_a_live_ones():
    from ludwig_hpo.execution.cluster import local_cluster

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    drivers = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        for _ in range(2)
    ]
    killed, live = drivers
    try:
        for d in drivers:
            assert d.stdout.readline().strip() == "up"
        folders = [_folder_of(d.pid) for d in drivers]
        assert all(folders), folders
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
        deadline = time.monotonic() + 120  # its daemons follow it (their parent-death signal)
        while _users_of(folders[0]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _users_of(folders[0]), "the killed sweep's daemons survived"
        assert folders[0].is_dir()  # a driver killed outright cannot remove its folder

        saved = dict(os.environ)  # ray.init sets a few variables for good
        try:
            with local_cluster(num_cpus=1, num_gpus=0, trial_slots=1):
                assert not folders[0].exists()
                assert folders[1].is_dir()  # the live sweep's stays
        finally:
            os.environ.clear()
            os.environ.update(saved)
    finally:
        for d in drivers:
            if d.poll() is None:
                d.send_signal(signal.SIGTERM)  # a live driver leaves its cluster in order
                try:
                    d.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    os.killpg(d.pid, signal.SIGKILL)
                    d.wait()
    assert not folders[1].exists()
