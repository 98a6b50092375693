"""Building blocks shared by the schema modules: the frozen, strict pydantic base and the
error a validator raises when it knows the key path or the fix."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RuleError(ValueError):
    """A validation rule broken; the loader turns it into one line.

    Args:
        message: what is wrong, with the values seen.
        path: raw key path the rule concerns (``("hyperopt", "scheduler", "max_t")``), or None
            to keep the position pydantic reports.
        fix: how to fix it, as an imperative sentence, or None.
    """

    def __init__(self, message: str, path: tuple | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.fix = fix


class KeyedValueError(RuleError):
    """A cross-field rule broken at ``path`` (raw key path), so the loader can point at it."""

    def __init__(self, message: str, path: tuple, fix: str | None = None) -> None:
        super().__init__(message, path, fix)


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
