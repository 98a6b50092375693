"""The only YAML reader: sweep file -> validated :class:`SweepConfig`, or one-line errors.

Errors name ``file:line:column``, the key path, what is wrong and the fix, and are raised
as :class:`~ludwig_hpo.errors.ConfigError` before anything (Ray, MLflow, folders) starts.
"""

from __future__ import annotations

import difflib
import json
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ludwig_hpo.config.base import RuleError
from ludwig_hpo.config.paths import ROOT, PathError, apply_params
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.config.spaces import INT_SPACES, LISTED_SPACES
from ludwig_hpo.errors import ConfigError

Mark = tuple[int, int]  # 1-based (line, column)
#: Values a sweep file may expand to: nested aliases grow exponentially ("billion laughs").
MAX_NODES = 100_000


@dataclass(frozen=True)
class LoadedSweep:
    """A validated sweep file.

    Attributes:
        config: the typed config.
        raw: the file's mapping as parsed (parameters not applied); trials apply their
            sampled values to it with :func:`resolve_trial_config`.
        path: the sweep file.
        text: the file's text (hashed and logged as an artifact).
    """

    config: SweepConfig
    raw: dict
    path: Path
    text: str

    @property
    def base_dir(self) -> Path:
        """The sweep file's folder; relative dataset paths are resolved against it."""
        return self.path.resolve().parent


# ---------------------------------------------------------------------------- YAML with marks
class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML would silently keep the last)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False):
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
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int = 0) -> int:
    """How many values ``node`` stands for once aliases are expanded (linear in the file's size)."""
    if id(node) in memo:
        return memo[id(node)]
    if depth > 200:  # a recursive alias: its size is unbounded
        return MAX_NODES + 1
    memo[id(node)] = MAX_NODES + 1  # a cycle back to this node counts as unbounded
    children = (
        [v for pair in node.value for v in pair]
        if isinstance(node, yaml.MappingNode)
        else node.value
        if isinstance(node, yaml.SequenceNode)
        else []
    )
    memo[id(node)] = min(MAX_NODES + 1, 1 + sum(_expanded_size(c, memo, depth + 1) for c in children))
    return memo[id(node)]


