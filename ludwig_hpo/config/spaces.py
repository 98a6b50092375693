"""Search-space types of ``hyperopt.parameters``, with Ludwig's / Ray Tune's semantics. No I/O.

Bounds are always values, never exponents. Upper bounds, as in Ray Tune:

============  =========================================  ===========================
space         values                                     upper bound
============  =========================================  ===========================
uniform       floats in [lower, upper)                   exclusive
quniform      lower, lower + q, ..., upper               inclusive (multiples of q)
loguniform    floats in [lower, upper), log scale        exclusive
qloguniform   multiples of q in [lower, upper), log      inclusive (multiples of q)
randn         normal(mean, sd) floats                    (none)
qrandn        normal(mean, sd) rounded to multiples of q (none)
randint       integers lower .. upper - 1                exclusive
qrandint      lower, lower + q, ..., upper               inclusive (multiples of q)
lograndint    integers lower .. upper - 1, log scale     exclusive
qlograndint   multiples of q in [lower, upper], log      inclusive (multiples of q)
choice        one of ``categories``                      -
grid_search   every one of ``values`` (Cartesian grid)   -
============  =========================================  ===========================

Each model checks its own bounds and raises :class:`RuleError` naming the rule and the fix;
:meth:`_Space.problem_with` checks one value (``points_to_evaluate``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, model_validator

from ludwig_hpo.config.base import RuleError, _Base

_BOUNDS_FIX = "correct the bounds"


def _is_multiple(x: float, q: float) -> bool:
    k = round(x / q)
    return abs(k * q - x) <= 1e-9 * max(1.0, abs(x))


def clean_float(x: float) -> float:
    """``x`` with float noise of decimal steps removed (``3 * 0.1`` -> ``0.3``)."""
    return float(f"{x:.12g}")


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Space(_Base):
    """Common interface: ``describe`` for ``hpo validate``, ``probe_values`` to check the
    parameter path against the config, ``problem_with`` to check one value."""

    def describe(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def probe_values(self) -> list[Any]:
        """A few values of this space (both ends and an inner point) for checking the field."""
        raise NotImplementedError  # pragma: no cover

    def problem_with(self, value: Any) -> str | None:
        """Why ``value`` cannot be a sample of this space, or None if it can."""
        raise NotImplementedError  # pragma: no cover


class _Bounded(_Space):
    lower: float
    upper: float

    @model_validator(mode="after")
    def _ordered(self):
        if not self.lower < self.upper:
            raise RuleError(
                f"lower < upper must hold, but got (lower={self.lower:g}, upper={self.upper:g})", fix=_BOUNDS_FIX
            )
        return self


class _Log(_Space):
    """Base of log-scale spaces: a positive lower bound and a ``base`` above 1 (``base`` is
    accepted for Ray Tune compatibility; a log-uniform law does not depend on it)."""

    base: float = 10

    @model_validator(mode="after")
    def _log_ok(self):
        if self.lower <= 0:
            raise RuleError(
                f"{self.space} needs lower > 0, but got lower={self.lower:g} (bounds are values, not exponents)",
                fix="use a positive lower bound, e.g. 1.0e-5",
            )
        if self.base <= 1:
            raise RuleError(f"base must be > 1, but got base={self.base:g}", fix="use base: 10 (the default)")
        return self


class _Quantized:
    """Mixin of quantized spaces (which declare ``q``)."""

    def _check_q(self, integer: bool) -> None:
        if self.q <= 0:
            raise RuleError(f"q must be > 0, but got q={self.q:g}", fix="use a positive step q")
        if integer and self.q != int(self.q):
            raise RuleError(f"q must be an integer for {self.space}, but got q={self.q:g}", fix="use an integer q")
        if self.q > self.upper - self.lower:
            raise RuleError(
                f"q={self.q:g} is larger than the range upper - lower = {self.upper - self.lower:g}",
                fix="use a smaller q or wider bounds",
            )
        bad = [f"{n}={getattr(self, n):g}" for n in ("lower", "upper") if not _is_multiple(getattr(self, n), self.q)]
        if bad:
            raise RuleError(
                f"{' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a multiple of q={self.q:g} "
                "(values are rounded to multiples of q)",
                fix="use bounds that are multiples of q",
            )

    def _grid_problem(self, value: Any) -> str | None:
        if not _is_multiple(float(value), self.q):
            return f"{value!r} is not a multiple of q={self.q:g}"
        return None


# ---------------------------------------------------------------------------- floats
class UniformSpace(_Bounded):
    """Float uniformly sampled in [lower, upper)."""

    space: Literal["uniform"]

    def describe(self) -> str:
        return f"uniform float in [{self.lower:g}, {self.upper:g}), linear scale"

    def probe_values(self) -> list[Any]:
        return [self.lower, self.lower + (self.upper - self.lower) * 0.371, self.upper]

    def problem_with(self, value: Any) -> str | None:
        if not _num(value):
            return f"{value!r} is not a number"
        return None if self.lower <= value < self.upper else f"{value!r} is outside [{self.lower:g}, {self.upper:g})"


class QUniformSpace(_Bounded, _Quantized):
    """``lower, lower + q, ..., upper`` (uniform, rounded to multiples of ``q``; upper inclusive)."""

    space: Literal["quniform"]
    q: float

    @model_validator(mode="after")
    def _q_ok(self):
        self._check_q(integer=False)
        return self

    def describe(self) -> str:
        n = round((self.upper - self.lower) / self.q) + 1
        return f"quniform float in [{self.lower:g}, {self.upper:g}] step {self.q:g} ({n} values), linear scale"

    def probe_values(self) -> list[Any]:
        return [self.lower, clean_float(self.lower + self.q), self.upper]

    def problem_with(self, value: Any) -> str | None:
        if not _num(value):
            return f"{value!r} is not a number"
        if not self.lower <= value <= self.upper:
            return f"{value!r} is outside [{self.lower:g}, {self.upper:g}]"
        return self._grid_problem(value)


class LogUniformSpace(_Bounded, _Log):
    """Float sampled uniformly in log space in [lower, upper); bounds are values, not exponents."""

    space: Literal["loguniform"]

    def describe(self) -> str:
        return f"loguniform float in [{self.lower:g}, {self.upper:g}), log scale"

    probe_values = UniformSpace.probe_values
    problem_with = UniformSpace.problem_with


class QLogUniformSpace(_Bounded, _Log, _Quantized):
    """Log-uniform in [lower, upper], rounded to multiples of ``q`` (upper inclusive)."""

    space: Literal["qloguniform"]
    q: float

    @model_validator(mode="after")
    def _ok(self):
        self._check_q(integer=False)
        return self

    def describe(self) -> str:
        return f"qloguniform float in [{self.lower:g}, {self.upper:g}] step {self.q:g}, log scale"

    probe_values = QUniformSpace.probe_values
    problem_with = QUniformSpace.problem_with


class RandnSpace(_Space):
    """Normally distributed float, mean ``mean`` and standard deviation ``sd`` (sampled
    through the normal quantile of a uniform in [1e-6, 1 - 1e-6], so within ±4.75 sd)."""

    space: Literal["randn"]
    mean: float = 0.0
    sd: float = 1.0

    @model_validator(mode="after")
    def _sd_ok(self):
        if self.sd <= 0:
            raise RuleError(f"sd must be > 0, but got sd={self.sd:g}", fix="use a positive standard deviation")
        return self

    def describe(self) -> str:
        return f"normal float, mean {self.mean:g}, sd {self.sd:g} (within ±4.75 sd)"

    def probe_values(self) -> list[Any]:
        return [self.mean - 2 * self.sd, self.mean + 0.371 * self.sd, self.mean + 2 * self.sd]

    def problem_with(self, value: Any) -> str | None:
        if not _num(value):
            return f"{value!r} is not a number"
        if abs(value - self.mean) > 4.75 * self.sd:
            return f"{value!r} is more than 4.75 sd from the mean {self.mean:g}"
        return None


class QRandnSpace(RandnSpace, _Quantized):
    """Normal(mean, sd) rounded to multiples of ``q``."""

    space: Literal["qrandn"]
    q: float

    @model_validator(mode="after")
    def _q_ok(self):
        if self.q <= 0:
            raise RuleError(f"q must be > 0, but got q={self.q:g}", fix="use a positive step q")
        return self

    def describe(self) -> str:
        return f"normal float, mean {self.mean:g}, sd {self.sd:g}, rounded to multiples of {self.q:g}"

    def probe_values(self) -> list[Any]:
        return [clean_float(round(v / self.q) * self.q) for v in RandnSpace.probe_values(self)]

    def problem_with(self, value: Any) -> str | None:
        return RandnSpace.problem_with(self, value) or self._grid_problem(value)


# ---------------------------------------------------------------------------- integers
class _IntBounds(_Bounded):
    lower: int
    upper: int

    def problem_with(self, value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{value!r} is not an integer"
        lo, hi = self.inclusive_range()
        if not lo <= value <= hi:
            return f"{value!r} is outside {lo}..{hi}"
        return None

    def inclusive_range(self) -> tuple[int, int]:
        """Smallest and largest value this space samples."""
        return self.lower, self.upper - 1


class RandIntSpace(_IntBounds):
    """Integer in [lower, upper): the upper bound is exclusive, as in Ludwig and Ray Tune."""

    space: Literal["randint"]

    def describe(self) -> str:
        return f"randint [{self.lower}, {self.upper}) = integers {self.lower}..{self.upper - 1}, linear scale"

    def probe_values(self) -> list[Any]:
        return sorted({self.lower, self.upper - 1})


class QRandIntSpace(_IntBounds, _Quantized):
    """``lower, lower + q, ..., upper``: multiples of ``q``, upper bound inclusive (Ray Tune)."""

    space: Literal["qrandint"]
    q: int = 1

    @model_validator(mode="after")
    def _q_ok(self):
        self._check_q(integer=True)
        return self

    def inclusive_range(self) -> tuple[int, int]:
        return self.lower, self.upper

    def describe(self) -> str:
        return (
            f"qrandint [{self.lower}, {self.upper}] = integers {self.lower}..{self.upper} step {self.q}, linear scale"
        )

    def probe_values(self) -> list[Any]:
        return sorted({self.lower, self.upper})

    def problem_with(self, value: Any) -> str | None:
        return _IntBounds.problem_with(self, value) or self._grid_problem(value)


class LogRandIntSpace(_IntBounds, _Log):
    """Integer in [lower, upper) sampled on a log scale; upper exclusive (Ray Tune)."""

    space: Literal["lograndint"]

    def describe(self) -> str:
        return f"lograndint [{self.lower}, {self.upper}) = integers {self.lower}..{self.upper - 1}, log scale"

    probe_values = RandIntSpace.probe_values


class QLogRandIntSpace(_IntBounds, _Log, _Quantized):
    """Multiples of ``q`` in [lower, upper] sampled on a log scale; upper inclusive (Ray Tune)."""

    space: Literal["qlograndint"]
    q: int = 1

    @model_validator(mode="after")
    def _ok(self):
        self._check_q(integer=True)
        return self

    def inclusive_range(self) -> tuple[int, int]:
        return self.lower, self.upper

    def describe(self) -> str:
        return (
            f"qlograndint [{self.lower}, {self.upper}] = integers {self.lower}..{self.upper} step {self.q}, log scale"
        )

    probe_values = QRandIntSpace.probe_values
    problem_with = QRandIntSpace.problem_with


# ---------------------------------------------------------------------------- categorical
def _short(v: Any) -> str:
    import json

    return json.dumps(v, default=str) if isinstance(v, (dict, list)) else repr(v)


class _Listed(_Space):
    def _options(self) -> list[Any]:
        raise NotImplementedError  # pragma: no cover

    def probe_values(self) -> list[Any]:
        return list(self._options())

    def problem_with(self, value: Any) -> str | None:
        for c in self._options():
            if type(c) is type(value) and c == value or (_num(c) and _num(value) and c == value):
                return None
        return f"{_short(value)} is not one of {', '.join(_short(c) for c in self._options())}"


class ChoiceSpace(_Listed):
    """One of ``categories`` (scalars, lists or config blocks)."""

    space: Literal["choice"]
    categories: list[Any] = Field(min_length=1)

    def _options(self) -> list[Any]:
        return self.categories

    def describe(self) -> str:
        return f"choice of {len(self.categories)}: {', '.join(_short(c) for c in self.categories)}"


class GridSearchSpace(_Listed):
    """Every one of ``values``: the trials cover the Cartesian product of all grid_search
    parameters (times ``num_samples`` with ``search_alg.type: optuna``)."""

    space: Literal["grid_search"]
    values: list[Any] = Field(min_length=1)

    def _options(self) -> list[Any]:
        return self.values

    def describe(self) -> str:
        return f"grid of {len(self.values)}: {', '.join(_short(c) for c in self.values)}"


ParamSpace = Annotated[
    Union[
        UniformSpace,
        QUniformSpace,
        LogUniformSpace,
        QLogUniformSpace,
        RandnSpace,
        QRandnSpace,
        RandIntSpace,
        QRandIntSpace,
        LogRandIntSpace,
        QLogRandIntSpace,
        ChoiceSpace,
        GridSearchSpace,
    ],
    Field(discriminator="space"),
]
#: Spaces whose values are integers.
INT_SPACES = (RandIntSpace, QRandIntSpace, LogRandIntSpace, QLogRandIntSpace)
#: Spaces sampled on a log scale.
LOG_SPACES = (LogUniformSpace, QLogUniformSpace, LogRandIntSpace, QLogRandIntSpace)
#: Spaces of listed values.
LISTED_SPACES = (ChoiceSpace, GridSearchSpace)


def grid_size(spaces: dict[str, Any]) -> int:
    """Number of points of the Cartesian product of the ``grid_search`` parameters (1 if none)."""
    return math.prod(len(s.values) for s in spaces.values() if isinstance(s, GridSearchSpace))


_SPACE_ADAPTER: TypeAdapter[ParamSpace] = TypeAdapter(ParamSpace)


def parse_space(value: Any) -> ParamSpace:
    """The space model of one raw space mapping (``{space: loguniform, lower: ..., upper: ...}``).

    Raises:
        pydantic.ValidationError: ``value`` is not a valid space.
    """
    return _SPACE_ADAPTER.validate_python(value)
