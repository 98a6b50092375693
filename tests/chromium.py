"""Headless Chromium for the browser tests: the DOM after the page's scripts ran, its console
messages, and PNG screenshots (kept under the test's folder, and copied to ``$HPO_SHOTS_DIR``
when that is set)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
MISSING = "Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it as root)"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Chromium's software GL reports its own performance notes on the console; not the page's.
_BROWSER_NOISE = re.compile(r'"\[\.WebGL-[^\]]*\]GL Driver Message')
_CONSOLE = re.compile(r":INFO:CONSOLE[^\]]*\] (.*)$", re.MULTILINE)


def chromium(*args: str, cwd: Path, budget_ms: int = 15000, timeout_s: float = 180) -> tuple[str, list[str]]:
    """Run headless Chromium with ``args`` (a URL last) in ``cwd`` (its profile goes there);
    ``budget_ms`` of virtual time lets the page's scripts and requests settle first.
    Returns (stdout, the page's console messages). Raises ``subprocess.TimeoutExpired``."""
    assert CHROMIUM is not None, MISSING
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-unsafe-swiftshader",
        "--enable-logging=stderr",
        "--v=0",
        f"--virtual-time-budget={budget_ms}",
        f"--user-data-dir={cwd / 'chromium-profile'}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
    messages = [m for m in _CONSOLE.findall(proc.stderr) if not _BROWSER_NOISE.match(m)]
    return proc.stdout, messages


def dom(url: str, cwd: Path, budget_ms: int = 15000) -> tuple[str, list[str]]:
    """The page's DOM after its scripts ran, and its console messages."""
    return chromium("--dump-dom", url, cwd=cwd, budget_ms=budget_ms)


def screenshot(url: str, shot: Path, size: tuple[int, int] = (1300, 2400), budget_ms: int = 15000) -> Path:
    """A PNG of ``url`` at ``size`` (width, height px) written to ``shot`` (its folder is the
    browser's working folder), and copied into ``$HPO_SHOTS_DIR`` when set. Returns ``shot``."""
    shot.unlink(missing_ok=True)
    chromium(
        f"--window-size={size[0]},{size[1]}",
        "--hide-scrollbars",
        f"--screenshot={shot}",
        url,
        cwd=shot.parent,
        budget_ms=budget_ms,
    )
    assert shot.is_file() and shot.read_bytes()[:8] == PNG_MAGIC, f"no PNG written for {url}"
    shots = os.environ.get("HPO_SHOTS_DIR")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        shutil.copy2(shot, Path(shots) / shot.name)
    return shot


def visible_text(page: str) -> str:
    """The DOM's text without scripts, styles and tags, whitespace collapsed."""
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", page, flags=re.DOTALL)
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())
