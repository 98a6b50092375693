"""tests/servers.py, the helpers every server-starting test uses: a server that answers is
waited for, one that exits is a failure at once, and a group that ignores SIGTERM is killed."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.servers import stop_process_group, wait_until_answering

pytestmark = pytest.mark.timeout(120)

_SERVE = """
import http.server, sys
server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
_IGNORE_TERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(60)
"""


def _start(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True, cwd="/"
    )


def test_a_server_that_answers_is_waited_for_and_stopped_by_sigterm():
    proc = _start(_SERVE)
    try:
        port = int(proc.stdout.readline())
        wait_until_answering(f"http://127.0.0.1:{port}/", proc, timeout_s=60)
    finally:
        stop_process_group(proc)
    assert proc.returncode == -signal.SIGTERM


def test_a_server_that_exits_fails_the_wait_with_its_output():
    proc = _start("print('bad flag'); raise SystemExit(3)")
    proc.wait(timeout=60)
    with pytest.raises(pytest.fail.Exception, match=r"exited \(3\).*\n.*bad flag"):
        wait_until_answering("http://127.0.0.1:9/", proc, timeout_s=60, output=lambda: "bad flag")


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace():
    proc = _start(_IGNORE_TERM)
    try:
        assert proc.stdout.readline().strip() == "ready"  # the handler is in place
        stop_process_group(proc, grace_s=0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
