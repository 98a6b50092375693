"""Search space translation: sweep-file spaces -> Optuna distributions, and sampled values
back to config values. Pure, table-tested.

Optuna has no normal law, no quantized log law and its integer upper bounds are inclusive,
so a few spaces are sampled in a helper space and *decoded* into the sweep file's value:

- ``randint`` / ``lograndint`` ``[lower, upper)`` -> ``IntDistribution(lower, upper - 1)``;
  ``qrandint`` ``[lower, upper]`` step ``q`` -> ``IntDistribution(lo, hi, step=q)``, where
  ``lo`` / ``hi`` are the smallest and largest multiples of ``q`` in the bounds (Ray Tune's).
- ``quniform`` -> ``FloatDistribution(lo, hi, step=q)``; ``qloguniform`` / ``qlograndint`` ->
  a log distribution over ``[lo, hi]``, rounded to multiples of ``q``.
- ``randn`` / ``qrandn`` -> a uniform ``u`` in ``[1e-6, 1 - 1e-6]``, decoded as
  ``mean + sd * Phi^-1(u)`` (then rounded to multiples of ``q``).
- ``choice`` / ``grid_search`` whose values are not all scalars -> categorical over indices
  ``0..n-1``, decoded to the value, so lists and config blocks reach the trial intact.

Tune's config keys are the parameter paths spelled by :func:`~ludwig_hpo.tracking.names.tune_key`
(Tune reads a ``/`` as nesting): every Tune space and point is keyed by :func:`tune_keyed`, and
:func:`decode_with` / :func:`decode` key what Tune hands back by the paths as written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from ludwig_hpo.config.space_base import clean_float
from ludwig_hpo.config.spaces import (
    LISTED_SPACES,
    LOG_SPACES,
    NORMAL_SPACES,
    ChoiceSpace,
    GridSearchSpace,
    LogRandIntSpace,
    LogUniformSpace,
    ParamSpace,
    QLogRandIntSpace,
    QLogUniformSpace,
    QRandIntSpace,
    QRandnSpace,
    QUniformSpace,
    RandIntSpace,
    UniformSpace,
)
from ludwig_hpo.results import ParamInfo
from ludwig_hpo.tracking.names import path_of_tune_key, tune_key

#: The uniform helper of the normal spaces stays this far from 0 and 1 (±4.75 sd).
NORMAL_EPS = 1e-6
#: A space of listed values.
Listed = ChoiceSpace | GridSearchSpace
#: The standard normal law. The standard library's quantile and ``erfc`` are as accurate as
#: SciPy's ``ndtri`` / ``ndtr`` over the helper's range, and keep SciPy (~20 MB) out of the
#: driver, which translates every sampled point.
_STANDARD_NORMAL = NormalDist()


def _normal_cdf(x: float) -> float:
    # erfc keeps its relative precision in the lower tail, where 1 + erf(x) would cancel
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _options(space: Listed) -> list[Any]:
    return list(space.categories if isinstance(space, ChoiceSpace) else space.values)


def _by_index(space: Listed) -> bool:
    return not all(_is_scalar(c) for c in _options(space))


def to_optuna(space: ParamSpace) -> BaseDistribution:
    """The Optuna distribution of one sweep-file space (see the module docstring).

    Raises:
        TypeError: ``space`` is not a sweep-file space model.
    """
    if isinstance(space, QUniformSpace):
        return FloatDistribution(*space.grid_bounds(), step=space.q)
    if isinstance(space, QLogUniformSpace):
        return FloatDistribution(*space.grid_bounds(), log=True)
    if isinstance(space, (UniformSpace, LogUniformSpace)):
        return FloatDistribution(space.lower, space.upper, log=isinstance(space, LogUniformSpace))
    if isinstance(space, NORMAL_SPACES):
        return FloatDistribution(NORMAL_EPS, 1 - NORMAL_EPS)
    if isinstance(space, QRandIntSpace):
        return IntDistribution(*space.inclusive_range(), step=int(space.q))
    if isinstance(space, QLogRandIntSpace):
        return IntDistribution(*space.inclusive_range(), log=True)
    if isinstance(space, (RandIntSpace, LogRandIntSpace)):
        return IntDistribution(space.lower, space.upper - 1, log=isinstance(space, LogRandIntSpace))
    if isinstance(space, LISTED_SPACES):
        opts = _options(space)
        return CategoricalDistribution(list(range(len(opts))) if _by_index(space) else opts)
    raise TypeError(f"no Optuna distribution for {type(space).__name__}")


def _snap(value: float, q: float) -> float:
    return round(value / q) * q


def _clip(value: float, lower: float, upper: float) -> float:
    return min(max(value, lower), upper)


def decode_value(space: ParamSpace, sampled: Any) -> Any:
    """The config value of one value Optuna sampled for ``space``."""
    if isinstance(space, LISTED_SPACES):
        return _options(space)[int(sampled)] if _by_index(space) else sampled
    if isinstance(space, NORMAL_SPACES):
        v = space.mean + space.sd * _STANDARD_NORMAL.inv_cdf(float(sampled))
        return clean_float(_snap(v, space.q)) if isinstance(space, QRandnSpace) else v
    if isinstance(space, QLogRandIntSpace):
        return int(_clip(_snap(sampled, space.q), *space.inclusive_range()))
    if isinstance(space, (QUniformSpace, QLogUniformSpace)):
        return clean_float(_clip(_snap(sampled, space.q), *space.grid_bounds()))
    return sampled


def encode_value(space: ParamSpace, value: Any) -> Any:
    """Inverse of :func:`decode_value`: the value to give Optuna for a config value
    (``points_to_evaluate``, grid points). ``value`` must be inside the space."""
    if isinstance(space, LISTED_SPACES):
        if not _by_index(space):
            return value
        return next(i for i, c in enumerate(_options(space)) if c == value and type(c) is type(value))
    if isinstance(space, NORMAL_SPACES):
        u = _normal_cdf((value - space.mean) / space.sd)
        return min(max(u, NORMAL_EPS), 1 - NORMAL_EPS)
    return value


#: Spaces whose sampled value differs from the config value.
_DECODED = (*NORMAL_SPACES, QLogRandIntSpace, QUniformSpace, QLogUniformSpace)


def index_encoded_choices(spaces: Mapping[str, ParamSpace]) -> dict[str, ParamSpace]:
    """The parameters whose sampled value must be decoded (categories by index, normal and
    quantized spaces): ``{dotted path: space}``. Small and picklable: every trial gets it."""
    return {
        path: s
        for path, s in spaces.items()
        if isinstance(s, _DECODED) or (isinstance(s, LISTED_SPACES) and _by_index(s))
    }


def tune_keyed(by_path: Mapping[str, Any]) -> dict[str, Any]:
    """``{parameter path: x}`` keyed by Tune config keys (:func:`~ludwig_hpo.tracking.names.tune_key`):
    a Tune space, a point to evaluate, PBT's mutations. Pure."""
    return {tune_key(path): x for path, x in by_path.items()}


