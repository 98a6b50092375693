"""The only YAML reader of sweep files: text -> raw mapping with the ``(line, column)`` of every
key, or a one-line :class:`~ludwig_hpo.errors.ConfigError` naming ``file:line:column``.

Duplicate keys, non-scalar keys and alias bombs are refused. Runs in the driver; touches
nothing but the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ludwig_hpo.config.base import KeyPath
from ludwig_hpo.config.paths import RawMapping
from ludwig_hpo.errors import ConfigError

#: A 1-based ``(line, column)`` in the file.
Mark = tuple[int, int]
#: ``{raw key path: mark}`` of every key and value of a file.
Marks = dict[KeyPath, Mark]
#: Values a sweep file may expand to: nested aliases grow exponentially ("billion laughs").
MAX_NODES = 100_000


@dataclass(frozen=True)
class SweepFile:
    """A sweep file as parsed.

    Attributes:
        text: the file's text.
        raw: its top-level mapping.
        marks: where each key path starts (a key's own position, a list item's value).
    """

    text: str
    raw: RawMapping
    marks: Marks


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML would silently keep the last)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            m = key_node.start_mark
            raise ConfigError(
                "a key must be a plain value, not a list or mapping",
                source=f"{loader.name}:{m.line + 1}:{m.column + 1}",
                fix="use a string key",
            ) from None
        if key in seen:
            m = key_node.start_mark
            raise ConfigError(
                f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                source=f"{loader.name}:{m.line + 1}:{m.column + 1}",
                fix="keep only one of them",
            )
        seen[key] = key_node
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=deep)
    return mapping


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int = 0) -> int:
    """How many values ``node`` stands for once aliases are expanded (linear in the file's size)."""
    if id(node) in memo:
        return memo[id(node)]
    if depth > 200:  # a recursive alias: its size is unbounded
        return MAX_NODES + 1
    memo[id(node)] = MAX_NODES + 1  # a cycle back to this node counts as unbounded
    children: list[yaml.Node] = (
        [v for pair in node.value for v in pair]
        if isinstance(node, yaml.MappingNode)
        else node.value
        if isinstance(node, yaml.SequenceNode)
        else []
    )
    memo[id(node)] = min(MAX_NODES + 1, 1 + sum(_expanded_size(c, memo, depth + 1) for c in children))
    return memo[id(node)]


def _marks(node: yaml.Node, prefix: KeyPath = (), seen: set[int] | None = None) -> Marks:
    """``{key path: (line, column)}`` of every node, each node visited once (an aliased node
    is marked under its first path)."""
    seen = set() if seen is None else seen
    out: Marks = {prefix: (node.start_mark.line + 1, node.start_mark.column + 1)}
    if id(node) in seen:
        return out
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key: KeyPath = (*prefix, k.value)
            out.update(_marks(v, key, seen))
            out[key] = (k.start_mark.line + 1, k.start_mark.column + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out.update(_marks(v, (*prefix, i), seen))
    return out


def mark_for(marks: Marks, path: KeyPath) -> Mark | None:
    """The mark of ``path``, else of its longest prefix that has one (None: no marks)."""
    for n in range(len(path), -1, -1):
        if path[:n] in marks:
            return marks[path[:n]]
    return None


def read_sweep_file(path: Path) -> SweepFile:
    """Read and parse one sweep file.

    Raises:
        ConfigError: missing or unreadable file, not UTF-8, invalid YAML, duplicate or
            non-scalar keys, alias bombs, an empty file, or a top level that is not a mapping.
    """
    src = str(path)
    if not path.exists():
        raise ConfigError("file not found", source=src, fix="check the path (it is relative to the current folder)")
    if path.is_dir():
        raise ConfigError("is a folder, not a sweep file", source=src, fix="pass the path of a .yaml file")
    try:
        text = path.read_bytes().decode("utf-8")
    except PermissionError:
        raise ConfigError("permission denied", source=src, fix="make the file readable") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"not UTF-8 text (byte {e.start})", source=src, fix="save the file as UTF-8") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        size = _expanded_size(node, {}) if node is not None else 0
        if size > MAX_NODES:
            raise ConfigError(
                f"the file expands to over {MAX_NODES} values through YAML aliases",
                source=src,
                fix="write the values out instead of nesting anchors",
            )
        loader = _UniqueKeyLoader(text)
        loader.name = src
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        m = e.problem_mark or e.context_mark
        where = f"{src}:{m.line + 1}:{m.column + 1}" if m else src
        raise ConfigError(
            f"invalid YAML: {e.problem or e.context}", source=where, fix="fix the YAML syntax at that position"
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}", source=src, fix="fix the YAML syntax") from None
    except RecursionError:
        raise ConfigError(
            "invalid YAML: an alias refers to itself", source=src, fix="remove the recursive anchor/alias"
        ) from None
    if data is None:
        raise ConfigError("the file is empty", source=src, fix="write a sweep file (see README.md)")
    if not isinstance(data, dict):
        raise ConfigError(
            f"the top level must be a mapping of sections, not a {type(data).__name__}",
            source=src,
            fix="start the file with 'name:', 'dataset:', ... keys",
        )
    return SweepFile(text=text, raw=data, marks=_marks(node) if node is not None else {})
