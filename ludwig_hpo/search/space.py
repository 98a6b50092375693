"""Search space translation: sweep-file spaces -> Optuna distributions. Pure, table-tested.

Integer upper bounds are exclusive in the sweep file (Ludwig, Ray Tune) and inclusive in
Optuna, so ``randint [lower, upper)`` becomes ``IntDistribution(lower, upper - 1)``.
Choice categories are passed by index so lists and config blocks reach the trial intact.
"""

from __future__ import annotations

from typing import Any

import optuna

from ludwig_hpo.config.schema import ChoiceSpace, LogUniformSpace, RandIntSpace, UniformSpace
from ludwig_hpo.results import ParamInfo


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def to_optuna(space: Any) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution of one sweep-file space.

    Choice spaces whose categories are not all scalars become a categorical over indices
    ``0..n-1``; :func:`decode` maps a sampled index back to the category.
    """
    if isinstance(space, UniformSpace):
        return optuna.distributions.FloatDistribution(space.lower, space.upper)
    if isinstance(space, LogUniformSpace):
        return optuna.distributions.FloatDistribution(space.lower, space.upper, log=True)
    if isinstance(space, RandIntSpace):
        return optuna.distributions.IntDistribution(space.lower, space.upper - 1)
    if isinstance(space, ChoiceSpace):
        if all(_is_scalar(c) for c in space.categories):
            return optuna.distributions.CategoricalDistribution(space.categories)
        return optuna.distributions.CategoricalDistribution(list(range(len(space.categories))))
    raise TypeError(f"no Optuna distribution for {type(space).__name__}")


def index_encoded_choices(spaces: dict[str, Any]) -> dict[str, list]:
    """Choice parameters that Optuna samples by index (categories that are lists or config
    blocks): ``{dotted path: categories}``."""
    return {path: list(s.categories) for path, s in spaces.items()
            if isinstance(s, ChoiceSpace) and not all(_is_scalar(c) for c in s.categories)}


def decode_with(choices: dict[str, list], sampled: dict[str, Any]) -> dict[str, Any]:
    """Map sampled values back to config values, given :func:`index_encoded_choices`."""
    return {path: choices[path][int(v)] if path in choices else v for path, v in sampled.items()}


def decode(spaces: dict[str, Any], sampled: dict[str, Any]) -> dict[str, Any]:
    """Map Optuna's sampled values back to config values (category indices -> categories)."""
    return decode_with(index_encoded_choices(spaces), sampled)


def param_infos(spaces: dict[str, Any]) -> tuple[ParamInfo, ...]:
    """Report-side description of each searched parameter, in declaration order."""
    out = []
    for path, s in spaces.items():
        if isinstance(s, ChoiceSpace):
            out.append(ParamInfo(path, s.space, categories=tuple(s.categories)))
        else:
            out.append(ParamInfo(path, s.space, log=isinstance(s, LogUniformSpace),
                                 lower=float(s.lower), upper=float(s.upper)))
    return tuple(out)