def paths_of_tune_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`tune_keyed` on a trial's Tune config: ``{parameter path: sampled
    value}``. A nested mapping (a config that Tune unflattened at a ``/``: an experiment saved
    before its keys were spelled by :func:`tune_key`) is flattened back at ``/``; sampled
    values are never mappings (config blocks are sampled by index). Pure."""
    out: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}/{k}" if prefix else str(k)
            if isinstance(v, Mapping):
                walk(v, key)
            else:
                out[path_of_tune_key(key)] = v

    walk(config, "")
    return out


def decode_with(decoders: Mapping[str, ParamSpace], sampled: Mapping[str, Any]) -> dict[str, Any]:
    """Map a trial's Tune config (:func:`paths_of_tune_config`) back to ``{parameter path:
    config value}``, given :func:`index_encoded_choices`."""
    by_path = paths_of_tune_config(sampled)
    return {path: decode_value(decoders[path], v) if path in decoders else v for path, v in by_path.items()}


def decode(spaces: Mapping[str, ParamSpace], sampled: Mapping[str, Any]) -> dict[str, Any]:
    """Map Optuna's sampled values (a trial's Tune config) back to ``{parameter path: config
    value}`` (category indices -> categories, normal quantiles -> values, quantized spaces ->
    multiples of ``q``)."""
    return decode_with(index_encoded_choices(spaces), sampled)


def param_infos(spaces: Mapping[str, ParamSpace]) -> tuple[ParamInfo, ...]:
    """Report-side description of each searched parameter, in declaration order."""
    out = []
    for path, s in spaces.items():
        if isinstance(s, LISTED_SPACES):
            out.append(ParamInfo(path, s.space, categories=tuple(_options(s))))
        elif isinstance(s, NORMAL_SPACES):
            out.append(ParamInfo(path, s.space, lower=s.mean - 4.75 * s.sd, upper=s.mean + 4.75 * s.sd))
        else:
            out.append(
                ParamInfo(path, s.space, log=isinstance(s, LOG_SPACES), lower=float(s.lower), upper=float(s.upper))
            )
    return tuple(out)


def to_tune(space: ParamSpace) -> Any:
    """The Ray Tune search-space object sampling the same encoded values as :func:`to_optuna`
    (so :func:`decode_with` maps them to config values): ``grid_search`` stays a grid, the
    other spaces become Tune domains. Used where Tune's own random variant generator samples
    trials (the PBT scheduler's population).

    Raises:
        TypeError: ``space`` is not a sweep-file space model.
    """
    from ray import tune

    dist = to_optuna(space)
    if isinstance(space, GridSearchSpace) and isinstance(dist, CategoricalDistribution):
        return tune.grid_search(list(dist.choices))
    return tune_domain(dist)


def tune_domain(dist: BaseDistribution) -> Any:
    """The Tune domain of one Optuna distribution (inclusive integer bounds become Tune's
    exclusive ones).

    Raises:
        TypeError: ``dist`` is none of Optuna's categorical, integer or float distributions.
    """
    from ray import tune

    if isinstance(dist, CategoricalDistribution):
        return tune.choice(list(dist.choices))
    if isinstance(dist, IntDistribution):
        if dist.step > 1:
            return tune.qrandint(dist.low, dist.high, dist.step)
        return tune.lograndint(dist.low, dist.high + 1) if dist.log else tune.randint(dist.low, dist.high + 1)
    if not isinstance(dist, FloatDistribution):
        raise TypeError(f"no Tune domain for {type(dist).__name__}")
    if dist.step is not None:
        return tune.quniform(dist.low, dist.high, dist.step)
    return tune.loguniform(dist.low, dist.high) if dist.log else tune.uniform(dist.low, dist.high)


def clip_encoded(dist: BaseDistribution, value: Any) -> Any:
    """``value`` moved into ``dist``: clipped to its bounds, rounded to its step (integers
    stay integers); categories, and values of other distributions, are returned unchanged. Pure."""
    if not isinstance(dist, (IntDistribution, FloatDistribution)):
        return value
    v = min(max(value, dist.low), dist.high)
    if isinstance(dist, IntDistribution):
        return int(dist.low + round((v - dist.low) / dist.step) * dist.step)
    if dist.step is not None:
        return clean_float(dist.low + round((v - dist.low) / dist.step) * dist.step)
    return float(v)
