"""Dotted parameter paths (``trainer.learning_rate``, ``image.encoder.num_layers``,
``combiner.output_size``, ``defaults.number.encoder.output_size``) applied to the raw sweep
dict. Pure; no I/O.

A path's first part is a section (``trainer``, ``combiner``, ``defaults``) or a feature
name; the rest walks nested mappings. The path ``"."`` deep-merges a mapping (a partial
config block) at the root. Paths never reach attributes or anything outside the dict.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from typing import Any

SECTIONS = ("trainer", "combiner", "defaults")
#: The path of partial config blocks merged at the root.
ROOT = "."


class PathError(ValueError):
    """A parameter path does not address the config; the message says why and what exists."""


def _feature_index(raw: Mapping[str, Any]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for section in ("input_features", "output_features"):
        for feat in raw.get(section) or []:
            if isinstance(feat, dict) and isinstance(feat.get("name"), str):
                out[feat["name"]] = feat
    return out


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else f"valid starts are {sorted(options)}"


def set_path(raw: dict, path: str, value: Any) -> None:
    """Set ``value`` at dotted ``path`` inside ``raw`` (mutates ``raw``; copies ``value``).

    Raises:
        PathError: the first part is neither a section nor a feature name, or a part
            walks into something that is not a mapping.
    """
    if path == ROOT:
        if not isinstance(value, dict):
            raise PathError(f"the '.' parameter merges config blocks at the root, but got {value!r}")
        merged = deep_merge(raw, value)
        raw.clear()
        raw.update(merged)
        return
    parts = path.split(".")
    if len(parts) < 2 or any(not p for p in parts):
        raise PathError(f"path {path!r} must be '<section or feature>.<field>[.<field>...]'")
    head, rest = parts[0], parts[1:]
    features = _feature_index(raw)
    if head in SECTIONS:
        node = raw.setdefault(head, {})
        if node is None:
            node = raw[head] = {}
    elif head in features:
        node = features[head]
    else:
        raise PathError(
            f"path {path!r} starts with {head!r}, which is neither a section "
            f"({', '.join(SECTIONS)}) nor a feature name; {_suggest(head, [*SECTIONS, *features])}"
        )
    for i, part in enumerate(rest[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 2])
            raise PathError(f"path {path!r} walks into {where!r}, which is a value, not a section")
        node = child
    node[rest[-1]] = copy.deepcopy(value)


def deep_merge(base: Any, over: Any) -> Any:
    """A deep copy of ``over`` merged onto ``base``: mappings merge key by key, anything else
    (lists, scalars) is replaced by ``over``'s value. Pure."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = copy.deepcopy(base)
        for k, v in over.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def apply_params(raw: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
    """Return a deep copy of ``raw`` with each ``{dotted path: value}`` of ``params`` set.

    Raises:
        PathError: see :func:`set_path`.
    """
    out = copy.deepcopy(dict(raw))
    # "." blocks first: a dotted parameter then wins over the same field in a block
    for path, value in sorted(params.items(), key=lambda kv: kv[0] != ROOT):
        set_path(out, path, value)
    return out
