"""The metrics each output feature type reports, and whether larger is better: the one table
the schema checks ``hyperopt.metric`` against and the heads compute."""

from __future__ import annotations

#: Metrics each output feature type reports, and whether larger is better.
METRICS: dict[str, dict[str, bool]] = {
    "category": {"loss": False, "accuracy": True},
    "binary": {"loss": False, "accuracy": True, "roc_auc": True},
    "number": {"loss": False, "mae": False},
    "combined": {"loss": False},
}
