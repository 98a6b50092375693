"""Pydantic's validation errors of a sweep file as one located line: the error that explains
the others is picked, its pydantic location is mapped back to the raw key path (union tags
dropped, list items named by their feature name) and to the file's line and column, and the
fix is said. Pure; runs wherever a config is validated (driver or trial).
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ludwig_hpo.config.base import KeyPath, RuleError
from ludwig_hpo.config.paths import RawMapping
from ludwig_hpo.config.reader import Marks, mark_for
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.errors import ConfigError

#: Order in which errors explain each other (lower first): an unknown key explains a
#: "missing" one (a misspelt section).
_PRIORITY = {"extra_forbidden": 0, "missing": 2}
_UNIONS = (typing.Union, types.UnionType)


class _Located(NamedTuple):
    error: ErrorDetails
    model: Any  # the pydantic model holding the key, or a plain type
    path: KeyPath
    cause: RuleError | None


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _step_type(tp: Any, step: str | int) -> tuple[Any, bool]:
    """Type reached from ``tp`` by one loc step; second item True if the step was a union tag."""
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if origin in _UNIONS:
        members = [_unwrap(a) for a in typing.get_args(tp) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        for m in models:
            for tag_field in ("type", "space"):
                f = m.model_fields.get(tag_field)
                if f is not None and step in typing.get_args(_unwrap(f.annotation)):
                    return m, True
        if len(members) == 1:  # ``Model | None``, ``list[Model] | None``
            return _step_type(members[0], step)
        return tp, True  # pydantic's label of a plain union member ("int", "literal['auto']")
    if origin in (list, tuple):  # ``tuple[Model, ...]``: every item the first argument's type
        return typing.get_args(tp)[0], False
    if origin is dict:
        return typing.get_args(tp)[1], False
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(step, str):
        f = tp.model_fields.get(step)
        return (f.annotation if f else None), False
    return None, False


def _optional_model(tp: Any) -> Any:
    """``Model`` for ``Model | None``, else ``tp``."""
    tp = _unwrap(tp)
    if typing.get_origin(tp) in _UNIONS:
        members = [_unwrap(a) for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return tp


def _model_and_path(loc: tuple[str | int, ...]) -> tuple[Any, KeyPath]:
    """Follow a pydantic error loc through the schema; return (model at the end, raw key path)."""
    tp: Any = SweepConfig
    raw_path: list[str | int] = []
    parent: Any = SweepConfig
    for step in loc:
        nxt, was_tag = _step_type(tp, step)
        if was_tag:
            tp = nxt
            continue
        parent = _optional_model(tp)
        raw_path.append(step)
        tp = nxt
    return _unwrap(parent), tuple(raw_path)


def display_key(raw: RawMapping, path: KeyPath) -> str:
    """``path`` as the user reads it: ``input_features[image].encoder.num_layers`` (a list item
    by its ``name``), a key holding a dot quoted (``hyperopt.parameters."trainer.lr"``)."""
    out = ""
    node: Any = raw
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


def _locate(e: ErrorDetails) -> _Located:
    model, path = _model_and_path(tuple(e["loc"]))
    cause = (e.get("ctx") or {}).get("error")
    if not isinstance(cause, RuleError):
        return _Located(e, model, path, None)
    return _Located(e, model, cause.path if cause.path is not None else path, cause)


#: Said of what a Ludwig config may hold but this platform does not train yet (a model type,
#: a feature type, a key): the error that explains the others (an LLM config's unknown keys).
UNSUPPORTED = "not supported yet"


#: Ludwig's registered types per tagged section (its schema registries), to tell a Ludwig type
#: this platform lacks ("not supported yet") from a typo ("unknown type").
_LUDWIG_TYPES: dict[str, tuple[str, ...]] = {
    "optimizer": tuple(
        "sgd sgd_8bit lbfgs adam adam_8bit paged_adam paged_adam_8bit adamw adamw_8bit paged_adamw "
        "paged_adamw_8bit adadelta adagrad adagrad_8bit adamax ftrl nadam radam rmsprop rmsprop_8bit lamb "
        "lamb_8bit paged_lamb paged_lamb_8bit lars lars_8bit lion lion_8bit paged_lion paged_lion_8bit "
        "adafactor schedule_free_adamw muon soap".split()
    ),
    "combiner": tuple(
        "concat sequence_concat sequence tabnet comparator transformer tabtransformer project_aggregate "
        "hypernetwork cross_attention dot_product ft_transformer gated_fusion perceiver tabpfn_v2".split()
    ),
    "decoder": tuple("regressor classifier projector tagger generator mlp_classifier".split()),
    "loss": tuple(
        "mean_squared_error mean_absolute_error mean_absolute_percentage_error root_mean_squared_error "
        "root_mean_squared_percentage_error huber softmax_cross_entropy sequence_softmax_cross_entropy "
        "next_token_softmax_cross_entropy sigmoid_cross_entropy binary_weighted_cross_entropy corn focal "
        "deep_svdd drocc dice".split()
    ),
    "feature": tuple(
        "binary number category set bag vector sequence text timeseries image audio date h3 anomaly".split()
    ),
    "space": tuple(
        "uniform quniform loguniform qloguniform randn qrandn randint qrandint lograndint qlograndint choice "
        "grid_search int".split()
    ),
}


#: Keys of old Ludwig releases that current Ludwig refuses too, with what replaced them:
#: (message, fix) of their unknown-key line, where a close match would mislead.
_RETIRED_KEYS: dict[str, tuple[str, str]] = {
    "bn_virtual_divider": (
        "bn_virtual_divider is an old Ludwig tabnet key (batch size / divider); current Ludwig has no such key",
        "remove it, or set bn_virtual_bs: the virtual batch size in rows",
    ),
    "use_keras_batch_norm": (
        "use_keras_batch_norm is an old Ludwig (TensorFlow) tabnet key; current Ludwig has no such key",
        "remove it",
    ),
    "weight_regularization": (
        "weight_regularization is Ludwig 0.4's per-layer regularizer; current Ludwig regularizes in the trainer",
        "remove it and set trainer.regularization_type (l1, l2, l1_l2) and trainer.regularization_lambda",
    ),
}


def _tag_section(path: KeyPath, tag: str) -> str:
    """Which table of :data:`_LUDWIG_TYPES` a tagged section at ``path`` looks in."""
    if tag == "space":
        return "space"
    if path and isinstance(path[-1], int):
        return "feature"
    names = [s for s in path if isinstance(s, str)]
    return names[-1] if names else ""


def _invalid_tag(path: KeyPath, ctx: dict[str, Any]) -> tuple[str, str]:
    """(message, fix) of a tagged section whose tag names no model: a Ludwig type not supported
    yet, or a typo with the closest accepted types."""
    tag = str(ctx.get("discriminator", "type")).strip("'")
    value = str(ctx.get("tag", "?"))
    supported = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip()]
    if value in _LUDWIG_TYPES.get(_tag_section(path, tag), ()):
        return f"{value} is not supported yet", f"use one of the supported {tag}s: {', '.join(supported)}"
    close = difflib.get_close_matches(value, supported, n=3, cutoff=0.5)
    if close:
        return f"unknown {tag} {value!r}", f"did you mean {' or '.join(repr(c) for c in close)}?"
    return f"unknown {tag} {value!r}", f"use one of {', '.join(supported)}"


def _rank(x: _Located) -> tuple[int, int]:
    """Which error explains the others (lowest first): something not supported yet, then an
    unknown key, then other errors, then a missing key; a default's error before the
    feature's it was merged into."""
    unsupported = x.cause is not None and UNSUPPORTED in str(x.cause)
    return (-1 if unsupported else _PRIORITY.get(x.error["type"], 1), 0 if x.path[:1] == ("defaults",) else 1)


