"""What does a sweep cost the machine? Runs ``hpo sweep`` on a sweep file (default
``sweeps/breast_cancer.yaml``) as a user runs it and samples every process of the sweep every
0.25 s: the driver and its children (the MLflow store process), the private Ray cluster's
daemons (GCS, raylet, dashboard, agents, monitors) and the raylet's workers (trial actors,
Train controllers, pool workers, the batch-size cache actor), found as the driver's process
tree and by the cluster's temp folder in a process's command line. Then ``hpo validate`` and
``hpo schema`` of the same file, as a user runs them.

It prints, per run, the peak of the summed PSS and RSS over those processes (PSS shares a
page among the processes that map it, so it adds up to what the sweep really holds; RSS
counts shared pages once per process), the processes at the peak by PSS with their role, the
seconds from the command to the first trial's start (its ``started`` line) and to the first
reported epoch (the first metric in the sweep's MLflow store), and the sweep's wall time; then
the medians over ``--repeats`` runs (runs alternate nothing: each is the same command).

Last line: ``peak_rss_gb=<x> peak_pss_gb=<y> first_trial_s=<s> first_epoch_s=<s> wall_s=<s>
validate_s=<s> validate_mb=<MB> schema_s=<s>`` (medians); the figures also go to
``bench/results/footprint.json`` (see ``bench/_results.py``).

Run: ``python bench/footprint.py [SWEEP_FILE] [--repeats 3] [--num-samples N] [--epochs N]
[--no-kfold]`` on an otherwise idle machine (the load average is stamped in the file). The caps
write a copy of the file with fewer trials, fewer epochs or no k-fold phase and report (for a
smoke run); without them the file runs as it is. Linux only (``/proc``).
"""

from __future__ import annotations

import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SWEEP = ROOT / "sweeps" / "breast_cancer.yaml"
#: Seconds between two samples of the process tree.
INTERVAL_S = 0.25
#: Processes printed at the peak (the JSON file lists them all).
TOP = 12
#: Upper bound of one sweep run; a hung sweep is killed and the bench fails.
SWEEP_TIMEOUT_S = 1800
#: (role, pattern in the command line), first match wins; Ray's workers name themselves
#: ``ray::<actor class or task>`` once they run one.
ROLES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ray gcs_server", re.compile(r"gcs_server")),
    ("ray raylet", re.compile(r"raylet/raylet")),
    ("ray dashboard", re.compile(r"dashboard/dashboard\.py")),
    ("ray dashboard agent", re.compile(r"dashboard/agent\.py")),
    ("ray runtime-env agent", re.compile(r"runtime_env/agent/main\.py")),
    ("ray log monitor", re.compile(r"log_monitor\.py")),
    ("ray autoscaler monitor", re.compile(r"autoscaler/_private/monitor\.py")),
    ("ray client server", re.compile(r"ray\.util\.client\.server")),
    ("mlflow store process", re.compile(r"multiprocessing\.spawn|spawn_main")),
    ("multiprocessing resource tracker", re.compile(r"resource_tracker")),
    ("ray worker (idle)", re.compile(r"^ray::IDLE")),
    ("ray worker (starting)", re.compile(r"default_worker\.py")),
)


def _hpo() -> list[str]:
    """The ``hpo`` command of this environment (the console script beside the interpreter)."""
    script = Path(sys.executable).with_name("hpo")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "ludwig_hpo"]


@dataclass(frozen=True)
class Memory:
    """One process's memory: proportional and resident set size, bytes."""

    pss: int
    rss: int


def memory(pid: int) -> Memory | None:
    """``pid``'s PSS and RSS from ``/proc/<pid>/smaps_rollup``; None if it ended or is unreadable."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Pss", "Rss"):
            values[key] = int(rest.split()[0]) * 1024
    if "Rss" not in values:  # a zombie or kernel thread maps nothing
        return None
    return Memory(values.get("Pss", values["Rss"]), values["Rss"])


def maps_torch(pid: int) -> bool:
    """Whether ``pid`` has torch's library mapped (it imported torch)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("libtorch" in line for line in f)
    except OSError:
        return False


def cmdline(pid: int) -> str:
    """``pid``'s command line, arguments joined by spaces ('' if it ended)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _parents() -> dict[int, int]:
    """pid → parent pid of every process on the machine."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        found[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return found