def _marks(node: yaml.Node, prefix: tuple = (), seen: set | None = None) -> dict[tuple, Mark]:
    """``{key path: (line, column)}`` of every node, each node visited once (an aliased node
    is marked under its first path)."""
    seen = set() if seen is None else seen
    out: dict[tuple, Mark] = {prefix: (node.start_mark.line + 1, node.start_mark.column + 1)}
    if id(node) in seen:
        return out
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = (*prefix, k.value)
            out.update(_marks(v, key, seen))
            out[key] = (k.start_mark.line + 1, k.start_mark.column + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out.update(_marks(v, (*prefix, i), seen))
    return out


def _read(path: Path) -> tuple[str, dict, dict[tuple, Mark]]:
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
    return text, data, _marks(node) if node is not None else {}


# ---------------------------------------------------------------------------- pydantic -> one line
def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _step_type(tp: Any, step: Any) -> tuple[Any, bool]:
    """Type reached from ``tp`` by one loc step; second item True if the step was a union tag."""
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        members = [_unwrap(a) for a in typing.get_args(tp) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        for m in models:
            for tag_field in ("type", "space"):
                f = m.model_fields.get(tag_field)
                if f is not None and step in typing.get_args(_unwrap(f.annotation)):
                    return m, True
        if len(models) == 1 and len(members) == 1:
            return _step_type(models[0], step)
        return tp, True  # pydantic's label of a plain union member ("int", "literal['auto']")
    if origin is list:
        return typing.get_args(tp)[0], False
    if origin is dict:
        return typing.get_args(tp)[1], False
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        f = tp.model_fields.get(step)
        return (f.annotation if f else None), False
    return None, False


def _optional_model(tp: Any) -> Any:
    """``Model`` for ``Model | None``, else ``tp``."""
    tp = _unwrap(tp)
    if typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        members = [_unwrap(a) for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return tp


def _model_and_path(loc: tuple) -> tuple[Any, tuple]:
    """Follow a pydantic error loc through the schema; return (model at the end, raw key path)."""
    tp: Any = SweepConfig
    raw_path: list = []
    parent = SweepConfig
    for step in loc:
        nxt, was_tag = _step_type(tp, step)
        if was_tag:
            tp = nxt
            continue
        parent = _optional_model(tp)
        raw_path.append(step)
        tp = nxt
    return _unwrap(parent), tuple(raw_path)


def _display(raw: dict, path: tuple) -> str:
    out, node = "", raw
    for step in path:
        if isinstance(step, int):
            name = (
                node[step].get("name")
                if isinstance(node, list) and step < len(node) and isinstance(node[step], dict)
                else None
            )
            out += f"[{name}]" if isinstance(name, str) else f"[{step}]"
        else:
            s = str(step)
            out += ("." if out else "") + (f'"{s}"' if "." in s else s)
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            node = None
    return out


def _mark_for(marks: dict[tuple, Mark], path: tuple) -> Mark | None:
    for n in range(len(path), -1, -1):
        if path[:n] in marks:
            return marks[path[:n]]
    return None


_PRIORITY = {"extra_forbidden": 0, "missing": 2}


def _validation_to_config_error(
    err: ValidationError, raw: dict, marks: dict, src: str, key_prefix: str = ""
) -> ConfigError:
    errors = err.errors(include_url=False)
    located = []
    for e in errors:
        model, path = _model_and_path(tuple(e["loc"]))
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, RuleError) and cause.path is not None:
            path = cause.path
        located.append((e, model, path, cause))
    # An unknown key explains a "missing" one (a misspelt section), so it goes first.
    # defaults are merged into the features: an error in a default is reported at the default
    e, model, path, cause = min(
        located, key=lambda x: (_PRIORITY.get(x[0]["type"], 1), 0 if x[2][:1] == ("defaults",) else 1)
    )
    key = _display(raw, path) or "(top level)"
    if key_prefix:
        key = f"{key_prefix} -> {key}"
    mark = _mark_for(marks, path)
    source = f"{src}:{mark[0]}:{mark[1]}" if mark else src
    typ, msg, got = e["type"], e["msg"], e.get("input")
    fix = None
    if typ == "extra_forbidden":
        allowed = sorted(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
        bad = str(path[-1]) if path else "?"
        close = difflib.get_close_matches(bad, allowed, n=1, cutoff=0.6)
        message = f"unknown key {bad!r}"
        fix = f"did you mean {close[0]!r}?" if close else f"remove it (allowed keys: {', '.join(allowed)})"
    elif typ == "union_tag_not_found":
        tag = str((e.get("ctx") or {}).get("discriminator", "type")).strip("'")
        message = f"'{tag}' is missing"
        fix = f"add '{tag}:'" + (" (uniform, loguniform, randint, choice, grid_search, ...)" if tag == "space" else "")
    elif typ == "missing":
        message = "required key is missing"
        fix = f"add '{path[-1]}:'" if path else None
        if path == ("dataset",):
            fix = "add 'dataset: {source: data.csv}' or pass --dataset data.csv"
    else:
        same = [x[0]["msg"] for x in located if x[2] == path and x[0]["type"] not in ("extra_forbidden", "missing")]
        if len(same) > 1:  # a union of plain types: say every accepted form
            message = "should be " + " or ".join(m.removeprefix("Input should be ") for m in same)
        else:
            message = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if typ not in ("value_error", "assertion_error") and got is not None and not isinstance(got, (dict, list)):
            message += f", got {got!r}"
        if typ.startswith("union_tag") or typ.startswith("literal"):
            fix = "use one of the values listed"
        if isinstance(cause, RuleError) and cause.fix:
            fix = cause.fix
    return ConfigError(message, source=source, key=key, fix=fix)


# ---------------------------------------------------------------------------- search space checks
#: Paths a trial may not change: the data is prepared once per sweep from the base config,
#: and the scheduler's budget is fixed by trainer.epochs.
_FIXED = {
    "preprocessing": "preprocessing is fitted once per sweep, before any trial",
    "column": "the data is prepared once per sweep",
    "type": "the data is prepared once per sweep",
    "name": "feature names identify the prepared data",
    "epochs": "it sets the scheduler's max_t",
}


def _fixed_reason(path: str) -> str | None:
    parts = path.split(".")
    if parts[0] == "trainer":
        return _FIXED["epochs"] if parts[1:] == ["epochs"] else None
    if parts[0] == "defaults":
        return _FIXED["preprocessing"] if parts[2:3] == ["preprocessing"] else None
    if parts[0] == "combiner" or len(parts) < 2:
        return None
    return _FIXED.get(parts[1])


def _leaf_paths(block: Any, prefix: str = "") -> list[str]:
    if isinstance(block, dict) and block:
        return [p for k, v in block.items() for p in _leaf_paths(v, f"{prefix}.{k}" if prefix else str(k))]
    return [prefix]


def _param_key(path: str) -> str:
    return f'hyperopt.parameters."{path}"' if "." in path else f"hyperopt.parameters.{path}"


def _first_error(raw: dict, params: dict[str, Any], src: str) -> ConfigError | None:
    try:
        SweepConfig.model_validate(apply_params(raw, params))
    except ValidationError as e:
        return _validation_to_config_error(e, raw, {}, src)
    return None


def _enablers(path: str, spaces: dict[str, Any]) -> list[tuple[str, Any]]:
    """Values of other listed parameters that may make ``path`` exist (an encoder ``type``
    choice next to it, or a ``"."`` block), to try when ``path`` is unknown on its own."""
    parent = path.rsplit(".", 1)[0]
    out = []
    for other, s in spaces.items():
        if other != path and isinstance(s, LISTED_SPACES) and (other == ROOT or other == f"{parent}.type"):
            out.extend((other, v) for v in s.probe_values())
    return out


def _check_parameters(cfg: SweepConfig, raw: dict, marks: dict, src: str) -> None:
    spaces = cfg.hyperopt.parameters
    for path, space in spaces.items():
        key = _param_key(path)
        mark = _mark_for(marks, ("hyperopt", "parameters", path))
        source = f"{src}:{mark[0]}:{mark[1]}" if mark else src
        leaves = [p for block in space.probe_values() for p in _leaf_paths(block)] if path == ROOT else [path]
        for leaf in leaves:
            reason = _fixed_reason(leaf)
            if reason:
                raise ConfigError(
                    f"{leaf!r} cannot be searched: {reason}",
                    source=source,
                    key=key,
                    fix="set it in the config instead of hyperopt.parameters",
                )
        for value in space.probe_values():
            try:
                inner = _first_error(raw, {path: value}, src)
                if inner is not None and inner.message.startswith("unknown key"):
                    # a field that exists only under another sampled value (e.g. an encoder type)
                    if any(
                        _first_error(raw, {other: v, path: value}, src) is None for other, v in _enablers(path, spaces)
                    ):
                        inner = None
            except PathError as e:
                raise ConfigError(str(e), source=source, key=key, fix=e.fix) from None
            if inner is None:
                continue
            if inner.message.startswith("unknown key") and not isinstance(value, dict):
                raise ConfigError(
                    f"{path!r} is not a field of the config: {inner.key}: {inner.message}",
                    source=source,
                    key=key,
                    fix=inner.fix,
                ) from None
            if path.startswith(f"{inner.key}.") and "valid" in inner.message:
                raise ConfigError(
                    f"path {path!r} walks into {inner.key!r}, which is a value, not a section",
                    source=source,
                    key=key,
                    fix="end the path at a field",
                ) from None
            shown = json.dumps(value, default=str) if isinstance(value, (dict, list)) else repr(value)
            fix = (
                "use an integer space (randint, qrandint, lograndint) for an integer field"
                if not isinstance(space, (*INT_SPACES, *LISTED_SPACES)) and "integer" in inner.message
                else inner.fix or "change the range or categories"
            )
            raise ConfigError(
                f"value {shown} is invalid for {inner.key}: {inner.message}", source=source, key=key, fix=fix
            ) from None


# ---------------------------------------------------------------------------- Ludwig configs
def _name_from_file(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-.") or "sweep"
    return name.replace("..", ".")


# ---------------------------------------------------------------------------- public
def load_sweep(path: str | Path, dataset: str | Path | None = None) -> LoadedSweep:
    """Read and validate a sweep file (or a Ludwig config). Runs in the driver; touches
    nothing but the file.

    Args:
        path: the sweep YAML file.
        dataset: a CSV / Parquet path (relative to the current folder) that replaces
            ``dataset.source`` (``hpo sweep CONFIG --dataset data.csv``, Ludwig's way). A
            file without ``name`` is named after the file's stem.

    Raises:
        ConfigError: unreadable file, invalid YAML, unknown key, bad value, or a parameter
            path / range that does not fit the config. ``str(error)`` is one line.
    """
    path = Path(path)
    text, raw, marks = _read(path)
    src = str(path)
    if "name" not in raw:
        raw = {"name": _name_from_file(path), **raw}
    if dataset is not None:
        ds = raw.get("dataset") if isinstance(raw.get("dataset"), dict) else {}
        raw = {**raw, "dataset": {**ds, "source": str(Path(dataset).resolve())}}
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        raise _validation_to_config_error(e, raw, marks, src) from None
    _check_parameters(cfg, raw, marks, src)
    return LoadedSweep(config=cfg, raw=raw, path=path, text=text)


def resolve_trial_config(raw: dict, params: dict[str, Any]) -> SweepConfig:
    """The config of one trial: ``raw`` with the sampled ``{dotted path: value}`` applied.

    A sampled field that exists only under another sampled value (``encoder.num_layers``
    when the sampled encoder ``type`` has no layers) is left out, as Ludwig does.

    Runs wherever a trial starts (driver or worker); pure.

    Raises:
        ConfigError: a sampled value does not validate (cannot happen for spaces that
            :func:`load_sweep` accepted, except for interactions between parameters).
    """
    try:
        return SweepConfig.model_validate(apply_params(raw, params))
    except PathError as e:
        raise ConfigError(str(e), key="hyperopt.parameters", fix=e.fix) from None
    except ValidationError as e:
        if not all(x["type"] == "extra_forbidden" for x in e.errors()):
            raise _validation_to_config_error(e, raw, {}, "trial config", key_prefix=f"params {params}") from None
        for path in params:
            if path == ROOT:
                continue
            rest = {k: v for k, v in params.items() if k != path}
            try:
                return SweepConfig.model_validate(apply_params(raw, rest))
            except (ValidationError, PathError):
                continue
        raise _validation_to_config_error(e, raw, {}, "trial config", key_prefix=f"params {params}") from None
