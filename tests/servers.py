"""Servers started by tests (``mlflow server``, ``hpo ui``): wait until one answers over HTTP,
and stop its process group afterwards (SIGTERM, then SIGKILL for what did not end).

Each server is started with ``start_new_session=True``, so its process group holds the server
and the workers it forked, and nothing else of the test run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable

import pytest

#: How long a server (or the MLflow UI behind ``hpo ui``) may take to answer its first request (seconds).
UI_START_TIMEOUT_S = 120
#: How long a stopped server's process group gets to end after SIGTERM before SIGKILL (seconds).
STOP_GRACE_S = 30.0


def wait_until_answering(
    url: str,
    proc: subprocess.Popen,
    timeout_s: float = UI_START_TIMEOUT_S,
    output: Callable[[], str] = lambda: "",
) -> None:
    """Poll ``url`` until it answers HTTP 200 (each try waits up to 10 s).

    Fails the test (``pytest.fail``, with ``output()``: the server's log so far) when ``proc``
    exits first or ``timeout_s`` seconds pass without an answer.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            pytest.fail(f"{proc.args[:3]} exited ({proc.returncode}) before {url} answered:\n{output()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{url} did not answer within {timeout_s:g} s:\n{output()[-3000:]}")
        time.sleep(0.5)


def stop_process_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM ``proc``'s process group (it leads a session of its own), wait up to ``grace_s``
    seconds for ``proc`` to end, then SIGKILL the group and reap ``proc``."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:  # the group already ended
        proc.wait()
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)
