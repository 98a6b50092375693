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
