"""Sweep file -> validated :class:`SweepConfig` (the file read by :mod:`ludwig_hpo.config.reader`),
the search space checked against the config, and each trial's config resolved from its
sampled parameters.

Errors name ``file:line:column``, the key path, what is wrong and the fix, and are raised
as :class:`~ludwig_hpo.errors.ConfigError` before anything (Ray, MLflow, folders) starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ludwig_hpo.config.explain import BOUND_FIX, to_config_error
from ludwig_hpo.config.paths import ROOT, PathError, RawMapping, apply_params, feature_names, split_path
from ludwig_hpo.config.reader import Marks, mark_for, read_sweep_file
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.config.spaces import INT_SPACES, LISTED_SPACES, ParamSpace
from ludwig_hpo.config.text import retokenized_feature
from ludwig_hpo.config.upgrade import upgrade_located
from ludwig_hpo.errors import ConfigError


@dataclass(frozen=True)
class LoadedSweep:
    """A validated sweep file.

    Attributes:
        config: the typed config.
        raw: the file's mapping as parsed (parameters not applied; the name, ``--dataset``
            and a train-only search filled in); trials apply their sampled values to it
            with :func:`resolve_trial_config`.
        path: the sweep file.
        text: the file's text (hashed and logged as an artifact).
    """

    config: SweepConfig
    raw: RawMapping
    path: Path
    text: str
    #: one line per legacy Ludwig spelling upgraded (:mod:`ludwig_hpo.config.upgrade`), to print once
    warnings: tuple[str, ...] = ()
    #: the file has a ``hyperopt`` section; False: a model config for ``hpo train`` alone,
    #: whose ``raw`` holds :func:`train_only_search` in its place
    searched: bool = True

    @property
    def base_dir(self) -> Path:
        """The sweep file's folder; relative dataset paths are resolved against it."""
        return self.path.resolve().parent


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


def _fixed_reason(path: str, features: list[str]) -> str | None:
    parts = split_path(path, features)
    if parts[0] == "trainer":
        return _FIXED["epochs"] if parts[1:] == ["epochs"] else None
    if parts[0] == "defaults":
        return _FIXED["preprocessing"] if parts[2:3] == ["preprocessing"] else None
    if parts[0] == "preprocessing" and "preprocessing" not in features:
        return _FIXED["preprocessing"]  # Ludwig's top-level preprocessing: the split and sampling
    if (parts[0] in ("adapter", "generation") and parts[0] not in features) or parts[0] == "combiner" or len(parts) < 2:
        return None  # the model's own sections: every trial builds its model anew
    return _FIXED.get(parts[1])


def _leaf_paths(block: Any, prefix: str = "") -> list[str]:
    if isinstance(block, dict) and block:
        return [p for k, v in block.items() for p in _leaf_paths(v, f"{prefix}.{k}" if prefix else str(k))]
    return [prefix]


def _param_key(path: str) -> str:
    return f'hyperopt.parameters."{path}"' if "." in path else f"hyperopt.parameters.{path}"


def _first_error(raw: RawMapping, params: Mapping[str, Any], src: str) -> ConfigError | None:
    try:
        SweepConfig.model_validate(apply_params(raw, params))
    except ValidationError as e:
        return to_config_error(e, raw, {}, src)
    return None


def _enablers(path: str, spaces: Mapping[str, ParamSpace]) -> list[tuple[str, Any]]:
    """Values of other listed parameters that may make ``path`` exist (an encoder ``type``
    choice next to it, or a ``"."`` block), to try when ``path`` is unknown on its own."""
    parent = path.rsplit(".", 1)[0]
    out: list[tuple[str, Any]] = []
    for other, s in spaces.items():
        if other != path and isinstance(s, LISTED_SPACES) and (other == ROOT or other == f"{parent}.type"):
            out.extend((other, v) for v in s.probe_values())
    return out


