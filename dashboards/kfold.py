"""K-fold vs test: how the top configurations of the search hold up on held-out data.

For each re-evaluated configuration: its fold scores, their mean with a 95 % confidence
interval (Student's t, sample standard deviation, clipped to the range the metric can take:
with k = 3 folds the t interval of a loss can reach below 0), its test score and the search's own
(validation) score; across configurations: CV mean against test score with the y = x line
and the selection optimism as numbers; and pairwise paired tests over the folds.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards._format import better_phrase, domain_text, format_number, metric_domain, plotly_text
from ludwig_hpo.results import SweepResult
from ludwig_hpo.results.paired import PairedTest, paired_test, t_interval


class KFoldInfo(NamedTuple):
    """What the k-fold vs test figure draws; the lists are aligned, one item per
    re-evaluated configuration in rank order.

    Attributes:
        labels: x-axis labels, ``"config #1 (trial <id>)"``.
        ranks: the configurations' ranks in the search (1 = best).
        trial_ids: the search trial behind each configuration.
        fold_scores: each configuration's metric on its held-out folds, fold order.
        failed_folds: folds per configuration whose run did not finish.
        means: mean of the fold scores (None when there are no fold scores).
        stds: sample standard deviation of the fold scores (ddof=1); None when k < 2.
        ci_lows, ci_highs: the 95 % t confidence interval of the mean,
            ``mean ± t(0.975, k−1)·std/√k``, clipped to ``domain``; None when k < 2.
        ci_clipped: per configuration, True when its interval was clipped to ``domain``.
        test_scores: the metric on the test split, None if that run failed.
        search_scores: the search trial's best value on the sweep's split (the score it
            was selected by), None if unknown.
        cv_optimism: mean over configurations with both of (test − CV mean), signed so
            that a positive number means the test score is worse than cross-validation
            promised; None without such configurations.
        search_optimism: the same for (test − search score): how much selecting on the
            validation split flattered the configurations.
        tests: paired tests of every pair of configurations (rank order).
        metric: the metric's name, ``"<feature>/<metric>"``.
        y_title: the metric with its direction, e.g. ``"label/loss (lower is better)"``.
        goal: ``"minimize"`` or ``"maximize"``.
        domain: the range the metric can take (:func:`dashboards._format.metric_domain`).
        ci_note: how the intervals are computed, in words (says when one was clipped).
    """

    labels: list[str]
    ranks: list[int]
    trial_ids: list[str]
    fold_scores: list[list[float]]
    failed_folds: list[int]
    means: list[float | None]
    stds: list[float | None]
    ci_lows: list[float | None]
    ci_highs: list[float | None]
    test_scores: list[float | None]
    search_scores: list[float | None]
    cv_optimism: float | None
    search_optimism: float | None
    tests: list[PairedTest]
    metric: str
    y_title: str
    goal: str
    domain: tuple[float, float] = (-math.inf, math.inf)
    ci_clipped: list[bool] = []
    ci_note: str = ""


def kfold_info(result: SweepResult) -> KFoldInfo | None:
    """Summarize ``result.kfold`` (sorted by ``config_rank``); None when it is empty,
    i.e. the k-fold re-evaluation was not run."""
    if not result.kfold:
        return None
    records = sorted(result.kfold, key=lambda r: r.config_rank)
    sign = 1.0 if result.goal == "minimize" else -1.0
    search = {t.trial_id: t.objective_best for t in result.trials}
    metric = records[0].metric
    domain = metric_domain(metric)
    means: list[float | None] = []
    stds: list[float | None] = []
    lows: list[float | None] = []
    highs: list[float | None] = []
    clipped: list[bool] = []
    for record in records:
        scores = [float(s) for s in record.fold_scores]
        means.append(float(np.mean(scores)) if scores else None)
        stds.append(float(np.std(scores, ddof=1)) if len(scores) >= 2 else None)
        ci = t_interval(scores)
        low, high = (None, None) if ci is None else (max(ci[0], domain[0]), min(ci[1], domain[1]))
        clipped.append(ci is not None and (low, high) != ci)
        lows.append(low)
        highs.append(high)
    tests_ = [None if r.test_score is None else float(r.test_score) for r in records]
    searched = [search.get(r.trial_id) for r in records]
    cv_gaps = [sign * (t - m) for t, m in zip(tests_, means, strict=True) if t is not None and m is not None]
    search_gaps = [sign * (t - s) for t, s in zip(tests_, searched, strict=True) if t is not None and s is not None]
    pairs = []
    for ra, rb in combinations(records, 2):
        if ra.failed_folds or rb.failed_folds:
            pairs.append(
                PairedTest(
                    ra.config_rank,
                    rb.config_rank,
                    0,
                    None,
                    None,
                    None,
                    f"#{ra.config_rank} and #{rb.config_rank} cannot be compared fold by fold: a fold failed",
                )
            )
        else:
            pairs.append(
                paired_test(ra.config_rank, rb.config_rank, list(ra.fold_scores), list(rb.fold_scores), result.goal)
            )
    return KFoldInfo(
        labels=[f"config #{r.config_rank} (trial {r.trial_id})" for r in records],
        ranks=[r.config_rank for r in records],
        trial_ids=[r.trial_id for r in records],
        fold_scores=[[float(s) for s in r.fold_scores] for r in records],
        failed_folds=[r.failed_folds for r in records],
        means=means,
        stds=stds,
        ci_lows=lows,
        ci_highs=highs,
        test_scores=tests_,
        search_scores=searched,
        cv_optimism=float(np.mean(cv_gaps)) if cv_gaps else None,
        search_optimism=float(np.mean(search_gaps)) if search_gaps else None,
        tests=pairs,
        metric=metric,
        y_title=f"{metric} ({better_phrase(result.goal)})",
        goal=result.goal,
        domain=domain,
        ci_clipped=clipped,
        ci_note=ci_note(domain, clipped),
    )


def ci_note(domain: tuple[float, float], clipped: list[bool]) -> str:
    """How the intervals were computed, e.g. "95 % CI: Student's t with k − 1 degrees of
    freedom, clipped to the metric's range [0, ∞) (2 of 3 intervals reached past it)"."""
    text = "95 % CI: Student's t with k − 1 degrees of freedom"
    if math.isinf(domain[0]) and math.isinf(domain[1]):
        return text + "."
    n = sum(clipped)
    reached = f" ({n} of {len(clipped)} reached past it)" if n else ""
    return f"{text}, clipped to the metric's range {domain_text(domain)}{reached}."