#: How the fix of a number out of its field's range starts.
BOUND_FIX = "set it "

#: pydantic's error type of a number bound -> (its ctx key, the fix's words before the limit).
_BOUNDS = {
    "greater_than_equal": ("ge", "to at least"),
    "greater_than": ("gt", "above"),
    "less_than_equal": ("le", "to at most"),
    "less_than": ("lt", "below"),
}


def _message_and_fix(chosen: _Located, located: list[_Located]) -> tuple[str, str | None]:
    e, model, path, cause = chosen
    typ, msg, got = e["type"], e["msg"], e.get("input")
    if typ == "extra_forbidden" and path and path[-1] in _RETIRED_KEYS:
        return _RETIRED_KEYS[str(path[-1])]
    if typ == "extra_forbidden":
        allowed = sorted(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
        bad = str(path[-1]) if path else "?"
        close = difflib.get_close_matches(bad, allowed, n=1, cutoff=0.6)
        return f"unknown key {bad!r}", (
            f"did you mean {close[0]!r}?" if close else f"remove it (allowed keys: {', '.join(allowed)})"
        )
    if typ == "union_tag_invalid":
        return _invalid_tag(path, dict(e.get("ctx") or {}))
    if typ == "union_tag_not_found":
        tag = str((e.get("ctx") or {}).get("discriminator", "type")).strip("'")
        listed = " (uniform, loguniform, randint, choice, grid_search, ...)" if tag == "space" else ""
        return f"'{tag}' is missing", f"add '{tag}:'{listed}"
    if typ == "missing":
        if path == ("dataset",):
            return "required key is missing", "add 'dataset: {source: data.csv}' or pass --dataset data.csv"
        return "required key is missing", f"add '{path[-1]}:'" if path else None
    same = [x.error["msg"] for x in located if x.path == path and x.error["type"] not in ("extra_forbidden", "missing")]
    if len(same) > 1:  # a union of plain types: say every accepted form
        message = "should be " + " or ".join(m.removeprefix("Input should be ") for m in same)
    else:
        message = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if typ not in ("value_error", "assertion_error") and got is not None and not isinstance(got, (dict, list)):
        message += f", got {got!r}"
    fix = "use one of the values listed" if typ.startswith("union_tag") or typ.startswith("literal") else None
    bound = _BOUNDS.get(typ)
    if bound is not None and bound[0] in (e.get("ctx") or {}):  # a number out of its range: say the range
        fix = f"{BOUND_FIX}{bound[1]} {e['ctx'][bound[0]]}"
    if cause is not None and cause.fix:
        fix = cause.fix
    return message, fix


def to_config_error(err: ValidationError, raw: RawMapping, marks: Marks, src: str, key_prefix: str = "") -> ConfigError:
    """The one-line :class:`ConfigError` of a failed :class:`SweepConfig` validation.

    Args:
        err: what ``SweepConfig.model_validate(raw)`` raised (or a validation of ``raw`` with
            parameters applied).
        raw: the raw mapping, to name list items by their feature name.
        marks: the file's marks (empty when there is no file, e.g. a trial's config).
        src: the file (or what stands for it) in the error's source.
        key_prefix: put before the key, e.g. the trial's parameters.
    """
    located = [_locate(e) for e in err.errors(include_url=False)]
    # defaults are merged into the features: an error in a default is reported at the default
    chosen = min(located, key=_rank)
    path = chosen.path
    if chosen.error["type"] == "union_tag_invalid":  # the tag's own key, not its section
        path += (str((chosen.error.get("ctx") or {}).get("discriminator", "type")).strip("'"),)
    key = display_key(raw, path) or "(top level)"
    if key_prefix:
        key = f"{key_prefix} -> {key}"
    mark = mark_for(marks, path)
    source = f"{src}:{mark[0]}:{mark[1]}" if mark else src
    message, fix = _message_and_fix(chosen, located)
    return ConfigError(message, source=source, key=key, fix=fix)