@dataclass(frozen=True)
class _Param:
    """One searched parameter being checked, and where its errors point."""

    path: str
    space: ParamSpace
    source: str  # ``file:line:column`` of its key
    key: str  # its key path as shown
    features: list[str]  # the sweep's feature names (a parameter path may start with one)

    def error(self, message: str, fix: str | None) -> ConfigError:
        return ConfigError(message, source=self.source, key=self.key, fix=fix)


def _check_searchable(p: _Param) -> None:
    leaves = [leaf for block in p.space.probe_values() for leaf in _leaf_paths(block)] if p.path == ROOT else [p.path]
    for leaf in leaves:
        try:
            reason = _fixed_reason(leaf, p.features)
        except PathError as e:
            raise p.error(str(e), fix=e.fix) from None
        if reason:
            raise p.error(
                f"{leaf!r} cannot be searched: {reason}", fix="set it in the config instead of hyperopt.parameters"
            )


def _value_error(
    p: _Param, value: Any, raw: RawMapping, spaces: Mapping[str, ParamSpace], src: str
) -> ConfigError | None:
    """Why the config with ``value`` at ``p.path`` does not validate, or None when it does, or
    when it does once another listed parameter takes one of its values (a field that exists
    only under another sampled encoder type)."""
    try:
        inner = _first_error(raw, {p.path: value}, src)
        if inner is not None and inner.message.startswith("unknown key"):
            if any(_first_error(raw, {other: v, p.path: value}, src) is None for other, v in _enablers(p.path, spaces)):
                return None
    except PathError as e:
        raise p.error(str(e), fix=e.fix) from None
    return inner


def _explain(p: _Param, value: Any, inner: ConfigError) -> ConfigError:
    """The error of a probed value, phrased for the parameter."""
    if inner.message.startswith("unknown key") and not isinstance(value, dict):
        if p.path.endswith(".type") and inner.key and inner.key.startswith(p.path.removesuffix("type")):
            # a written field of the section the sampled type lacks (not the parameter's own path)
            return p.error(
                f"value {value!r} is a type without the config's {inner.key}",
                fix=f"search {inner.key} in hyperopt.parameters instead of writing it (a sampled field "
                f"a sampled type lacks is left out), or remove {value!r} from the categories",
            )
        return p.error(f"{p.path!r} is not a field of the config: {inner.key}: {inner.message}", fix=inner.fix)
    if p.path.startswith(f"{inner.key}.") and "valid" in inner.message:
        return p.error(
            f"path {p.path!r} walks into {inner.key!r}, which is a value, not a section", fix="end the path at a field"
        )
    shown = json.dumps(value, default=str) if isinstance(value, (dict, list)) else repr(value)
    fix = (
        "use an integer space (randint, qrandint, lograndint) for an integer field"
        if not isinstance(p.space, (*INT_SPACES, *LISTED_SPACES)) and "integer" in inner.message
        else inner.fix
        if inner.fix and not inner.fix.startswith(BOUND_FIX)  # a field's own range: the space's ends move
        else "change the range or categories"
    )
    return p.error(f"value {shown} is invalid for {inner.key}: {inner.message}", fix=fix)


def _check_parameters(cfg: SweepConfig, raw: RawMapping, marks: Marks, src: str) -> None:
    """Every searched parameter may be searched, and both ends and an inner value of its
    space (each category) give a valid config.

    Raises:
        ConfigError: at the parameter's key, naming the first value that does not fit.
    """
    spaces = cfg.hyperopt.parameters
    for path, space in spaces.items():
        mark = mark_for(marks, ("hyperopt", "parameters", path))
        p = _Param(path, space, f"{src}:{mark[0]}:{mark[1]}" if mark else src, _param_key(path), feature_names(raw))
        _check_searchable(p)
        _refuse_searching_no_adapter(p, cfg, spaces)
        for value in space.probe_values():
            inner = _value_error(p, value, raw, spaces, src)
            if inner is not None:
                raise _explain(p, value, inner)
            _refuse_retokenizing(p, value, cfg, raw)


