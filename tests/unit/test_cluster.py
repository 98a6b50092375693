"""Where a local cluster's daemons start: in a session of their own only where the kernel ties
them to the driver's life (Ray's parent-death signal); elsewhere in the driver's process group,
which Ray's reaper kills when the driver dies. Real child processes, no Ray cluster."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ludwig_hpo.execution.cluster import _daemons_in_their_own_session

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process sessions of Linux")


def _child_session(popen) -> int:
    """The session id of a child started through Ray's process class ``popen``."""
    proc = popen([sys.executable, "-c", "import os; print(os.getsid(0))"], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    return int(out)


@pytest.mark.parametrize("fate_sharing", [True, False], ids=["parent-death-signal", "reaper"])
def test_daemons_leave_the_drivers_session_only_where_they_die_with_the_driver(monkeypatch, fate_sharing):
    from ray._private import services, utils

    monkeypatch.setattr(utils, "detect_fate_sharing_support", lambda: fate_sharing)
    ray_popen = services.ConsolePopen
    with _daemons_in_their_own_session():
        sid = _child_session(services.ConsolePopen)
    assert (sid != os.getsid(0)) is fate_sharing
    assert services.ConsolePopen is ray_popen
    assert _child_session(services.ConsolePopen) == os.getsid(0)


def test_rays_process_class_is_restored_when_ray_init_fails():
    from ray._private import services

    ray_popen = services.ConsolePopen
    with pytest.raises(RuntimeError), _daemons_in_their_own_session():
        raise RuntimeError("ray.init failed")
    assert services.ConsolePopen is ray_popen


@pytest.mark.parametrize("dashboard", [True, False])
def test_rays_start_functions_are_restored_after_a_local_clusters_start(dashboard):
    from ray._private import node, parameter, services

    from ludwig_hpo.execution.cluster import _only_what_a_sweep_uses

    start, params, api_server = services.start_ray_process, parameter.RayParams, node.Node.start_api_server
    with pytest.raises(RuntimeError), _only_what_a_sweep_uses(dashboard=dashboard):
        assert services.start_ray_process is not start
        # without the dashboard the head node starts no dashboard process at all
        assert (node.Node.start_api_server is api_server) is dashboard
        chosen = parameter.RayParams()
        assert chosen.no_monitor and chosen.include_log_monitor is False
        raise RuntimeError("ray.init failed")
    assert services.start_ray_process is start and parameter.RayParams is params
    assert node.Node.start_api_server is api_server
    assert not params().no_monitor  # Ray's own default again, for an existing cluster's driver


# ---------------------------------------------------------------- temp folders of dead sweeps


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    return proc.pid


def _fake_folder(root, name: str, owner):
    import dataclasses
    import json

    from ludwig_hpo.execution.ray_temp import OWNER_FILE

    folder = root / f"hpo-ray-{name}"
    (folder / "session_latest" / "logs").mkdir(parents=True)
    (folder / "session_latest" / "logs" / "raylet.out").write_text("x" * 1000)
    if owner is not None:
        (folder / OWNER_FILE).write_text(json.dumps(dataclasses.asdict(owner)))
    return folder


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times of Linux")
def test_only_this_users_folders_whose_owner_process_is_gone_are_removed(tmp_path):
    import dataclasses

    from ludwig_hpo.execution.ray_temp import make_temp_dir, remove_dead_temp_dirs, this_process

    me = this_process()
    dead = _fake_folder(tmp_path, "dead", dataclasses.replace(me, pid=_dead_pid()))
    reused = _fake_folder(tmp_path, "reused", dataclasses.replace(me, started=(me.started or 0) - 1))  # pid reused
    rebooted = _fake_folder(tmp_path, "rebooted", dataclasses.replace(me, boot="another-boot"))
    live = _fake_folder(tmp_path, "live", me)
    others = _fake_folder(tmp_path, "others", dataclasses.replace(me, pid=_dead_pid(), uid=me.uid + 1))
    unmarked = _fake_folder(tmp_path, "unmarked", None)  # being created, or not a sweep's
    own = make_temp_dir(tmp_path)
    unrelated = tmp_path / "ray-something-else"
    unrelated.mkdir()

    removed = remove_dead_temp_dirs(tmp_path)
    assert sorted(removed) == sorted([dead, reused, rebooted])
    assert not any(p.exists() for p in removed)
    assert all(p.is_dir() for p in (live, others, unmarked, own, unrelated))
    assert remove_dead_temp_dirs(tmp_path) == []


# ---------------------------------------------------------------- what Ray tells the driver


def test_rays_messages_reach_the_log_file_without_colour_codes_and_never_the_console(tmp_path, capsys):
    from ray._private import worker

    from ludwig_hpo.execution.cluster import rays_messages_to

    printer = worker.print_to_stdstream
    log = tmp_path / "ray.log"
    with rays_messages_to(log):
        # what Ray's error listener hands its printer when a worker dies
        worker.print_to_stdstream(
            {"lines": ["\x1b[33m(raylet)\x1b[0m A worker died or was killed\n  Worker PID: 42"], "pid": "raylet"},
            ignore_prefix=False,
        )
    assert worker.print_to_stdstream is printer
    out = capsys.readouterr()
    assert out.out == out.err == ""
    (line,) = log.read_text().splitlines()
    assert line.endswith("(raylet) (raylet) A worker died or was killed Worker PID: 42")
    assert "\x1b" not in line
