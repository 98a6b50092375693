"""K-fold vs test: how the top configurations of the search hold up on held-out data."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go

from dashboards._format import better_phrase, plotly_text
from ludwig_hpo.results import SweepResult


class KFoldInfo(NamedTuple):
    """What the k-fold vs test figure draws; the lists are aligned, one item per
    re-evaluated configuration in rank order.

    Attributes:
        labels: x-axis labels, ``"config #1 (trial <id>)"``.
        trial_ids: the search trial behind each configuration.
        fold_scores: each configuration's metric on its held-out folds, fold order.
        means: mean of the fold scores (None when there are no fold scores).
        stds: sample standard deviation of the fold scores (ddof=1); None when k < 2.
        test_scores: the metric on the test split, None if that run failed.
        metric: the metric's name, ``"<feature>/<metric>"``.
        y_title: the metric with its direction, e.g. ``"label/loss (lower is better)"``.
    """

    labels: list[str]
    trial_ids: list[str]
    fold_scores: list[list[float]]
    means: list[float | None]
    stds: list[float | None]
    test_scores: list[float | None]
    metric: str
    y_title: str


def kfold_info(result: SweepResult) -> KFoldInfo | None:
    """Summarize ``result.kfold`` (sorted by ``config_rank``); None when it is empty,
    i.e. the k-fold re-evaluation was not run."""
    if not result.kfold:
        return None
    records = sorted(result.kfold, key=lambda r: r.config_rank)
    means: list[float | None] = []
    stds: list[float | None] = []
    for record in records:
        scores = np.asarray(record.fold_scores, dtype=float)
        means.append(float(scores.mean()) if scores.size else None)
        stds.append(float(scores.std(ddof=1)) if scores.size >= 2 else None)
    metric = records[0].metric
    return KFoldInfo(
        labels=[f"config #{r.config_rank} (trial {r.trial_id})" for r in records],
        trial_ids=[r.trial_id for r in records],
        fold_scores=[[float(s) for s in r.fold_scores] for r in records],
        means=means,
        stds=stds,
        test_scores=[None if r.test_score is None else float(r.test_score) for r in records],
        metric=metric,
        y_title=f"{metric} ({better_phrase(result.goal)})",
    )


def kfold_figure(info: KFoldInfo) -> go.Figure:
    """Draw ``info``: fold scores as small points, the fold mean with a ±1 std error bar,
    and the test score as a red diamond, per configuration."""
    labels = [plotly_text(label) for label in info.labels]
    fig = go.Figure()
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
        )
    )
    with_mean = [i for i, m in enumerate(info.means) if m is not None]
    fig.add_trace(
        go.Scatter(
            x=[labels[i] for i in with_mean],
            y=[info.means[i] for i in with_mean],
            mode="markers",
            name="fold mean ± std",
            marker={
                "size": 12,
                "color": "#1f5fa8",
                "symbol": "line-ew-open",
                "line": {"width": 3, "color": "#1f5fa8"},
            },
            error_y={
                "type": "data",
                "array": [info.stds[i] or 0.0 for i in with_mean],
                "visible": True,
                "thickness": 1.5,
                "width": 10,
                "color": "#1f5fa8",
            },
            hovertemplate="mean %{y:.4g}<extra></extra>",
        )
    )
    with_test = [i for i, t in enumerate(info.test_scores) if t is not None]
    fig.add_trace(
        go.Scatter(
            x=[labels[i] for i in with_test],
            y=[info.test_scores[i] for i in with_test],
            mode="markers",
            name="test score",
            marker={
                "size": 13,
                "color": "#d62728",
                "symbol": "diamond",
                "line": {"width": 1, "color": "white"},
            },
            hovertemplate="test %{y:.4g}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": "K-fold vs test"},
        height=420,
        margin={"l": 70, "r": 30, "t": 60, "b": 60},
        xaxis={"type": "category", "categoryorder": "array", "categoryarray": labels},
        scattermode="group",  # folds, mean and test side by side within a configuration
        scattergap=0.55,
        yaxis={"title": {"text": plotly_text(info.y_title)}, "range": _y_range(info)},
        plot_bgcolor="white",
        paper_bgcolor="white",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"},
    )
    fig.update_xaxes(gridcolor="#eee")
    fig.update_yaxes(gridcolor="#eee", zeroline=False)
    return fig


def _y_range(info: KFoldInfo) -> list[float] | None:
    # Grouped scatter traces make plotly include 0 in the range; keep to the data.
    ys = [y for scores in info.fold_scores for y in scores]
    ys += [t for t in info.test_scores if t is not None]
    for mean, std in zip(info.means, info.stds, strict=True):
        if mean is not None:
            ys += [mean - (std or 0.0), mean + (std or 0.0)]
    ys = [y for y in ys if np.isfinite(y)]
    if not ys:
        return None
    low, high = min(ys), max(ys)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 0.5
    return [low - pad, high + pad]
