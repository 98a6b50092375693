"""The temp folders of local clusters (``hpo-ray-*`` in the system temp folder): made with an
owner marker, and those of dead sweeps removed by the next one. Driver only.

A sweep killed outright (SIGKILL, a lost machine) cannot remove its cluster's folder. The
marker says whose it is: the owner's pid, that process's start time (a pid the kernel gave
to a new process is not the owner) and the user. Only folders whose marker proves them this
user's and their owner gone are removed: never another user's, a live sweep's, or one
without a marker (being created, or made by something else).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

#: Name prefix of a local cluster's temp folder (short: Ray's socket paths are length-limited).
PREFIX = "hpo-ray-"
#: The owner marker inside the folder.
OWNER_FILE = "hpo-owner.json"
#: Where the folders are made: short, for Ray's socket paths (``/tmp``, else the system's).
ROOT = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())


@dataclass(frozen=True)
class Owner:
    """Who made a temp folder: ``pid``, its ``started`` time (clock ticks after boot, from
    ``/proc``; None where unknown), the ``boot`` it ran in, and the user id ``uid``."""

    pid: int
    started: int | None
    boot: str | None
    uid: int


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """Process ``pid``'s start time in clock ticks after boot (Linux), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:  # the command name (field 2) may hold spaces: count the fields after its ')'
        return int(stat.rpartition(")")[2].split()[19])
    except (IndexError, ValueError):
        return None


def this_process() -> Owner:
    """The :class:`Owner` record of the calling process."""
    pid = os.getpid()
    return Owner(pid, _start_ticks(pid), _boot_id(), os.getuid())


def is_alive(owner: Owner) -> bool:
    """Whether ``owner``'s process still runs (the same process, not a new one with its pid).
    Unsure (no ``/proc``) counts as alive."""
    if owner.boot is not None and _boot_id() not in (None, owner.boot):
        return False  # the machine restarted since
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds the pid now: not the owner
        return False
    if owner.started is None:
        return True
    now = _start_ticks(owner.pid)
    return now is None or now == owner.started


def make_temp_dir(root: Path = ROOT) -> Path:
    """A new ``hpo-ray-*`` folder under ``root`` with this process's owner marker."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    (folder / OWNER_FILE).write_text(json.dumps(asdict(this_process())))
    return folder


def _owner(folder: Path) -> Owner | None:
    try:
        return Owner(**json.loads((folder / OWNER_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def remove_dead_temp_dirs(root: Path = ROOT, *, alive: Callable[[Owner], bool] = is_alive) -> list[Path]:
    """Remove the ``hpo-ray-*`` folders under ``root`` that this user's dead sweeps left;
    returns them. A folder stays unless it is this user's (its owner and the marker's
    ``uid``), its marker is readable, and ``alive`` says its owner is gone."""
    removed = []
    uid = os.getuid()
    for folder in sorted(root.glob(f"{PREFIX}*")):
        try:
            if not folder.is_dir() or folder.is_symlink() or folder.stat().st_uid != uid:
                continue
        except OSError:
            continue
        owner = _owner(folder)
        if owner is None or owner.uid != uid or alive(owner):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
