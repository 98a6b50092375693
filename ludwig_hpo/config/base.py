"""Building blocks shared by the schema modules: the frozen, strict pydantic base, the error a
validator raises when it knows the key path or the fix, and the fill-in of a section's
``type`` tag."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

#: A raw key path: mapping keys and list indices, e.g. ``("hyperopt", "metric", 0)``.
KeyPath = tuple[str | int, ...]


class RuleError(ValueError):
    """A validation rule broken; the loader turns it into one line.

    Args:
        message: what is wrong, with the values seen.
        path: raw key path the rule concerns (``("hyperopt", "scheduler", "max_t")``), or None
            to keep the position pydantic reports.
        fix: how to fix it, as an imperative sentence, or None.
    """

    def __init__(self, message: str, path: KeyPath | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.fix = fix


class KeyedValueError(RuleError):
    """A cross-field rule broken at ``path`` (raw key path), so the loader can point at it."""

    def __init__(self, message: str, path: KeyPath, fix: str | None = None) -> None:
        super().__init__(message, path, fix)


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def default_type(default: str) -> Callable[[Any], Any]:
    """A before-validator of a tagged section (an encoder, a scheduler): a mapping written
    without ``type`` gets ``type: default``, so the tagged union can pick its model; any other
    value passes unchanged. Pure."""

    def fill(value: Any) -> Any:
        if isinstance(value, dict) and "type" not in value:
            return {"type": default, **value}
        return value

    return fill