def tree(root: int, marker: str | None) -> set[int]:
    """``root`` and its descendants, plus every process whose command line holds ``marker``
    (the cluster's temp folder: Ray's daemons name it; None: none)."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in found or pid not in parents:
            continue
        found.add(pid)
        todo.extend(children.get(pid, []))
    if marker:
        found.update(pid for pid in parents if pid not in found and marker in cmdline(pid))
    return found


def role(pid: int, driver: int, command: str) -> str:
    """What process ``pid`` is in a sweep whose driver is ``driver``, from its ``command`` line."""
    if pid == driver:
        return "driver (hpo sweep)"
    for name, pattern in ROLES:
        if pattern.search(command):
            return name
    if command.startswith("ray-dashboard-"):  # a dashboard module's process names itself
        return "ray dashboard module: " + command.split()[0].removeprefix("ray-dashboard-").rsplit("-", 1)[0]
    if command.startswith("ray::"):
        # ``ray::<class>.<method>`` while it runs one: the class is the role
        return "ray worker: " + command.split()[0].removeprefix("ray::").split(".")[0]
    return command.split()[0].rsplit("/", 1)[-1] if command else "?"


def cluster_folder(driver: int) -> str | None:
    """The temp folder of the local cluster that ``driver`` started (its ``hpo-ray-*`` folder
    whose owner marker names it), or None (not started yet, or an existing cluster)."""
    import json

    for owner in Path(tempfile.gettempdir()).glob("hpo-ray-*/hpo-owner.json"):
        try:
            if json.loads(owner.read_text()).get("pid") == driver:
                return str(owner.parent)
        except (OSError, ValueError):
            continue
    return None


@dataclass
class Sampler:
    """Samples the driver ``driver``'s processes every :data:`INTERVAL_S` on a thread of the
    bench until :meth:`stop`; keeps the sample with the largest summed PSS (and RSS)."""

    driver: int
    peak_pss: int = 0
    peak_rss: int = 0
    peak_processes: int = 0
    peak_at_s: float = 0.0
    at_peak: list[tuple[str, int, Memory]] = field(default_factory=list)
    torch_at_peak: set[int] = field(default_factory=set)
    max_processes: int = 0
    samples: int = 0
    roles_seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._roles: dict[int, str] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        marker = None
        while not self._stop.is_set():
            marker = marker or cluster_folder(self.driver)
            self.sample(marker)
            self._stop.wait(INTERVAL_S)

    def sample(self, marker: str | None) -> None:
        """One sample of the tree (and the ``marker`` folder's processes)."""
        rows = []
        for pid in tree(self.driver, marker):
            mem = memory(pid)
            if mem is None:
                continue
            name = role(pid, self.driver, cmdline(pid))
            if not name.startswith(("ray worker (", "?")):  # a worker names its actor once it has one
                self._roles[pid] = name
            rows.append((self._roles.get(pid, name), pid, mem))
        self.samples += 1
        self.max_processes = max(self.max_processes, len(rows))
        self.roles_seen.update(r[0] for r in rows)
        pss = sum(m.pss for _, _, m in rows)
        if pss > self.peak_pss:
            self.peak_pss = pss
            self.peak_processes = len(rows)
            self.peak_at_s = time.monotonic() - self._t0
            self.at_peak = sorted(rows, key=lambda r: -r[2].pss)
            self.torch_at_peak = {pid for _, pid, _ in rows if maps_torch(pid)}
        self.peak_rss = max(self.peak_rss, sum(m.rss for _, _, m in rows))

    def stop(self) -> None:
        """Stop sampling (waits for the sample in progress)."""
        self._stop.set()
        self._thread.join()


def capped_file(sweep: Path, work: Path, num_samples: int | None, epochs: int | None, no_kfold: bool) -> Path:
    """``sweep`` itself, or (with a cap) a copy in ``work`` with at most ``num_samples``
    trials, ``epochs`` epochs, and no k-fold phase or report (``no_kfold``); a relative
    dataset path of the copy points at the original's folder."""
    if num_samples is None and epochs is None and not no_kfold:
        return sweep
    raw = yaml.safe_load(sweep.read_text())
    executor = raw.setdefault("hyperopt", {}).setdefault("executor", {})
    if num_samples is not None:
        executor["num_samples"] = min(num_samples, executor.get("num_samples", num_samples))
    if epochs is not None:
        trainer = raw.setdefault("trainer", {})
        trainer["epochs"] = min(epochs, trainer.get("epochs", epochs))
        scheduler = raw["hyperopt"].get("scheduler") or {}
        if "grace_period" in scheduler:
            scheduler["grace_period"] = min(scheduler["grace_period"], trainer["epochs"])
    if no_kfold:
        raw.pop("kfold", None)
        raw["report"] = {"enabled": False}
    source = (raw.get("dataset") or {}).get("source")
    if isinstance(source, str) and ":" not in source.split("/")[0] and not Path(source).is_absolute():
        raw["dataset"]["source"] = str((sweep.parent / source).resolve())
    copy = work / sweep.name
    copy.write_text(yaml.safe_dump(raw, sort_keys=False))
    return copy


def first_epoch_time(output: Path) -> float | None:
    """Wall time (s since the epoch) of the first metric any run logged in the MLflow store
    under ``output`` (the sweep's ``mlflow.db``), or None."""
    times = []
    for db in output.glob("**/mlflow.db"):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            (ms,) = con.execute("SELECT MIN(timestamp) FROM metrics").fetchone()
        if ms is not None:
            times.append(ms / 1000)
    return min(times) if times else None


def run_sweep(sweep: Path, work: Path) -> dict[str, Any]:
    """Run ``hpo sweep sweep`` in a session of its own, sampling its processes; return the figures.

    Raises:
        RuntimeError: the sweep failed or ran past :data:`SWEEP_TIMEOUT_S`.
    """
    output = work / "out"
    # a batch-size cache of its own: every run tunes its sizes as a first sweep on a machine does
    # (a hit on sizes an earlier run persisted would leave out the probes and their cache writes)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LUDWIG_HPO_CACHE_DIR": str(work / "cache")}
    started_wall, t0 = time.time(), time.monotonic()
    proc = subprocess.Popen(
        [*_hpo(), "sweep", str(sweep), "--output", str(output), "--restart"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    sampler = Sampler(proc.pid)
    first_trial = None
    lines: list[str] = []
    timeline: list[tuple[float, str]] = []  # (s after the command, line): the start-up's phases
    timer = threading.Timer(SWEEP_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            # the run's temporary folder reads the same on every machine and in every run
            timeline.append((round(time.monotonic() - t0, 2), line.rstrip().replace(str(work), "<run>")[:160]))
            if first_trial is None and re.search(r" started \(1/", line):
                first_trial = time.monotonic() - t0
        rc = proc.wait()
    finally:
        timer.cancel()
        sampler.stop()
    wall = time.monotonic() - t0
    if rc != 0:
        raise RuntimeError(f"hpo sweep exited {rc}:\n{''.join(lines[-30:])}")
    epoch_at = first_epoch_time(output)
    return {
        "peak_pss_mb": sampler.peak_pss / 2**20,
        "peak_rss_mb": sampler.peak_rss / 2**20,
        "processes_at_peak": sampler.peak_processes,
        "max_processes": sampler.max_processes,
        "peak_at_s": sampler.peak_at_s,
        "samples": sampler.samples,
        "first_trial_s": first_trial,
        "first_epoch_s": None if epoch_at is None else epoch_at - started_wall,
        "wall_s": wall,
        "roles_seen": sorted(sampler.roles_seen),
        "timeline": [t for t in timeline if first_trial is None or t[0] <= first_trial],
        "top_by_pss": [
            {
                "role": r,
                "pid": pid,
                "pss_mb": round(m.pss / 2**20, 1),
                "rss_mb": round(m.rss / 2**20, 1),
                "torch": pid in sampler.torch_at_peak,
            }
            for r, pid, m in sampler.at_peak
        ],
    }


def run_command(args: list[str]) -> tuple[float, float]:
    """Run ``hpo <args>`` (output discarded); return (wall s, peak RSS MB of its process).

    Raises:
        RuntimeError: the command failed.
    """
    t0 = time.monotonic()
    proc = subprocess.Popen([*_hpo(), *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"hpo {' '.join(args)} exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def _median(values: list[float | None]) -> float:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else float("nan")


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("sweep_file", nargs="?", type=Path, default=DEFAULT_SWEEP, help="the sweep file to run")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the sweep (figures: medians)")
    ap.add_argument("--num-samples", type=int, default=None, help="cap the sweep's trials")
    ap.add_argument("--epochs", type=int, default=None, help="cap the trials' epochs")
    ap.add_argument("--no-kfold", action="store_true", help="leave out the k-fold phase and the report")
    args = ap.parse_args()
    if not Path("/proc/self/smaps_rollup").exists():
        ap.error("this bench reads /proc/<pid>/smaps_rollup (Linux 4.14 or later)")
    run = BenchRun("footprint", args)
    sweeps: list[dict[str, Any]] = []
    commands: dict[str, list[tuple[float, float]]] = {"validate": [], "schema": []}
    with tempfile.TemporaryDirectory(prefix="hpo-bench-") as tmp:
        sweep = capped_file(args.sweep_file.resolve(), Path(tmp), args.num_samples, args.epochs, args.no_kfold)
        for i in range(args.repeats):
            work = Path(tmp) / f"run{i}"
            work.mkdir()
            f = run_sweep(sweep, work)
            sweeps.append(f)
            commands["validate"].append(run_command(["validate", str(sweep)]))
            commands["schema"].append(run_command(["schema"]))
            print(
                f"run {i + 1}: peak PSS {f['peak_pss_mb']:.0f} MB, RSS {f['peak_rss_mb']:.0f} MB over "
                f"{f['processes_at_peak']} processes (at {f['peak_at_s']:.1f} s; {f['max_processes']} at most); "
                f"first trial {f['first_trial_s'] or float('nan'):.1f} s, first epoch "
                f"{f['first_epoch_s'] or float('nan'):.1f} s, wall {f['wall_s']:.1f} s; validate "
                f"{commands['validate'][-1][0]:.2f} s {commands['validate'][-1][1]:.0f} MB, schema "
                f"{commands['schema'][-1][0]:.2f} s {commands['schema'][-1][1]:.0f} MB",
                flush=True,
            )
            for p in f["top_by_pss"][:TOP]:
                torch = " (torch)" if p["torch"] else ""
                print(f"    {p['pss_mb']:7.1f} MB PSS {p['rss_mb']:7.1f} MB RSS  {p['role']}{torch}", flush=True)
    med = {
        k: _median([s[k] for s in sweeps])
        for k in ("peak_pss_mb", "peak_rss_mb", "first_trial_s", "first_epoch_s", "wall_s")
    }
    validate_s = _median([w for w, _ in commands["validate"]])
    validate_mb = _median([m for _, m in commands["validate"]])
    schema_s = _median([w for w, _ in commands["schema"]])
    schema_mb = _median([m for _, m in commands["schema"]])
    run.finish(
        {
            "peak_rss_gb": Figure(med["peak_rss_mb"] / 1024, ".2f"),
            "peak_pss_gb": Figure(med["peak_pss_mb"] / 1024, ".2f"),
            "first_trial_s": Figure(med["first_trial_s"], ".1f"),
            "first_epoch_s": Figure(med["first_epoch_s"], ".1f"),
            "wall_s": Figure(med["wall_s"], ".1f"),
            "validate_s": Figure(validate_s, ".2f"),
            "validate_mb": Figure(validate_mb, ".0f"),
            "schema_s": Figure(schema_s, ".2f"),
        },
        _repo_relative(
            {
                "sweep_file": str(args.sweep_file),
                "goals": {"peak_rss_gb": 2.4, "first_trial_s": 10, "validate_s": 2, "validate_mb": 200},
                "schema_mb": schema_mb,
                "runs": sweeps,
                "validate": commands["validate"],
                "schema": commands["schema"],
            }
        ),
    )


def _repo_relative(value: Any) -> Any:
    """``value`` with this checkout's folder left out of every string (paths in process titles and
    the sweep file's name), so the results read the same on every machine."""
    if isinstance(value, str):
        return value.replace(f"{ROOT}/", "")
    if isinstance(value, dict):
        return {k: _repo_relative(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_repo_relative(v) for v in value]
    return value


if __name__ == "__main__":
    main()