def _refuse_searching_no_adapter(p: _Param, cfg: SweepConfig, spaces: Mapping[str, ParamSpace]) -> None:
    """An adapter field searched in an llm config without an adapter is refused at the
    parameter: setting it would create a LoRA adapter in every trial (a mapping without
    ``type`` is LoRA), so no trial would run the full fine-tuning the config describes.
    Searching ``adapter.type`` (or a ``"."`` block) says the trials' adapter explicitly."""
    if not cfg.is_llm or cfg.adapter is not None or not p.path.startswith("adapter."):
        return
    if p.path == "adapter.type" or "adapter.type" in spaces or ROOT in spaces:
        return
    raise p.error(
        f"{p.path!r} searches a field of the adapter, but the config has none (adapter null or left out: "
        "every weight trains), so every trial would train a LoRA adapter instead",
        fix="write the adapter in the config, e.g. adapter: {type: lora}, or remove the parameter",
    )


def _refuse_retokenizing(p: _Param, value: Any, cfg: SweepConfig, raw: RawMapping) -> None:
    """A value that would make a text feature read another tokenizer's ids than the ids it is
    prepared with (once per sweep, from the base config) is refused at the parameter."""
    try:
        trial = SweepConfig.model_validate(apply_params(raw, {p.path: value}))
    except (ValidationError, PathError):
        return  # valid only with another parameter's value: checked by _value_error
    name = retokenized_feature(cfg, trial)
    if name is not None:
        raise p.error(
            f"value {value!r} changes the tokenizer of text feature {name!r}, whose text is tokenised "
            "once per sweep with the config's own encoder's tokenizer",
            fix="run one sweep per model, each with its model in the encoder section",
        )