def optimism_sentence(info: KFoldInfo) -> str:
    """The selection optimism in words, e.g. ``"On the test split the configurations
    scored 0.012 worse than their CV mean and 0.03 worse than in the search."``"""
    parts = []
    for name, gap in (("their CV mean", info.cv_optimism), ("in the search (validation)", info.search_optimism)):
        if gap is None:
            continue
        word = "worse" if gap > 0 else "better"
        parts.append(f"{format_number(abs(gap), 3)} {word} than {name}")
    if not parts:
        return "No configuration has both a test score and fold scores, so the gap is unknown."
    return "On the test split the configurations scored, on average, " + " and ".join(parts) + "."


def kfold_figure(info: KFoldInfo) -> go.Figure:
    """Draw ``info`` as two panels.

    Left: per configuration, the fold scores (small points), the fold mean with its 95 %
    t confidence interval, the search's validation score (hollow circle) and the test score
    (red diamond). Right: CV mean (x, with its interval) against test score (y) per
    configuration, with the y = x line (:func:`optimism_sentence` puts the gap in words).
    """
    labels = [plotly_text(f"#{r}") for r in info.ranks]
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.6, 0.4],
        horizontal_spacing=0.1,
        subplot_titles=(plotly_text(_ci_title(info)), "CV mean vs test (y = x: no optimism)"),
    )
    fold_x = [labels[i] for i, scores in enumerate(info.fold_scores) for _ in scores]
    fold_y = [s for scores in info.fold_scores for s in scores]
    fold_n = [n for scores in info.fold_scores for n in range(1, len(scores) + 1)]
    fig.add_trace(
        go.Scatter(
            x=fold_x,
            y=fold_y,
            mode="markers",
            name="fold score",
            marker={"size": 7, "color": "rgba(31, 95, 168, 0.45)"},
            customdata=fold_n,
            hovertemplate="fold %{customdata}: %{y:.4g}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    with_mean = [i for i, m in enumerate(info.means) if m is not None]
    fig.add_trace(
        go.Scatter(
            x=[labels[i] for i in with_mean],
            y=[info.means[i] for i in with_mean],
            mode="markers",
            name="fold mean, 95 % CI",
            marker={"size": 14, "color": "#1f5fa8", "symbol": "line-ew-open", "line": {"width": 3, "color": "#1f5fa8"}},
            error_y={
                "type": "data",
                "symmetric": False,
                "visible": True,
                "thickness": 1.5,
                "width": 10,
                "color": "#1f5fa8",
                "array": [_up(info.ci_highs[i], info.means[i]) for i in with_mean],
                "arrayminus": [_down(info.ci_lows[i], info.means[i]) for i in with_mean],
            },
            customdata=[_ci_hover(info, i) for i in with_mean],
            hovertemplate="mean %{y:.4g}<br>%{customdata}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    with_search = [i for i, s in enumerate(info.search_scores) if s is not None]
    fig.add_trace(
        go.Scatter(
            x=[labels[i] for i in with_search],
            y=[info.search_scores[i] for i in with_search],
            mode="markers",
            name="search (validation)",
            marker={"size": 10, "color": "#555", "symbol": "circle-open", "line": {"width": 2}},
            hovertemplate="search %{y:.4g}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    with_test = [i for i, t in enumerate(info.test_scores) if t is not None]
    fig.add_trace(
        go.Scatter(
            x=[labels[i] for i in with_test],
            y=[info.test_scores[i] for i in with_test],
            mode="markers",
            name="test score",
            marker={"size": 13, "color": "#d62728", "symbol": "diamond", "line": {"width": 1, "color": "white"}},
            hovertemplate="test %{y:.4g}<extra></extra>",
        ),
        row=1,
        col=1,
    )

    both = [i for i in range(len(labels)) if info.means[i] is not None and info.test_scores[i] is not None]
    fig.add_trace(
        go.Scatter(
            x=[info.means[i] for i in both],
            y=[info.test_scores[i] for i in both],
            mode="markers+text",
            name="configuration",
            showlegend=False,
            text=[labels[i] for i in both],
            textposition="top center",
            marker={"size": 11, "color": "#d62728", "symbol": "diamond"},
            error_x={
                "type": "data",
                "symmetric": False,
                "visible": True,
                "color": "#1f5fa8",
                "thickness": 1.2,
                "array": [_up(info.ci_highs[i], info.means[i]) for i in both],
                "arrayminus": [_down(info.ci_lows[i], info.means[i]) for i in both],
            },
            hovertemplate="CV mean %{x:.4g}<br>test %{y:.4g}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    span = _y_range(info)
    if span is not None:
        fig.add_trace(
            go.Scatter(
                x=span,
                y=span,
                mode="lines",
                name="y = x",
                showlegend=False,
                line={"color": "#999", "dash": "dash", "width": 1},
                hoverinfo="skip",
            ),
            row=1,
            col=2,
        )
        fig.update_xaxes(range=span, row=1, col=2)
        fig.update_yaxes(range=span, row=1, col=2)
        fig.update_yaxes(range=span, row=1, col=1)
    fig.update_layout(
        title={"text": "K-fold vs test"},
        height=460,
        margin={"l": 70, "r": 30, "t": 80, "b": 60},
        plot_bgcolor="white",
        paper_bgcolor="white",
        # folds, mean, search and test side by side within a configuration (category axis only)
        scattermode="group",
        scattergap=0.5,
        legend={"orientation": "h", "y": 1.12, "yanchor": "bottom", "x": 0, "xanchor": "left"},
    )
    fig.update_xaxes(
        type="category", categoryorder="array", categoryarray=labels, title_text="configuration", row=1, col=1
    )
    fig.update_yaxes(title_text=plotly_text(info.y_title), row=1, col=1)
    fig.update_xaxes(title_text=plotly_text(f"CV mean {info.metric}"), row=1, col=2)
    fig.update_yaxes(title_text=plotly_text(f"test {info.metric}"), row=1, col=2)
    fig.update_xaxes(gridcolor="#eee", zeroline=False)
    fig.update_yaxes(gridcolor="#eee", zeroline=False)
    return fig


def _ci_title(info: KFoldInfo) -> str:
    if math.isinf(info.domain[0]) and math.isinf(info.domain[1]):
        return "Folds, mean with 95 % CI, test"
    return f"Folds, mean with 95 % CI (within {domain_text(info.domain)}), test"


def _ci_hover(info: KFoldInfo, i: int) -> str:
    low, high = info.ci_lows[i], info.ci_highs[i]
    if low is None or high is None:
        return "95 % CI: fewer than 2 folds"
    clipped = f" (clipped to {domain_text(info.domain)})" if info.ci_clipped and info.ci_clipped[i] else ""
    return f"95 % CI [{format_number(low)}, {format_number(high)}]{clipped}"


def _up(high: float | None, mean: float | None) -> float:
    return 0.0 if high is None or mean is None else high - mean


def _down(low: float | None, mean: float | None) -> float:
    return 0.0 if low is None or mean is None else mean - low


def _y_range(info: KFoldInfo) -> list[float] | None:
    ys = [y for scores in info.fold_scores for y in scores]
    ys += [t for t in info.test_scores if t is not None]
    ys += [s for s in info.search_scores if s is not None]
    ys += [v for v in info.ci_lows + info.ci_highs + info.means if v is not None]
    ys = [y for y in ys if np.isfinite(y)]
    if not ys:
        return None
    low, high = min(ys), max(ys)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 0.5
    return [low - pad, high + pad]
