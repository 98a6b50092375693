"""Log or linear metric axes, and the buttons that switch between them.

A loss of good trials (0.09-0.25) next to trials stuck at chance (~2.3) is unreadable on a
linear axis: the good ones are squashed at the bottom. A metric axis whose values are all
positive and span at least a decade starts on a log scale; every axis of positive values
gets two buttons (plotly ``updatemenus``) to switch, so the reader decides.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

AxisType = Literal["linear", "log"]
#: max / min of the values from which a metric axis starts on a log scale
DECADE = 10.0


def metric_axis_type(values: Iterable[float | None]) -> AxisType:
    """``"log"`` when every finite value is > 0 and the largest is at least :data:`DECADE`
    times the smallest, else ``"linear"``. Pure."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite or min(finite) <= 0:
        return "linear"
    return "log" if max(finite) / min(finite) >= DECADE else "linear"


def can_log(values: Iterable[float | None]) -> bool:
    """True when every finite value is > 0 (a log axis can show them all)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return bool(finite) and min(finite) > 0


#: Height of the toggle's buttons in px (plotly's at font size 11, with their border).
TOGGLE_HEIGHT_PX = 32


def add_scale_toggle(
    fig: Any, values: Sequence[float | None], axes: Sequence[str] = ("yaxis",), below_px: int = 40
) -> AxisType:
    """Set ``axes`` (layout names: ``"yaxis"``, ``"yaxis2"``...) of ``fig`` to
    :func:`metric_axis_type` of ``values`` and, when a log axis can show them, add
    "log scale" / "linear scale" buttons (the active one pressed) at the figure's bottom
    right, their top ``below_px`` px under the plot (the top right holds plotly's mode bar).
    A figure whose bottom-right panel has an x-axis title there passes a ``below_px`` that
    clears it, and a bottom margin of at least ``below_px`` + :data:`TOGGLE_HEIGHT_PX`.
    Returns the type set."""
    kind = metric_axis_type(values)
    fig.update_layout({name: {"type": kind} for name in axes})
    if not can_log(values):
        return kind
    buttons = [
        {"label": label, "method": "relayout", "args": [{f"{name}.type": scale for name in axes}]}
        for label, scale in (("log scale", "log"), ("linear scale", "linear"))
    ]
    fig.update_layout(
        updatemenus=[
            {
                "type": "buttons",
                "direction": "left",
                "buttons": buttons,
                "active": 0 if kind == "log" else 1,
                "showactive": True,
                "x": 1.0,
                "xanchor": "right",
                "y": 0.0,
                "yanchor": "top",
                "pad": {"t": below_px, "r": 0},
                "font": {"size": 11},
                "bgcolor": "white",
                "bordercolor": "#ccc",
            }
        ]
    )
    return kind


__all__ = ["DECADE", "TOGGLE_HEIGHT_PX", "add_scale_toggle", "can_log", "metric_axis_type"]
