"""Parameter importance: Optuna's fANOVA evaluator on a study rebuilt from the trials.

The sweep's own Optuna study lives inside Ray Tune's searcher and is not kept, so the
report rebuilds one from the trials table: every trial with a finite metric becomes a
COMPLETE Optuna trial (early-stopped trials with the best value they reached), with the
search space's distributions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import plotly.graph_objects as go

from dashboards._format import add_empty_note, plotly_text, trial_metric, value_label
from dashboards.table import param_paths
from ludwig_hpo.results import ParamInfo, SweepResult
from ludwig_hpo.results.records import Goal

MIN_TRIALS = 3  # below this an importance says nothing
SEED = 0
#: fANOVA's forest grows with the trials; beyond this many a seeded random subset is used.
MAX_TRIALS = 250
#: fANOVA one-hot encodes categories; a parameter with more enters as its category's index
#: (an arbitrary order the forest can still split on) to keep the forest small.
MAX_ONE_HOT = 16


class ImportanceInfo(NamedTuple):
    """What the importance figure draws.

    Attributes:
        params: varied parameters, most important first.
        importances: their fANOVA importances (fractions of the metric's variance,
            summing to 1 over ``params``); empty with ``note`` set when not computed.
        n_trials: trials the importances are computed on (a seeded random subset of
            :data:`MAX_TRIALS` when the study has more).
        note: why importances are missing (e.g. ``"no variance: every trial scored 0.5"``),
            else None.
        correlations: per parameter, Spearman's rank correlation of its value with the
            metric over the scored trials (None for a categorical parameter or when it
            cannot be computed): the direction of the effect.
        effects: per parameter, that direction in words for the sweep's goal, e.g.
            ``"higher is better (ρ = -0.62)"``; ``""`` when unknown.
    """

    params: list[str]
    importances: list[float]
    n_trials: int
    note: str | None
    correlations: list[float | None] = []
    effects: list[str] = []


def spearman_direction(result: SweepResult, path: str) -> float | None:
    """Spearman's ρ of a numeric parameter's value with the metric over the scored trials
    that have it; None for a non-numeric parameter, fewer than 3 trials or no variation."""
    pairs = [(t.params.get(path), v) for t in result.trials if (v := trial_metric(t)) is not None]
    pairs = [(x, v) for x, v in pairs if isinstance(x, (int, float)) and not isinstance(x, bool)]
    if len(pairs) < 3 or len({x for x, _ in pairs}) < 2 or len({v for _, v in pairs}) < 2:
        return None
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = float(stats.spearmanr([x for x, _ in pairs], [v for _, v in pairs]).statistic)
    return rho if math.isfinite(rho) else None


def effect_text(rho: float | None, goal: str) -> str:
    """``"higher is better (ρ = 0.62)"`` / ``"lower is better (...)"``; ``""`` for None.

    For a minimized metric a negative ρ (the metric falls as the value rises) means higher
    values are better."""
    if rho is None:
        return ""
    better_high = (rho < 0) == (goal == "minimize")
    return f"{'higher' if better_high else 'lower'} is better (ρ = {rho:+.2f})"


def rebuild_study(result: SweepResult) -> tuple[Any, list[str]]:
    """An in-memory Optuna study holding ``result``'s trials with a finite metric and the
    parameters that vary among them; returns ``(study, varied parameter paths)``.

    Categorical values (including lists and dicts) enter as their text labels; numeric
    bounds widen to cover every value seen (a resumed or edited sweep may exceed them).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    declared = {p.path: p for p in result.parameters}
    scored = [(t, v) for t in result.trials if (v := trial_metric(t)) is not None]
    varied = []
    distributions: dict[str, Any] = {}
    encoders: dict[str, Callable[[Any], Any]] = {}
    for path in param_paths(result):
        values = [t.params[path] for t, _ in scored if path in t.params]
        if len({value_label(v) for v in values}) < 2:
            continue
        varied.append(path)
        distributions[path], encoders[path] = _distribution(declared.get(path, ParamInfo(path, "unknown")), values)
    direction: Goal = "minimize" if result.goal == "minimize" else "maximize"
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(seed=SEED))
    trials = []
    for trial, value in scored:
        if not all(p in trial.params for p in varied):
            continue
        params = {p: encoders[p](trial.params[p]) for p in varied}
        trials.append(
            optuna.trial.create_trial(params=params, distributions={p: distributions[p] for p in varied}, value=value)
        )
    study.add_trials(trials)
    return study, varied


