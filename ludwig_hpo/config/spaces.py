"""Search-space types of ``hyperopt.parameters``, with Ludwig's / Ray Tune's semantics. No I/O.

Bounds are always values, never exponents. Upper bounds, as in Ray Tune:

============  =========================================  ===========================
space         values                                     upper bound
============  =========================================  ===========================
uniform       floats in [lower, upper)                   exclusive
quniform      multiples of q in [lower, upper]           inclusive (multiples of q)
loguniform    floats in [lower, upper), log scale        exclusive
qloguniform   multiples of q in [lower, upper], log      inclusive (multiples of q)
randn         normal(mean, sd) floats                    (none)
qrandn        normal(mean, sd) rounded to multiples of q (none)
randint       integers lower .. upper - 1                exclusive
qrandint      multiples of q in [lower, upper]           inclusive (multiples of q)
lograndint    integers lower .. upper - 1, log scale     exclusive
qlograndint   multiples of q in [lower, upper], log      inclusive (multiples of q)
choice        one of ``categories``                      -
grid_search   every one of ``values`` (Cartesian grid)   -
============  =========================================  ===========================

As in Ray Tune, the quantized spaces' values are the multiples of ``q`` between the bounds
(bounds that are not multiples are rounded inwards). ``sample_from`` (a Python function) has
no form in a YAML file: it is refused with one line.

Each model checks its own bounds and raises :class:`RuleError` naming the rule and the fix;
:meth:`problem_with` checks one value (``points_to_evaluate``, PBT mutations).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, model_validator
from typing_extensions import Self

from ludwig_hpo.config.base import RuleError
from ludwig_hpo.config.space_base import (
    BoundedSpace,
    LogScaleSpace,
    NormalSpace,
    Space,
    check_step,
    clean_float,
    half_open_problem,
    is_number,
    snap_bounds,
    step_problem,
    stepped_problem,
)


# ---------------------------------------------------------------------------- floats
class UniformSpace(BoundedSpace):
    """Float uniformly sampled in [lower, upper)."""

    space: Literal["uniform"]

    def describe(self) -> str:
        return f"uniform float in [{self.lower:g}, {self.upper:g}), linear scale"

    def probe_values(self) -> list[Any]:
        return [self.lower, self.lower + (self.upper - self.lower) * 0.371, self.upper]

    def problem_with(self, value: Any) -> str | None:
        return half_open_problem(value, self.lower, self.upper)


class QUniformSpace(BoundedSpace):
    """The multiples of ``q`` in ``[lower, upper]`` (uniform, rounded to multiples of ``q``; upper inclusive)."""

    space: Literal["quniform"]
    q: float

    @model_validator(mode="after")
    def _q_ok(self) -> Self:
        check_step(self.space, self.q, self.lower, self.upper, integer=False)
        return self

    def grid_bounds(self) -> tuple[float, float]:
        """The smallest and largest value: multiples of ``q`` inside the bounds."""
        return snap_bounds(self.lower, self.upper, self.q)

    def describe(self) -> str:
        lo, hi = self.grid_bounds()
        n = round((hi - lo) / self.q) + 1
        return f"quniform float in [{lo:g}, {hi:g}] step {self.q:g} ({n} values), linear scale"

    def probe_values(self) -> list[Any]:
        lo, hi = self.grid_bounds()
        return sorted({lo, min(hi, clean_float(lo + self.q)), hi})

    def problem_with(self, value: Any) -> str | None:
        return stepped_problem(value, self.lower, self.upper, self.q)


class LogUniformSpace(BoundedSpace, LogScaleSpace):
    """Float sampled uniformly in log space in [lower, upper); bounds are values, not exponents."""

    space: Literal["loguniform"]

    def describe(self) -> str:
        return f"loguniform float in [{self.lower:g}, {self.upper:g}), log scale"

    def probe_values(self) -> list[Any]:
        return [self.lower, self.lower + (self.upper - self.lower) * 0.371, self.upper]

    def problem_with(self, value: Any) -> str | None:
        return half_open_problem(value, self.lower, self.upper)


class QLogUniformSpace(BoundedSpace, LogScaleSpace):
    """Log-uniform in [lower, upper], rounded to multiples of ``q`` (upper inclusive)."""

    space: Literal["qloguniform"]
    q: float

    @model_validator(mode="after")
    def _ok(self) -> Self:
        check_step(self.space, self.q, self.lower, self.upper, integer=False)
        return self

    def grid_bounds(self) -> tuple[float, float]:
        """The smallest and largest value: multiples of ``q`` inside the bounds."""
        return snap_bounds(self.lower, self.upper, self.q)

    def describe(self) -> str:
        lo, hi = self.grid_bounds()
        return f"qloguniform float in [{lo:g}, {hi:g}] step {self.q:g}, log scale"

    def probe_values(self) -> list[Any]:
        lo, hi = self.grid_bounds()
        return sorted({lo, min(hi, clean_float(lo + self.q)), hi})

    def problem_with(self, value: Any) -> str | None:
        return stepped_problem(value, self.lower, self.upper, self.q)


class RandnSpace(NormalSpace):
    """Normally distributed float, mean ``mean`` and standard deviation ``sd`` (sampled
    through the normal quantile of a uniform in [1e-6, 1 - 1e-6], so within ±4.75 sd)."""

    space: Literal["randn"]
    mean: float = 0.0
    sd: float = 1.0

    def describe(self) -> str:
        return f"normal float, mean {self.mean:g}, sd {self.sd:g} (within ±4.75 sd)"


class QRandnSpace(NormalSpace):
    """Normal(mean, sd) rounded to multiples of ``q``."""

    space: Literal["qrandn"]
    mean: float = 0.0
    sd: float = 1.0
    q: float

    @model_validator(mode="after")
    def _q_ok(self) -> Self:
        if self.q <= 0:
            raise RuleError(f"q must be > 0, but got q={self.q:g}", fix="use a positive step q")
        return self

    def describe(self) -> str:
        return f"normal float, mean {self.mean:g}, sd {self.sd:g}, rounded to multiples of {self.q:g}"

    def probe_values(self) -> list[Any]:
        return [clean_float(round(v / self.q) * self.q) for v in super().probe_values()]

    def problem_with(self, value: Any) -> str | None:
        return super().problem_with(value) or step_problem(value, self.q)


# ---------------------------------------------------------------------------- integers
class _IntBounds(BoundedSpace):
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


class QRandIntSpace(_IntBounds):
    """The multiples of ``q`` in ``[lower, upper]``, upper bound inclusive (Ray Tune)."""

    space: Literal["qrandint"]
    q: int = 1

    @model_validator(mode="after")
    def _q_ok(self) -> Self:
        check_step(self.space, self.q, self.lower, self.upper, integer=True)
        return self

    def inclusive_range(self) -> tuple[int, int]:
        lo, hi = snap_bounds(self.lower, self.upper, self.q)
        return int(lo), int(hi)

    def describe(self) -> str:
        lo, hi = self.inclusive_range()
        return f"qrandint [{self.lower}, {self.upper}] = integers {lo}..{hi} step {self.q}, linear scale"

    def probe_values(self) -> list[Any]:
        return sorted(set(self.inclusive_range()))

    def problem_with(self, value: Any) -> str | None:
        return super().problem_with(value) or step_problem(value, self.q)


class IntSpace(QRandIntSpace):
    """Integer in [lower, upper], upper bound inclusive: Ludwig's optuna executor's ``int``
    space (Optuna's ``suggest_int(lower, upper)``), sampled as ``qrandint`` with ``q: 1``."""

    space: Literal["int"]  # type: ignore[assignment]  # narrows the parent's tag to this space's own
    q: Literal[1] = 1

    def describe(self) -> str:
        return f"int [{self.lower}, {self.upper}] = integers {self.lower}..{self.upper}, linear scale"


class LogRandIntSpace(_IntBounds, LogScaleSpace):
    """Integer in [lower, upper) sampled on a log scale; upper exclusive (Ray Tune)."""

    space: Literal["lograndint"]

    def describe(self) -> str:
        return f"lograndint [{self.lower}, {self.upper}) = integers {self.lower}..{self.upper - 1}, log scale"

    def probe_values(self) -> list[Any]:
        return sorted({self.lower, self.upper - 1})


class QLogRandIntSpace(_IntBounds, LogScaleSpace):
    """Multiples of ``q`` in [lower, upper] sampled on a log scale; upper inclusive (Ray Tune)."""

    space: Literal["qlograndint"]
    q: int = 1

    @model_validator(mode="after")
    def _ok(self) -> Self:
        check_step(self.space, self.q, self.lower, self.upper, integer=True)
        return self

    def inclusive_range(self) -> tuple[int, int]:
        lo, hi = snap_bounds(self.lower, self.upper, self.q)
        return int(lo), int(hi)

    def describe(self) -> str:
        lo, hi = self.inclusive_range()
        return f"qlograndint [{self.lower}, {self.upper}] = integers {lo}..{hi} step {self.q}, log scale"

    def probe_values(self) -> list[Any]:
        return sorted(set(self.inclusive_range()))

    def problem_with(self, value: Any) -> str | None:
        return super().problem_with(value) or step_problem(value, self.q)


# ---------------------------------------------------------------------------- categorical
def _short(v: Any) -> str:
    return json.dumps(v, default=str) if isinstance(v, (dict, list)) else repr(v)


class _Listed(Space):
    def _options(self) -> list[Any]:
        raise NotImplementedError  # pragma: no cover

    def probe_values(self) -> list[Any]:
        return list(self._options())

    def problem_with(self, value: Any) -> str | None:
        for c in self._options():
            if type(c) is type(value) and c == value or (is_number(c) and is_number(value) and c == value):
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
        IntSpace,
        LogRandIntSpace,
        QLogRandIntSpace,
        ChoiceSpace,
        GridSearchSpace,
    ],
    Field(discriminator="space"),
]
#: Spaces whose values are integers.
INT_SPACES = (RandIntSpace, QRandIntSpace, IntSpace, LogRandIntSpace, QLogRandIntSpace)
#: Spaces sampled on a log scale.
LOG_SPACES = (LogUniformSpace, QLogUniformSpace, LogRandIntSpace, QLogRandIntSpace)
#: Spaces of listed values.
LISTED_SPACES = (ChoiceSpace, GridSearchSpace)
#: Spaces of normally distributed values (no bounds).
NORMAL_SPACES = (RandnSpace, QRandnSpace)


def grid_size(spaces: Mapping[str, Space]) -> int:
    """Number of points of the Cartesian product of the ``grid_search`` parameters (1 if none)."""
    return math.prod(len(s.values) for s in spaces.values() if isinstance(s, GridSearchSpace))


_SPACE_ADAPTER: TypeAdapter[ParamSpace] = TypeAdapter(ParamSpace)


def parse_space(value: Any) -> ParamSpace:
    """The space model of one raw space mapping (``{space: loguniform, lower: ..., upper: ...}``).

    Raises:
        pydantic.ValidationError: ``value`` is not a valid space.
    """
    return _SPACE_ADAPTER.validate_python(value)
