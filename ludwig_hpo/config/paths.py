"""Dotted paths (``trainer.learning_rate``, ``image.encoder.num_layers``,
``defaults.number.encoder.output_size``) set on the raw sweep mapping, and the one deep merge
of raw mappings. Pure; no I/O.

One walker serves sweep parameters (:func:`apply_params`) and ``--set`` overrides
(:mod:`ludwig_hpo.config.overrides`). A path's first part is a top-level key or a feature
name; the rest walks nested mappings, creating those that are missing or null
(:func:`split_path`). A feature name may hold dots (``x.y.encoder.type`` walks into feature
``x.y``): the longest feature name the path starts with wins, and a first part in quotes
(``"x.y".encoder.type``, ``'x.y'.encoder.type``) names a feature or key exactly. Sweep
parameters may start only with a section a trial may change (:data:`SECTIONS`) or a feature
name, and the parameter ``"."`` deep-merges a partial config block at the root; overrides may
start with any top-level key (``backend.num_workers``, ``name``). Paths never reach attributes
or anything outside the mapping.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

#: Top-level sections a sweep parameter (or a ``"."`` block) may set (``adapter`` and
#: ``generation``: those of ``model_type: llm``).
SECTIONS = ("trainer", "combiner", "defaults", "adapter", "generation")
#: The parameter path of partial config blocks deep-merged at the root.
ROOT = "."
#: A raw (YAML-parsed) mapping: the sweep file, a section, a feature.
RawMapping = dict[str, Any]

_PARAMETER_FORM = "'<section or feature>.<field>[.<field>...]'"
_OVERRIDE_FORM = "'<key or feature>[.<field>...]'"
_PARAMETER_FIX = (
    "use a path such as 'trainer.learning_rate', '<feature>.encoder.<field>' or "
    "'defaults.<feature type>.encoder.<field>'"
)


class PathError(ValueError):
    """A dotted path does not address the config.

    Args:
        message: why, with the path and what exists.
        fix: how to write the path instead, as an imperative sentence.
    """

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix

    def __reduce__(self) -> tuple[type[PathError], tuple[str, str]]:
        return (type(self), (str(self), self.fix))


def _feature_index(raw: Mapping[str, Any]) -> dict[str, RawMapping]:
    out: dict[str, RawMapping] = {}
    for section in ("input_features", "output_features"):
        for feat in raw.get(section) or []:
            if isinstance(feat, dict) and isinstance(feat.get("name"), str):
                out[feat["name"]] = feat
    return out


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else f"valid starts are {sorted(options)}"


_QUOTES = ('"', "'")


def feature_names(raw: Mapping[str, Any]) -> list[str]:
    """The names of the input and output features of a raw sweep mapping, in file order."""
    return list(_feature_index(raw))


def split_path(path: str, features: Iterable[str] = ()) -> list[str]:
    """``[first part, field, ...]`` of a dotted path. The first part is, in this order: the
    longest of ``features`` that the path starts with, followed by a ``.``; a name in quotes
    (``"a.b".x`` -> ``["a.b", "x"]``); else the text before the first ``.``. The fields
    after it are split at every ``.``. Pure.

    >>> split_path("x.y.encoder.type", ["x", "x.y"])
    ['x.y', 'encoder', 'type']
    >>> split_path('"x.y".encoder.type')
    ['x.y', 'encoder', 'type']

    Raises:
        PathError: a quote that is not closed before a ``.`` or the path's end.
    """
    head = max((f for f in features if path.startswith(f + ".")), key=len, default=None)
    if head is not None:
        return [head, *path[len(head) + 1 :].split(".")]
    if path[:1] in _QUOTES:
        q = path[0]
        end = path.find(q + ".", 1)
        if end < 0 and path.endswith(q) and len(path) > 1:
            return [path[1:-1]]
        if end < 0:
            raise PathError(
                f"path {path!r} opens a quote {q} that does not close before a '.'",
                fix=f"write the name in quotes followed by its fields, e.g. {q}a.b{q}.encoder.type",
            )
        return [path[1:end], *path[end + 2 :].split(".")]
    return path.split(".")


def _child(node: RawMapping, key: str) -> Any:
    """``node[key]``, a new empty mapping when it is missing or null."""
    child = node.get(key)
    if child is None:
        child = node[key] = {}
    return child


def set_path(raw: RawMapping, path: str, value: Any, *, any_top_level: bool = False) -> None:
    """Set a deep copy of ``value`` at dotted ``path`` inside ``raw`` (mutates ``raw``).

    Args:
        raw: the raw sweep mapping.
        path: dotted keys; a first part naming a feature walks into that feature.
        value: any YAML value; ``path`` ``"."`` deep-merges a mapping at the root.
        any_top_level: False for sweep parameters (the first part must be one of
            :data:`SECTIONS` or a feature name, and a field must follow it); True for
            ``--set`` overrides (any top-level key, and a one-part path sets that key).

    Raises:
        PathError: an empty part, a parameter path that does not start with a section or a
            feature name, or a part that walks into a value that is not a mapping.
    """
    if path == ROOT and not any_top_level:
        if not isinstance(value, dict):
            raise PathError(
                f"the '.' parameter merges config blocks at the root, but got {value!r}",
                fix="write categories like {trainer: {learning_rate: 0.01}}",
            )
        merged = deep_merge(raw, value)
        raw.clear()
        raw.update(merged)
        return
    form = _OVERRIDE_FORM if any_top_level else _PARAMETER_FORM
    features = _feature_index(raw)
    parts = split_path(path, features)
    if any(not p for p in parts):
        raise PathError(
            f"path {path!r} has an empty part; it must be {form}", fix="write dotted keys, e.g. trainer.learning_rate"
        )
    node: RawMapping
    if parts[0] in features and len(parts) > 1:
        node, walked = features[parts[0]], 1
    elif any_top_level:
        node, walked = raw, 0
    elif len(parts) < 2:
        raise PathError(f"path {path!r} must be {form}", fix=_PARAMETER_FIX)
    elif parts[0] in SECTIONS:
        node, walked = raw, 0
    else:
        head = parts[0]
        raise PathError(
            f"path {path!r} starts with {head!r}, which is neither a section "
            f"({', '.join(SECTIONS)}) nor a feature name; {_suggest(head, [*SECTIONS, *features])}",
            fix=_PARAMETER_FIX,
        )
    for i in range(walked, len(parts) - 1):
        child = _child(node, parts[i])
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise PathError(
                f"path {path!r} walks into {where!r}, which is a value, not a section", fix="end the path at a field"
            )
        node = child
    node[parts[-1]] = copy.deepcopy(value)


def deep_merge(base: Any, over: Any) -> Any:
    """A deep copy of ``over`` merged onto ``base``: mappings merge key by key (``over``'s
    values win), anything else (lists, scalars) is replaced by ``over``'s value. Neither
    input is changed or shared with the result. Pure."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = copy.deepcopy(base)
        for k, v in over.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def apply_params(raw: Mapping[str, Any], params: Mapping[str, Any]) -> RawMapping:
    """A deep copy of ``raw`` with each sweep parameter ``{dotted path: value}`` of ``params``
    set (``"."`` blocks first, so a dotted parameter wins over the same field in a block).

    Raises:
        PathError: see :func:`set_path`.
    """
    out = copy.deepcopy(dict(raw))
    for path, value in sorted(params.items(), key=lambda kv: kv[0] != ROOT):
        set_path(out, path, value)
    return out
