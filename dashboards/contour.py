"""Contour of the metric over the two most important parameters, as in optuna-dashboard.

The trials are scattered points; the surface between them is a linear interpolation
(``scipy.interpolate.griddata``) on a grid in the axes' own coordinates (log10 of a
log-scaled parameter, the index of a category), drawn only inside the trials' convex hull.
The trials themselves are drawn on top, so every coloured area can be traced to them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import plotly.graph_objects as go

from dashboards._format import add_empty_note, plotly_text
from dashboards.slices import ParamValues, axis_layout, short_label, slice_info
from ludwig_hpo.results import SweepResult

GRID = 40  # grid points per axis


class ContourInfo(NamedTuple):
    """What the contour figure draws.

    Attributes:
        x, y: the two most important varied parameters (by importance), x the first.
        trial_ids, values: the scored trials having both, and their metric.
        grid_x, grid_y: the grid's coordinates in axis units (original units on a log or
            linear axis, the category's index on a category axis).
        grid_z: ``len(grid_y)`` rows of ``len(grid_x)`` interpolated values (None outside
            the trials' hull); empty when the points cannot span a surface.
        metric_title: the metric with its direction.
        reversescale: True when low values are better (the better end stays dark).
        note: why nothing (or only the points) is drawn, else None.
    """

    x: ParamValues | None
    y: ParamValues | None
    trial_ids: list[str]
    values: list[float]
    grid_x: list[float]
    grid_y: list[float]
    grid_z: list[list[float | None]]
    metric_title: str
    reversescale: bool
    note: str | None


def contour_info(result: SweepResult, importance: list[str] | None = None) -> ContourInfo:
    """The contour of ``result``'s metric over its two most important varied parameters. Pure."""
    slices = slice_info(result, importance)
    reverse = result.goal == "minimize"
    if slices.note or len(slices.params) < 2:
        why = slices.note or "The contour needs two parameters that vary among the scored trials."
        return ContourInfo(None, None, [], [], [], [], [], slices.metric_title, reverse, why)
    px, py = slices.params[0], slices.params[1]
    keep = [i for i in range(len(slices.values)) if px.values[i] is not None and py.values[i] is not None]
    x = px._replace(values=[px.values[i] for i in keep])
    y = py._replace(values=[py.values[i] for i in keep])
    ids = [slices.trial_ids[i] for i in keep]
    values = [slices.values[i] for i in keep]
    gx, gy, gz, note = _surface(x, y, values)
    return ContourInfo(x, y, ids, values, gx, gy, gz, slices.metric_title, reverse, note)


def _coords(param: ParamValues) -> np.ndarray:
    if param.kind == "category":
        index = {c: i for i, c in enumerate(param.categories)}
        return np.array([index[v] for v in param.values], dtype=float)
    numbers = np.array(param.values, dtype=float)
    return np.log10(numbers) if param.kind == "log" else numbers


def _from_coords(param: ParamValues, grid: np.ndarray) -> list[float]:
    return [float(v) for v in (10.0**grid if param.kind == "log" else grid)]


def _surface(
    x: ParamValues, y: ParamValues, values: list[float]
) -> tuple[list[float], list[float], list[list[float | None]], str | None]:
    from scipy.interpolate import griddata

    cx, cy = _coords(x), _coords(y)
    if len(values) < 3 or np.ptp(cx) == 0 or np.ptp(cy) == 0:
        return [], [], [], "Too few distinct points for a surface; the trials are shown as points."
    gx = np.linspace(cx.min(), cx.max(), GRID)
    gy = np.linspace(cy.min(), cy.max(), GRID)
    mx, my = np.meshgrid(gx, gy)
    try:
        z = griddata(np.column_stack([cx, cy]), np.array(values), (mx, my), method="linear")
    except Exception:  # points on a line: scipy's Qhull cannot triangulate them
        return [], [], [], "The trials lie on a line, so there is no surface; they are shown as points."
    rows = [[None if math.isnan(v) else float(v) for v in row] for row in z]
    return _from_coords(x, gx), _from_coords(y, gy), rows, None


def contour_figure(info: ContourInfo) -> go.Figure:
    """The interpolated surface as filled contours, the trials as points on top."""
    fig = go.Figure()
    fig.update_layout(
        title={"text": "Contour"},
        height=480,
        margin={"l": 80, "r": 30, "t": 50, "b": 60},
        plot_bgcolor="white",
        paper_bgcolor="white",
    )
    if info.x is None or info.y is None:
        add_empty_note(fig, info.note or "Nothing to draw.")
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        fig.update_layout(height=220)
        return fig
    scale = dict(colorscale="Blues", reversescale=info.reversescale)
    if info.grid_z:
        fig.add_trace(
            go.Contour(
                x=info.grid_x,
                y=info.grid_y,
                z=info.grid_z,
                **scale,
                contours={"coloring": "heatmap"},
                connectgaps=False,
                colorbar={"title": {"text": plotly_text(info.metric_title), "side": "right"}},
                hovertemplate="%{x:.4g}, %{y:.4g}: %{z:.4g} (interpolated)<extra></extra>",
                name="interpolated",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=_positions(info.x),
            y=_positions(info.y),
            mode="markers",
            name="trials",
            showlegend=False,
            marker={
                "size": 9,
                "color": info.values,
                **scale,
                "line": {"width": 1, "color": "white"},
                "showscale": not info.grid_z,
            },
            customdata=[[plotly_text(t), v] for t, v in zip(info.trial_ids, info.values, strict=True)],
            hovertemplate="trial %{customdata[0]}: %{customdata[1]:.4g}<extra></extra>",
        )
    )
    if info.note:
        fig.add_annotation(
            text=plotly_text(info.note), x=0, y=1.02, xref="paper", yref="paper", showarrow=False, xanchor="left"
        )
    fig.update_xaxes(_numeric_category(axis_layout(info.x), info.x), gridcolor="#eee", zeroline=False)
    fig.update_yaxes(_numeric_category(axis_layout(info.y), info.y), gridcolor="#eee", zeroline=False)
    return fig


def _positions(param: ParamValues) -> list[float]:
    """Where each trial sits on the axis: the category's index on a category axis."""
    if param.kind == "category":
        index = {c: i for i, c in enumerate(param.categories)}
        return [float(index[v]) for v in param.values]
    return [float(v) for v in param.values]


def _numeric_category(layout: dict[str, Any], param: ParamValues) -> dict[str, Any]:
    """A category axis under a contour: the grid is in category indices, so the axis is
    linear with the categories as tick labels at their indices."""
    if param.kind != "category":
        return layout
    labels = [short_label(plotly_text(c)) for c in param.categories]
    return {
        "type": "linear",
        "title": layout["title"],
        "tickvals": list(range(len(labels))),
        "ticktext": labels,
    }


__all__ = ["ContourInfo", "contour_figure", "contour_info"]
