"""Where a benchmark's figures go: ``bench/results/<bench>.json``, stamped with where they came from.

A bench script builds its argument parser with :func:`parser`, opens a :class:`BenchRun` before
it measures anything and ends with :meth:`BenchRun.finish`, which writes the JSON file and then
prints the figures' ``name=value`` line, the script's last line of output::

    ap = parser(__doc__)
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args()
    run = BenchRun("train_loop", args)
    ...
    run.finish({"ratio_vs_plain": Figure(ratio, ".3f")}, details={"digits.yaml": {...}})

The file holds::

    {"bench": "train_loop",
     "figures": {"ratio_vs_plain": 0.97},
     "details": {...},
     "stamp": {"commit": "<sha>[+dirty]", "started_utc": "...", "finished_utc": "...",
               "wall_s": 12.3, "cpu_count": 2, "nproc": 2,
               "loadavg_start": [1m, 5m, 15m], "loadavg_end": [...],
               "python": "3.11.9", "torch": "2.13.0+cpu", "ray": "2.60.0", "platform": "...",
               "argv": [...], "args": {...}}}

The folder is ``--results-dir``, else ``$HPO_BENCH_RESULTS_DIR``, else ``bench/results`` of the
repository. Everything here runs in the bench's own (driver) process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS_DIR = ROOT / "bench" / "results"
RESULTS_DIR_ENV = "HPO_BENCH_RESULTS_DIR"
#: Figures files do not make the tree dirty: writing one must not change the next one's stamp.
_NOT_SOURCE = ":(exclude)bench/results"

FigureValue = float | int | str


@dataclass(frozen=True)
class Figure:
    """One figure of the last line: its value (in the JSON file as is) and the format spec of
    its printed text (``format(value, fmt)``; ignored for a string value)."""

    value: FigureValue
    fmt: str = ""

    def text(self) -> str:
        """The value as printed after ``name=``."""
        return self.value if isinstance(self.value, str) else format(self.value, self.fmt)


@dataclass(frozen=True)
class Stamp:
    """Where and when a bench ran: the code, the machine and its load, the versions, the arguments."""

    commit: str
    started_utc: str
    finished_utc: str
    wall_s: float
    cpu_count: int | None
    nproc: int
    loadavg_start: tuple[float, float, float] | None
    loadavg_end: tuple[float, float, float] | None
    python: str
    torch: str | None
    ray: str | None
    platform: str
    argv: tuple[str, ...]
    args: dict[str, Any]


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser described by the first line of ``doc``, with ``--results-dir``."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    ap.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help=f"folder of <bench>.json (default: ${RESULTS_DIR_ENV}, else bench/results)",
    )
    return ap


def results_dir(chosen: Path | None) -> Path:
    """``chosen``, else ``$HPO_BENCH_RESULTS_DIR``, else ``bench/results`` of the repository."""
    if chosen is not None:
        return chosen
    env = os.environ.get(RESULTS_DIR_ENV)
    return Path(env) if env else DEFAULT_RESULTS_DIR


def commit() -> str:
    """``git rev-parse HEAD`` of the repository, ``+dirty`` when its tracked or untracked files
    differ from it (figures files aside); ``unknown`` outside a git checkout."""
    try:
        head = _git("rev-parse", "HEAD")
        changes = _git("status", "--porcelain", "--", ".", _NOT_SOURCE)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if changes else "")


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


def _loadavg() -> tuple[float, float, float] | None:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:  # not every platform has one
        return None
    return round(one, 2), round(five, 2), round(fifteen, 2)


def _nproc() -> int:
    """CPUs this process may run on (what ``nproc`` prints)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _version(dist: str) -> str | None:
    # the installed distribution's metadata: no import of torch or Ray just to stamp a file
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _jsonable(value: Any) -> Any:
    """``value`` with paths as strings (relative to the checkout when inside it, so results read
    the same on every machine) and non-finite floats as strings (JSON has neither)."""
    if isinstance(value, Path):
        return str(value.relative_to(ROOT)) if value.is_relative_to(ROOT) else str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


class BenchRun:
    """One run of a bench: opened before measuring (the start's time and load), finished once.

    Args:
        bench: the file's name without ``.json`` (the script's name, e.g. ``train_loop``).
        args: the parsed arguments (``--results-dir`` chooses the folder; all are stamped).
    """

    def __init__(self, bench: str, args: argparse.Namespace) -> None:
        self.bench = bench
        self.args = dict(vars(args))
        self.path = results_dir(self.args.get("results_dir")) / f"{bench}.json"
        self._started = dt.datetime.now(dt.timezone.utc)
        self._t0 = time.perf_counter()
        self._load_start = _loadavg()
        self._commit = commit()

    def stamp(self) -> Stamp:
        """The stamp as of now (the end's time and load)."""
        return Stamp(
            commit=self._commit,
            started_utc=self._started.isoformat(timespec="seconds"),
            finished_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            wall_s=round(time.perf_counter() - self._t0, 3),
            cpu_count=os.cpu_count(),
            nproc=_nproc(),
            loadavg_start=self._load_start,
            loadavg_end=_loadavg(),
            python=platform.python_version(),
            torch=_version("torch"),
            ray=_version("ray"),
            platform=platform.platform(),
            argv=tuple(sys.argv),
            args=_jsonable(self.args),
        )

    def finish(self, figures: Mapping[str, Figure], details: Mapping[str, Any] | None = None) -> Path:
        """Write ``<results dir>/<bench>.json``, then print ``name=value`` for every figure on
        one line (the last line the bench prints). Returns the file's path.

        Raises:
            OSError: the folder cannot be created or the file written.
        """
        doc = {
            "bench": self.bench,
            "figures": {name: f.value for name, f in figures.items()},
            "details": dict(details or {}),
            "stamp": asdict(self.stamp()),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(_jsonable(doc), indent=2) + "\n")
        tmp.replace(self.path)  # a reader never sees half a file
        print(f"figures written to {self.path}", flush=True)
        print(" ".join(f"{name}={f.text()}" for name, f in figures.items()), flush=True)
        return self.path