def importance_info(result: SweepResult) -> ImportanceInfo:
    """fANOVA importances (``optuna.importance.FanovaImportanceEvaluator``, seeded) of the
    varied parameters; a note instead when there are too few trials, nothing varies, or
    the metric is the same for every trial ("no variance")."""
    study, varied = rebuild_study(result)
    n = len(study.trials)
    if not varied:
        return ImportanceInfo([], [], n, "no parameter varies among the scored trials")
    if n < MIN_TRIALS:
        return ImportanceInfo([], [], n, f"too few scored trials ({n}; at least {MIN_TRIALS} are needed)")
    values = [t.value for t in study.trials]
    if max(values) - min(values) <= 1e-12 * max(1.0, abs(values[0])):
        return ImportanceInfo([], [], n, f"no variance: every scored trial has {result.metric} = {values[0]:.4g}")
    import random

    import optuna

    if n > MAX_TRIALS:
        keep = random.Random(SEED).sample(study.trials, MAX_TRIALS)
        study = optuna.create_study(direction=study.direction)
        study.add_trials(keep)
        n = MAX_TRIALS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            scores = optuna.importance.get_param_importances(
                study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=SEED), normalize=True
            )
        except (RuntimeError, ValueError, ZeroDivisionError) as e:
            return ImportanceInfo([], [], n, f"not computed: {e}")
    pairs = [(p, float(v)) for p, v in scores.items() if math.isfinite(v)]
    pairs.sort(key=lambda pv: -pv[1])
    rhos = [spearman_direction(result, p) for p, _ in pairs]
    return ImportanceInfo(
        [p for p, _ in pairs],
        [v for _, v in pairs],
        n,
        None,
        rhos,
        [effect_text(r, result.goal) for r in rhos],
    )


def importance_figure(info: ImportanceInfo) -> go.Figure:
    """Horizontal bars, most important on top, coloured by the direction of the effect
    (green: higher values are better, orange: lower values are better, grey: unknown or
    categorical), the direction in words beside each bar; an annotated empty figure with ``note``."""
    fig = go.Figure()
    height = max(220, 60 + 28 * len(info.params))
    fig.update_layout(
        title={"text": "Parameter importance (fANOVA)"},
        height=height,
        margin={"l": 220, "r": 30, "t": 40, "b": 50},
        plot_bgcolor="white",
        paper_bgcolor="white",
        xaxis={
            "title": {"text": "share of the metric's variance"},
            "tickformat": ".0%",
            "gridcolor": "#eee",
            "rangemode": "tozero",
        },
    )
    if info.note:
        add_empty_note(fig, info.note)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return fig
    effects = info.effects or [""] * len(info.params)
    colours = [_EFFECT_COLOURS[e.split(" ", 1)[0]] if e else _EFFECT_COLOURS[""] for e in effects]
    fig.add_trace(
        go.Bar(
            x=info.importances[::-1],
            y=[plotly_text(p) for p in info.params[::-1]],
            orientation="h",
            marker={"color": colours[::-1]},
            text=[
                f"{v:.0%}" + (f"  {plotly_text(e)}" if e else "")
                for v, e in zip(info.importances, effects, strict=True)
            ][::-1],
            textposition="auto",
            customdata=[plotly_text(e or "direction unknown (categorical or too few trials)") for e in effects[::-1]],
            hovertemplate="%{y}: %{x:.1%}<br>%{customdata}<extra></extra>",
        )
    )
    return fig


_EFFECT_COLOURS = {"higher": "#2e8b57", "lower": "#d9822b", "": "#8c9aa8"}


def _distribution(info: ParamInfo, values: list[Any]) -> tuple[Any, Callable[[Any], Any]]:
    """The Optuna distribution of one parameter and how a value is encoded for it."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if info.categories is not None or not numeric:
        labels = [value_label(c) for c in info.categories or ()]
        labels += sorted({value_label(v) for v in values} - set(labels))
        labels = list(dict.fromkeys(labels))
        if len(labels) > MAX_ONE_HOT:
            index = {label: i for i, label in enumerate(labels)}
            return IntDistribution(0, len(labels) - 1), lambda v: index[value_label(v)]
        return CategoricalDistribution(labels), value_label
    low, high = min(values), max(values)
    if info.lower is not None:
        low = min(low, info.lower)
    if info.upper is not None:
        high = max(high, info.upper)
    if info.space == "randint" and all(isinstance(v, int) for v in values):
        return IntDistribution(int(low), max(int(math.ceil(high)) - 1, int(max(values)))), int
    if info.log and low > 0:
        return FloatDistribution(float(low), float(high), log=True), float
    return FloatDistribution(float(low), float(high)), float


__all__ = ["ImportanceInfo", "importance_figure", "importance_info", "rebuild_study"]
