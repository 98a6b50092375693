"""Command-line overrides of a sweep file (``--set trainer.learning_rate=0.01``,
``--num-workers 4``, ``--from-sweep DIR``): applied to the raw mapping, then validated
again, so a bad path or value is the same one-line error as in the file. Driver only.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.errors import ConfigError, DataError


def parse_set(item: str) -> tuple[str, Any]:
    """``"a.b=value"`` -> ``("a.b", value)``; the value is read as YAML (``0.01``, ``true``,
    ``[16, 32]``, ``adamw``).

    Raises:
        ConfigError: no ``=``, an empty path, or a value that is not YAML.
    """
    path, eq, text = item.partition("=")
    path = path.strip()
    if not eq or not path:
        raise ConfigError(
            f"--set {item!r} must be PATH=VALUE", key="--set", fix="write e.g. --set trainer.learning_rate=0.01"
        )
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as e:
        raise ConfigError(
            f"--set {item!r}: the value is not YAML ({type(e).__name__})",
            key="--set",
            fix="quote the value, e.g. --set 'trainer.optimizer={type: sgd}'",
        ) from None
    return path, value


def _set(raw: dict, path: str) -> tuple[dict, str]:
    parts = path.split(".")
    if any(not p for p in parts):
        raise ConfigError(
            f"--set path {path!r} has an empty part", key="--set", fix="write dotted keys, e.g. trainer.learning_rate"
        )
    features = {
        f.get("name"): f for s in ("input_features", "output_features") for f in raw.get(s) or [] if isinstance(f, dict)
    }
    if parts[0] in features and len(parts) > 1:
        node, rest = features[parts[0]], parts[1:]
    else:
        node, rest = raw, parts
    for i, part in enumerate(rest[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(
                f"--set path {path!r} walks into {'.'.join(parts[: i + 1 + len(parts) - len(rest)])!r}, "
                f"which is a value, not a section",
                key="--set",
                fix="set the value itself",
            )
        node = child
    return node, rest[-1]


def with_overrides(loaded: LoadedSweep, sets: Sequence[tuple[str, Any]], *, source: str = "--set") -> LoadedSweep:
    """``loaded`` with each ``(dotted path, value)`` set, validated again.

    Paths start with a section (``trainer``, ``backend``, ``combiner``...) or a feature
    name (``image.encoder.dropout``).

    Raises:
        ConfigError: a path the schema does not know, or a value it rejects, naming the path
            and what is allowed.
    """
    if not sets:
        return loaded
    raw = copy.deepcopy(loaded.raw)
    for path, value in sets:
        node, key = _set(raw, path)
        node[key] = copy.deepcopy(value)
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
        given = ", ".join(f"{p}={v!r}" for p, v in sets)
        raise ConfigError(
            f"{where}: {err['msg']} (after {source} {given})",
            source=str(loaded.path),
            key=source,
            fix="use a key and value the sweep file accepts (see README: sweep file reference)",
        ) from None
    return dataclasses.replace(loaded, config=cfg, raw=raw)


def best_config_of(sweep_dir: Path, loaded: LoadedSweep) -> LoadedSweep:
    """``loaded`` with the best trial's configuration of a finished sweep (its
    ``best_model/config.yaml``) in place of the file's base configuration.

    Raises:
        DataError: ``sweep_dir`` holds no ``best_model/config.yaml``.
        ConfigError: that configuration does not validate.
    """
    path = sweep_dir / "best_model" / "config.yaml"
    if not path.is_file():
        raise DataError(
            "no best_model/config.yaml in this folder",
            source=str(sweep_dir),
            fix="pass the output folder printed by 'hpo sweep' (a sweep with at least one finished trial)",
        )
    raw = yaml.safe_load(path.read_text())
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(
            f"the best configuration does not validate ({e.errors()[0]['msg']})",
            source=str(path),
            fix="rerun the sweep with this version of hpo",
        ) from None
    return dataclasses.replace(loaded, config=cfg, raw=raw)
