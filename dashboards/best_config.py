"""The best trial's configuration in a form that applies to the sweep file as it is.

A YAML block of the best values cannot be pasted into the sweep file: a feature's keys
(``image.encoder.num_layers``) belong inside its entry of ``input_features``, not under a
top-level ``image:`` key, and a ``trainer:`` block next to the file's own ``trainer:`` is a
duplicate key. ``--set PATH=VALUE`` overrides walk the same dotted paths as the sweep's
parameters (:func:`ludwig_hpo.config.paths.set_path`), so the report gives those, and the
``hpo train`` command lines that apply them. Pure; runs wherever the report is built.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

import yaml

from dashboards._format import plain
from ludwig_hpo.config.paths import ROOT
from ludwig_hpo.results import TrialRecord

#: The ``--set`` path of the per-worker batch size a trial used (chosen when ``auto``).
BATCH_SIZE_PATH = "trainer.batch_size"


class BestConfig(NamedTuple):
    """How to train the best trial's configuration again.

    Attributes:
        sets: ``(dotted path, YAML text of the value)`` in the order they must be applied:
            the leaves of ``"."`` blocks first, then the dotted parameters (which win over a
            block's same field, as in the sweep), then the batch size the trial used.
        set_args: the same as shell-quoted ``--set PATH=VALUE`` arguments.
        command: ``hpo train <sweep file> --set ...``: the sweep file's base configuration
            with the best values.
        from_sweep_command: ``hpo train <sweep file> --from-sweep <output folder>`` (with the
            used batch size), or None when the output folder is unknown.
    """

    sets: list[tuple[str, str]]
    set_args: list[str]
    command: str
    from_sweep_command: str | None


def yaml_text(value: Any) -> str:
    """``value`` as one line of YAML that ``--set`` reads back to an equal value
    (``0.001``, ``adam``, ``'16'`` for a string that looks like a number, ``{type: sgd}``)."""
    text = yaml.safe_dump(_plain_tree(value), default_flow_style=True, width=10**9, allow_unicode=True, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def best_sets(params: Mapping[str, Any], batch_size: int | None) -> list[tuple[str, str]]:
    """The ``--set`` overrides that give the best trial's configuration (see :class:`BestConfig`).

    A ``"."`` parameter (a config block deep-merged at the root) becomes one override per
    leaf: setting each leaf is what the merge does (mappings merge key by key, anything else
    is replaced). ``batch_size`` (per worker, as the trial used it) is added unless a
    parameter already sets it.
    """
    sets: list[tuple[str, str]] = []
    root = params.get(ROOT)
    if isinstance(root, Mapping):
        sets += [(path, yaml_text(v)) for path, v in _leaves(root, "")]
    sets += [(path, yaml_text(v)) for path, v in params.items() if path != ROOT]
    if batch_size is not None and all(path != BATCH_SIZE_PATH for path, _ in sets):
        sets.append((BATCH_SIZE_PATH, str(int(batch_size))))
    return sets


def best_config(best: TrialRecord, sweep_file: str, output_dir: str) -> BestConfig:
    """The commands that train ``best`` again from ``sweep_file`` (the sweep file as written;
    the output folder keeps a copy) and, when known, ``output_dir`` (``--from-sweep``)."""
    sets = best_sets(best.params, best.batch_size)
    args = [f"--set {shlex.quote(f'{path}={text}')}" for path, text in sets]
    command = " ".join(["hpo train", shlex.quote(sweep_file), *args])
    from_sweep = None
    if output_dir:
        batch = [] if best.batch_size is None else [f"--set {BATCH_SIZE_PATH}={int(best.batch_size)}"]
        from_sweep = " ".join(["hpo train", shlex.quote(sweep_file), "--from-sweep", shlex.quote(output_dir), *batch])
    return BestConfig(sets, args, command, from_sweep)


def _leaves(block: Mapping[str, Any], prefix: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in block.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out += _leaves(value, f"{path}.")
        elif not (isinstance(value, Mapping) and not value):  # merging {} changes nothing
            out.append((path, value))
    return out


def _plain_tree(value: Any) -> Any:
    value = plain(value)
    if isinstance(value, (list, tuple)):
        return [_plain_tree(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain_tree(v) for k, v in value.items()}
    return value


__all__ = ["BATCH_SIZE_PATH", "BestConfig", "best_config", "best_sets", "yaml_text"]
