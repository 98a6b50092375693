"""Learning curves: the sweep's metric per epoch for the top trials, the others faint behind."""

from __future__ import annotations

import math
from typing import NamedTuple

import plotly.graph_objects as go

from dashboards._format import add_empty_note, metric_title, plotly_text, trial_metric
from dashboards.scale import add_scale_toggle
from ludwig_hpo.results import SweepResult

TOP_N = 5
MAX_BACKGROUND = 300  # faint curves of the other trials, at most this many (the latest)


class Curve(NamedTuple):
    """One trial's metric per epoch.

    Attributes:
        trial_id: the trial.
        status: the trial's state label (``TrialRecord.label``).
        epochs: 1-based epochs with a finite value.
        values: the sweep's metric at those epochs (its own units).
        rank: 1 for the best trial, 2 for the next...; None for a trial outside the top.
    """

    trial_id: str
    status: str
    epochs: list[int]
    values: list[float]
    rank: int | None


class CurvesInfo(NamedTuple):
    """What the learning-curves figure draws.

    Attributes:
        top: the ``TOP_N`` best trials' curves, best first.
        others: the other trials' curves (faint), at most ``MAX_BACKGROUND``.
        metric_title: the metric with its direction.
    """

    top: list[Curve]
    others: list[Curve]
    metric_title: str


def curves_info(result: SweepResult, top_n: int = TOP_N) -> CurvesInfo:
    """Per-epoch curves of the ``top_n`` best trials (by ``objective_best``) and of the rest."""
    sign = 1.0 if result.goal == "minimize" else -1.0
    scored = [(t, v) for t in result.trials if (v := trial_metric(t)) is not None]
    scored.sort(key=lambda tv: sign * tv[1])
    top_ids = {t.trial_id: i for i, (t, _) in enumerate(scored[:top_n], start=1)}
    top: list[Curve] = []
    others: list[Curve] = []
    for trial in result.trials:
        points = [(h.epoch, h.objective) for h in trial.history if math.isfinite(h.objective)]
        if not points:
            continue
        curve = Curve(
            trial.trial_id, trial.label, [e for e, _ in points], [v for _, v in points], top_ids.get(trial.trial_id)
        )
        (top if curve.rank is not None else others).append(curve)
    top.sort(key=lambda c: c.rank or 0)
    return CurvesInfo(top, others[-MAX_BACKGROUND:], metric_title(result))


_PALETTE = ("#1f5fa8", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def curves_figure(info: CurvesInfo) -> go.Figure:
    """Top trials as coloured lines with markers (legend ``#rank trial``), the others grey; a
    log metric axis when the values span a decade, with buttons to switch."""
    fig = go.Figure()
    fig.update_layout(
        title={"text": "Learning curves"},
        height=420,
        margin={"l": 70, "r": 30, "t": 40, "b": 60},
        xaxis={"title": {"text": "epoch"}, "gridcolor": "#eee", "zeroline": False, "tick0": 1},
        yaxis={"title": {"text": plotly_text(info.metric_title)}, "gridcolor": "#eee", "zeroline": False},
        plot_bgcolor="white",
        paper_bgcolor="white",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"},
    )
    if not info.top:
        add_empty_note(fig, "No trial reported a metric, so there are no curves to draw.")
        return fig
    if info.others:
        # one trace for every background curve (None breaks the line): cheap for 1,000 trials
        xs: list[float | None] = []
        ys: list[float | None] = []
        for c in info.others:
            xs += [*c.epochs, None]
            ys += [*c.values, None]
        fig.add_trace(
            go.Scattergl(
                x=xs,
                y=ys,
                mode="lines",
                name="other trials",
                hoverinfo="skip",
                line={"color": "rgba(120,120,120,0.25)", "width": 1},
            )
        )
    for c in info.top:
        rank = c.rank or 1  # every top curve has its rank
        stopped = "" if c.status == "completed" else f" ({c.status})"
        fig.add_trace(
            go.Scatter(
                x=c.epochs,
                y=c.values,
                mode="lines+markers",
                name=plotly_text(f"#{c.rank} {c.trial_id}{stopped}"),
                line={"color": _PALETTE[(rank - 1) % len(_PALETTE)], "width": 2},
                marker={"size": 5},
                hovertemplate=plotly_text(f"#{c.rank} {c.trial_id}") + "<br>epoch %{x}: %{y:.4g}<extra></extra>",
            )
        )
    add_scale_toggle(fig, [v for c in info.top + info.others for v in c.values])
    max_epoch = max(e for c in info.top + info.others for e in c.epochs)
    fig.update_xaxes(dtick=max(1, math.ceil(max_epoch / 12)))
    return fig


__all__ = ["Curve", "CurvesInfo", "curves_figure", "curves_info"]
