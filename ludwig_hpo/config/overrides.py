"""Command-line overrides of a sweep file (``--set trainer.learning_rate=0.01``,
``--num-workers 4``): applied to the raw mapping, then validated
again, so a bad path or value is the same one-line error as in the file. Driver only.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import ValidationError

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.config.paths import PathError, set_path
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.errors import ConfigError


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
        try:
            set_path(raw, path, value, any_top_level=True)
        except PathError as e:
            raise ConfigError(f"--set {e}", key="--set", fix=e.fix) from None
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