# ---------------------------------------------------------------------------- Ludwig configs
def _name_from_file(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-.") or "sweep"
    return name.replace("..", ".")


#: What a sweep file without ``hyperopt`` is told to add (one line).
SEARCH_EXAMPLE = "hyperopt: {parameters: {trainer.learning_rate: {space: loguniform, lower: 0.0001, upper: 0.1}}}"


def train_only_search(raw: RawMapping) -> dict[str, Any]:
    """The ``hyperopt`` section standing in for a missing one in a model config (a Ludwig
    config trained by ``hpo train``): one point, the configured ``trainer.learning_rate``,
    scored as Ludwig's trainer selects its best epoch (``trainer.validation_field`` /
    ``validation_metric`` when written, else the combined validation loss). Pure."""
    from ludwig_hpo.config.metrics import METRICS
    from ludwig_hpo.config.trainer import TrainerConfig

    written = raw.get("trainer")
    trainer: dict[str, Any] = written if isinstance(written, dict) else {}
    lr = trainer.get("learning_rate", TrainerConfig.model_fields["learning_rate"].default)
    search: dict[str, Any] = {
        "parameters": {"trainer.learning_rate": {"space": "choice", "categories": [lr]}},
        "executor": {"num_samples": 1},
    }
    field, metric = trainer.get("validation_field"), trainer.get("validation_metric")
    outputs = {f.get("name"): f.get("type") for f in raw.get("output_features") or [] if isinstance(f, dict)}
    kind = "combined" if field in (None, "combined") else outputs.get(field)
    if isinstance(metric, str) and isinstance(kind, str) and metric in METRICS.get(kind, {}):
        better = "maximize" if METRICS[kind][metric] else "minimize"
        search.update(output_feature=field or "combined", metric=metric, goal=better)
    return search


def fill_goal(raw: RawMapping) -> tuple[dict[str, Any], str | None]:
    """``raw`` with ``hyperopt.goal`` filled in when the file leaves it out and the metric is
    better when larger (Ludwig's default goal, minimize, would search for the worst model),
    and the warning line saying so; ``(raw, None)`` when the goal is written, the metric is
    better when smaller, or the metric / output feature is unknown (validation names those).
    Pure; runs in the driver."""
    from ludwig_hpo.config.metrics import METRICS

    hp = raw.get("hyperopt")
    if not isinstance(hp, dict) or "goal" in hp:
        return dict(raw), None
    metric, feature = hp.get("metric", "loss"), hp.get("output_feature")
    if isinstance(metric, list):  # Ludwig's list form: the first item is the primary metric
        first = metric[0] if metric else None
        if isinstance(first, dict):
            if first.get("goal") is not None:
                return dict(raw), None
            feature = feature or first.get("output_feature")
            first = first.get("metric", first.get("name"))
        metric = first
    feature = feature or "combined"
    outputs = {f.get("name"): f.get("type") for f in raw.get("output_features") or [] if isinstance(f, dict)}
    kind = "combined" if feature == "combined" else outputs.get(feature)
    if not (isinstance(metric, str) and isinstance(kind, str) and METRICS.get(kind, {}).get(metric)):
        return dict(raw), None
    warning = (
        f"hyperopt.goal is not set: {metric} is better when larger, so the sweep maximizes it "
        "(Ludwig would minimize); set goal explicitly to silence this"
    )
    return {**raw, "hyperopt": {**hp, "goal": "maximize"}}, warning


# ---------------------------------------------------------------------------- public
def load_sweep(path: str | Path, dataset: str | Path | None = None, *, search: bool = True) -> LoadedSweep:
    """Read and validate a sweep file (or a Ludwig config). Runs in the driver; touches
    nothing but the file.

    Args:
        path: the sweep YAML file.
        dataset: a CSV / Parquet path (relative to the current folder) that replaces
            ``dataset.source`` (``hpo sweep CONFIG --dataset data.csv``, Ludwig's way). A
            file without ``name`` is named after the file's stem.
        search: the file must have a ``hyperopt`` section (``hpo sweep``); False: a file
            without one is a model config trained once (``hpo train``, ``hpo validate``),
            validated with :func:`train_only_search` in its place (``searched`` False).

    Raises:
        ConfigError: unreadable file, invalid YAML, no ``hyperopt`` section when ``search``,
            unknown key, bad value, or a parameter path / range that does not fit the
            config. ``str(error)`` is one line.
    """
    path = Path(path)
    parsed = read_sweep_file(path)
    text, raw, marks = parsed.text, parsed.raw, parsed.marks
    src = str(path)
    raw, warnings, marks = upgrade_located(raw, marks, src)
    if "name" not in raw:
        raw = {"name": _name_from_file(path), **raw}
    if dataset is not None:
        ds = raw.get("dataset")
        raw = {**raw, "dataset": {**(ds if isinstance(ds, dict) else {}), "source": str(Path(dataset).resolve())}}
    searched = raw.get("hyperopt") is not None
    raw, goal_warning = fill_goal(raw)
    if goal_warning is not None:
        warnings = [*warnings, goal_warning]
    if not searched:  # the model is checked first: its errors are the real ones
        raw = {**raw, "hyperopt": train_only_search(raw)}
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        raise to_config_error(e, raw, marks, src) from None
    if search and not searched:
        raise ConfigError(
            "a sweep needs a hyperopt section (the parameters it searches); this file has none",
            source=src,
            key="hyperopt",
            fix=f"add e.g. '{SEARCH_EXAMPLE}', or train this config once with 'hpo train {path}'",
        )
    _check_parameters(cfg, raw, marks, src)
    return LoadedSweep(config=cfg, raw=raw, path=path, text=text, warnings=tuple(warnings), searched=searched)


def resolve_trial_config(raw: RawMapping, params: Mapping[str, Any]) -> SweepConfig:
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
            raise to_config_error(e, raw, {}, "trial config", key_prefix=f"params {params}") from None
        unknown = {str(x["loc"][-1]) for x in e.errors() if x["loc"]}
        # the field the chosen type lacks goes, never the type that chose it
        for path in sorted(params, key=lambda p: p.rsplit(".", 1)[-1] not in unknown):
            if path == ROOT:
                continue
            rest = {k: v for k, v in params.items() if k != path}
            try:
                return SweepConfig.model_validate(apply_params(raw, rest))
            except (ValidationError, PathError):
                continue
        raise to_config_error(e, raw, {}, "trial config", key_prefix=f"params {params}") from None
