"""How a lost worker died: a :class:`~ludwig_hpo.errors.WorkerLoss` from what Ray says of the
dead actor and what the rank's node still shows.

Ray tells a dead actor's pid, node IP and exit detail (``ActorDiedError``), but not the
signal: a process killed outright just drops its connection to the raylet. Its node tells
the rest: a crash leaves Python's fault handler's ``Fatal Python error`` in the worker's
``.err`` log, and the kernel's OOM killer raises the node's ``oom_kill`` count (which each
rank writes down when it starts, :func:`remember_rank`); a process that ended with neither
was killed by SIGKILL. The node is read directly when it is the caller's, else by a
zero-CPU task pinned to it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ludwig_hpo.errors import WorkerLoss

#: Beside a Ray session's logs: one ``<pid>.json`` per rank, written when the rank starts.
RANKS_FOLDER = "hpo-ranks"
#: How long the read of a remote node may take before the loss is described without it.
NODE_READ_TIMEOUT_S = 30.0

_PID = re.compile(r"^\s*pid: (\d+)\s*$", re.M)
_IP = re.compile(r"^\s*ip: (\S+)\s*$", re.M)
_EXIT_CODE = re.compile(r"exit code (-?\d+)")
_FATAL = re.compile(r"^Fatal Python error: (.+)$", re.M)


def _session_logs() -> Path | None:
    """This node's Ray session logs folder (in a Ray worker or driver), or None outside Ray."""
    try:
        from ray._private import worker

        node = getattr(worker.global_worker, "node", None)
        return Path(node.get_logs_dir_path()) if node is not None else None
    except Exception:  # another Ray layout: the loss is described from Ray's message alone
        return None


def _oom_kills() -> int | None:
    """The kernel's count of OOM kills on this node (``/proc/vmstat``), or None (not Linux)."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def remember_rank() -> None:
    """Write down, on this node, what a later diagnosis of this process's death compares
    against (the node's OOM-kill count now). Runs in each rank's process when it starts (a
    warm group's worker, a Ray Train worker); a no-op outside Ray."""
    logs = _session_logs()
    if logs is None:
        return
    folder = logs / RANKS_FOLDER
    try:
        folder.mkdir(exist_ok=True)
        (folder / f"{os.getpid()}.json").write_text(json.dumps({"oom_kills": _oom_kills()}))
    except OSError:  # a read-only session folder: the diagnosis does without it
        pass


def node_view(pid: int) -> dict[str, Any]:
    """What this node shows of dead process ``pid``: ``fatal`` (the fault handler's line in its
    worker log, or None), ``oom_kills_at_start`` and ``oom_kills`` (None when unknown). Runs
    on the dead process's node (directly, or as the task :func:`_read_node` pins there)."""
    view: dict[str, Any] = {"fatal": None, "oom_kills_at_start": None, "oom_kills": _oom_kills()}
    logs = _session_logs()
    if logs is None:
        return view
    try:
        view["oom_kills_at_start"] = json.loads((logs / RANKS_FOLDER / f"{pid}.json").read_text())["oom_kills"]
    except (OSError, ValueError, KeyError):
        pass
    for err in logs.glob(f"worker-*-{pid}.err"):
        try:
            found = _FATAL.findall(err.read_text(errors="replace")[-20_000:])
        except OSError:
            continue
        if found:
            view["fatal"] = found[-1].strip()
    return view


def _read_node(ip: str, pid: int) -> dict[str, Any]:
    """:func:`node_view` of ``pid`` on the node at ``ip``: here, or by a task pinned to that node."""
    import ray

    if not ip or ip == ray.util.get_node_ip_address():
        return node_view(pid)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node_id = next((n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == ip), None)
    if node_id is None:  # the node itself is gone
        return {"fatal": None, "oom_kills_at_start": None, "oom_kills": None, "node_gone": True}
    task = ray.remote(num_cpus=0)(node_view).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    )
    try:
        view: dict[str, Any] = ray.get(task.remote(pid), timeout=NODE_READ_TIMEOUT_S)
        return view
    except Exception:  # the node does not answer: described from Ray's message alone
        return {"fatal": None, "oom_kills_at_start": None, "oom_kills": None}


def how_it_ended(ray_message: str, view: dict[str, Any]) -> str:
    """The verb phrase of :attr:`WorkerLoss.how` from Ray's death message of the actor and
    :func:`node_view`'s ``view`` of its node. Pure.

    >>> how_it_ended("Worker unexpectedly exits with a connection error code 2. End of file.", {})
    'was killed by signal 9 (SIGKILL)'
    """
    text = " ".join(ray_message.split())
    if view.get("node_gone") or "NODE_DIED" in text:
        return "was lost with its node"
    if "OUT_OF_MEMORY" in text or "low on memory" in text:
        return "was killed by Ray's memory monitor (the node ran out of memory)"
    if view.get("fatal"):
        return f"crashed (Fatal Python error: {view['fatal']})"
    if (code := _EXIT_CODE.search(text)) is not None and "connection error code" not in text:
        return f"exited with code {code.group(1)}"
    if "INTENDED" in text:
        return "was stopped by Ray (an intended exit)"
    before, now = view.get("oom_kills_at_start"), view.get("oom_kills")
    if before is not None and now is not None and now > before:
        return "was killed by the kernel's OOM killer (SIGKILL)"
    if "connection error" in text or "End of file" in text or "SYSTEM_ERROR" in text:
        return "was killed by signal 9 (SIGKILL)"
    return "died (the cause Ray gave: " + (text[:200] or "none") + ")"


def describe_dead_rank(error: BaseException, rank: int, world_size: int, *, during: str = "training") -> WorkerLoss:
    """The :class:`WorkerLoss` of ``rank``, whose actor died with ``error`` (Ray's
    ``RayActorError``, or Ray Train's health-check error wrapping one). Runs where the loss
    was noticed (the pools actor, a Tune trial actor), inside the cluster."""
    cause = getattr(error, "health_check_failure", error)  # Ray Train wraps the actor's error
    text = str(cause)
    pid = int(m.group(1)) if (m := _PID.search(text)) else 0
    ip = m.group(1) if (m := _IP.search(text)) else ""
    view = _read_node(ip, pid) if pid else {}
    return WorkerLoss(rank, world_size, pid=pid, node=ip, how=how_it_ended(text, view), during=during)


def is_dead_actor(error: BaseException) -> bool:
    """``error`` says a rank's process died (rather than that its code raised)."""
    from ray.exceptions import RayActorError

    return isinstance(getattr(error, "health_check_failure", error), RayActorError)
