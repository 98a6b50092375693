"""The common interface of the search spaces of ``hyperopt.parameters`` and the rules several
of them share (ordered bounds, log-scale bounds, quantization steps, normal laws). No I/O;
the concrete spaces are in :mod:`ludwig_hpo.config.spaces`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import model_validator
from typing_extensions import Self

from ludwig_hpo.config.base import RuleError, _Base

_BOUNDS_FIX = "correct the bounds"


def is_multiple(x: float, q: float) -> bool:
    """Whether ``x`` is a multiple of ``q`` up to float noise (relative 1e-9)."""
    k = round(x / q)
    return abs(k * q - x) <= 1e-9 * max(1.0, abs(x))


def clean_float(x: float) -> float:
    """``x`` with float noise of decimal steps removed (``3 * 0.1`` -> ``0.3``)."""
    return float(f"{x:.12g}")


def is_number(v: Any) -> bool:
    """Whether ``v`` is an int or a float (a bool is not a number here)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Space(_Base):
    """Common interface: ``describe`` for ``hpo validate``, ``probe_values`` to check the
    parameter path against the config, ``problem_with`` to check one value."""

    if TYPE_CHECKING:
        space: str  # every space declares its tag as a Literal

    def describe(self) -> str:  # pragma: no cover - every subclass overrides
        """One line for ``hpo validate``: the values and scale of the space."""
        raise NotImplementedError

    def probe_values(self) -> list[Any]:
        """A few values of this space (both ends and an inner point) for checking the field."""
        raise NotImplementedError  # pragma: no cover

    def problem_with(self, value: Any) -> str | None:
        """Why ``value`` cannot be a sample of this space, or None if it can."""
        raise NotImplementedError  # pragma: no cover


def snap_bounds(lower: float, upper: float, q: float) -> tuple[float, float]:
    """The smallest and largest multiple of ``q`` in ``[lower, upper]`` (Ray Tune's
    quantized bounds, rounded inwards; float noise of decimal steps removed). Pure."""
    lo, hi = lower / q, upper / q
    lo_i = round(lo) if abs(lo - round(lo)) <= 1e-9 * max(1.0, abs(lo)) else math.ceil(lo)
    hi_i = round(hi) if abs(hi - round(hi)) <= 1e-9 * max(1.0, abs(hi)) else math.floor(hi)
    return clean_float(lo_i * q), clean_float(hi_i * q)


def check_step(kind: str, q: float, lower: float, upper: float, *, integer: bool) -> None:
    """Raise :class:`RuleError` unless ``q`` is a positive step (an integer for integer
    spaces) with at least one multiple in ``[lower, upper]``. Bounds need not be multiples of
    ``q``: as in Ray Tune, the values are the multiples of ``q`` between them."""
    if q <= 0:
        raise RuleError(f"q must be > 0, but got q={q:g}", fix="use a positive step q")
    if integer and q != int(q):
        raise RuleError(f"q must be an integer for {kind}, but got q={q:g}", fix="use an integer q")
    lo, hi = snap_bounds(lower, upper, q)
    if lo > hi:
        raise RuleError(
            f"no multiple of q={q:g} lies in [{lower:g}, {upper:g}] (values are multiples of q)",
            fix="use a smaller q or wider bounds",
        )


def step_problem(value: Any, q: float) -> str | None:
    """Why ``value`` (a number) is not a sample of a space quantized by ``q``, or None."""
    if not is_multiple(float(value), q):
        return f"{value!r} is not a multiple of q={q:g}"
    return None


def half_open_problem(value: Any, lower: float, upper: float) -> str | None:
    """Why ``value`` is not a float of ``[lower, upper)``, or None."""
    if not is_number(value):
        return f"{value!r} is not a number"
    return None if lower <= value < upper else f"{value!r} is outside [{lower:g}, {upper:g})"


def stepped_problem(value: Any, lower: float, upper: float, q: float) -> str | None:
    """Why ``value`` is not a multiple of ``q`` in ``[lower, upper]``, or None."""
    if not is_number(value):
        return f"{value!r} is not a number"
    if not lower <= value <= upper:
        return f"{value!r} is outside [{lower:g}, {upper:g}]"
    return step_problem(value, q)


class BoundedSpace(Space):
    """Base of the spaces with bounds: ``lower < upper``."""

    lower: float
    upper: float

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.lower < self.upper:
            raise RuleError(
                f"lower < upper must hold, but got (lower={self.lower:g}, upper={self.upper:g})", fix=_BOUNDS_FIX
            )
        return self


class LogScaleSpace(Space):
    """Base of log-scale spaces: a positive lower bound and a ``base`` above 1 (``base`` is
    accepted for Ray Tune compatibility; a log-uniform law does not depend on it)."""

    if TYPE_CHECKING:  # every log space is also bounded (by floats or by integers)

        @property
        def lower(self) -> float: ...

    base: float = 10

    @model_validator(mode="after")
    def _log_ok(self) -> Self:
        if self.lower <= 0:
            raise RuleError(
                f"{self.space} needs lower > 0, but got lower={self.lower:g} (bounds are values, not exponents)",
                fix="use a positive lower bound, e.g. 1.0e-5",
            )
        if self.base <= 1:
            raise RuleError(f"base must be > 1, but got base={self.base:g}", fix="use base: 10 (the default)")
        return self


class NormalSpace(Space):
    """Base of the normal spaces, which declare ``mean`` and ``sd``."""

    if TYPE_CHECKING:
        mean: float
        sd: float

    @model_validator(mode="after")
    def _sd_ok(self) -> Self:
        if self.sd <= 0:
            raise RuleError(f"sd must be > 0, but got sd={self.sd:g}", fix="use a positive standard deviation")
        return self

    def probe_values(self) -> list[Any]:
        return [self.mean - 2 * self.sd, self.mean + 0.371 * self.sd, self.mean + 2 * self.sd]

    def problem_with(self, value: Any) -> str | None:
        if not is_number(value):
            return f"{value!r} is not a number"
        if abs(value - self.mean) > 4.75 * self.sd:
            return f"{value!r} is more than 4.75 sd from the mean {self.mean:g}"
        return None
