"""A sweep's progress on disk (``state.json`` in its output folder), and the decision
``hpo sweep`` takes when the output folder already holds a sweep: resume it, start over, or
refuse because the file changed.

Written by the driver only, atomically (a crash leaves the old or the new file, never half).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import ConfigError

Phase = Literal["search", "kfold", "report", "finished"]
#: What an output folder holds: a sweep's, or an ``hpo train`` run's (a sweep of one trial).
SweepKind = Literal["sweep", "train"]


@dataclass(frozen=True)
class SweepState:
    """Where a sweep stands.

    Attributes:
        fingerprint: hash of the sweep file's text and its dataset (see :func:`fingerprint`).
        sweep_file: the sweep file's absolute path (its folder anchors relative dataset paths).
        parent_run_id: the sweep's MLflow parent run.
        tracking_uri: the MLflow store the runs are in.
        phase: ``search`` (trials), ``kfold`` (re-evaluation), ``report``, or ``finished``.
        dataset: the ``--dataset`` file that replaced ``dataset.source``, if any.
        kind: ``sweep``, or ``train`` for the folder of an ``hpo train`` run (which ``hpo ui``
            does not take for the newest sweep); files without it are sweeps'.
    """

    fingerprint: str
    sweep_file: str
    parent_run_id: str
    tracking_uri: str
    phase: Phase = "search"
    dataset: str | None = None
    kind: SweepKind = "sweep"

    def at(self, phase: Phase) -> SweepState:
        return replace(self, phase=phase)


def fingerprint(text: str, raw: dict) -> str:
    """sha256 of a sweep file's text and of the dataset it reads (``--dataset`` replaces the
    file's own): two runs with equal fingerprints are the same sweep."""
    dataset = json.dumps(raw.get("dataset"), sort_keys=True, default=str)
    return hashlib.sha256(f"{text}\n{dataset}".encode()).hexdigest()


def read_state(root: Path) -> SweepState | None:
    """The state in ``root``, or None when there is none (or it is unreadable: not a sweep we wrote)."""
    try:
        return SweepState(**json.loads(SweepPaths(root).state.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_state(root: Path, state: SweepState) -> None:
    """Replace ``root/state.json`` atomically (driver only)."""
    paths = SweepPaths(root)
    paths.state_tmp.write_text(json.dumps(asdict(state), indent=1))
    os.replace(paths.state_tmp, paths.state)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    if isinstance(node, list) and node and all(isinstance(v, dict) and "name" in v for v in node):
        out = {}
        for v in node:  # features: keyed by name, so reordering is not a difference
            out.update(_flatten({k: x for k, x in v.items() if k != "name"}, f"{prefix}[{v['name']}]"))
        return out
    return {prefix: node}


def changed_keys(old: dict, new: dict) -> list[str]:
    """Dotted key paths whose values differ between two sweep files' mappings, sorted.

    >>> changed_keys({"trainer": {"epochs": 3}}, {"trainer": {"epochs": 4}, "name": "x"})
    ['name', 'trainer.epochs']
    """
    a, b = _flatten(old), _flatten(new)
    return sorted(k for k in set(a) | set(b) if a.get(k, object()) != b.get(k, object()))


Decision = Literal["new", "resume"]


def decide(root: Path, text: str, raw: dict, *, restart: bool) -> tuple[Decision, SweepState | None]:
    """What ``hpo sweep`` does with the output folder ``root`` (``<output root>/<name>``).

    Returns:
        ``("resume", state)`` when ``root`` holds an unfinished sweep of the same file;
        ``("new", None)`` otherwise (a fresh folder is chosen; with ``restart`` the caller
        removes ``root`` first when it holds an unfinished sweep).

    Raises:
        ConfigError: ``root`` holds an unfinished sweep of a different file (names the keys
            that differ) and ``restart`` is False.
    """
    state = read_state(root)
    if state is None or state.phase == "finished" or restart:
        return "new", None
    if state.fingerprint == fingerprint(text, raw):
        return "resume", state
    try:
        import yaml

        old = yaml.safe_load(SweepPaths(root).sweep_file.read_text()) or {}
        keys = changed_keys(old, raw)
    except (OSError, ValueError):
        keys = []
    which = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "") if keys else "comments only"
    raise ConfigError(
        f"{root} holds an unfinished sweep of a different version of this file (changed: {which})",
        fix=f"pass --restart to discard it, `hpo resume {root}` to finish it as it was, or change 'name:'",
    )
