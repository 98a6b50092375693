"""Links from the report to the MLflow UI: each trial's run page."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote


@dataclass(frozen=True)
class RunIds:
    """Where a sweep's trials live in MLflow.

    Attributes:
        experiment_id: the sweep's MLflow experiment.
        by_trial: trial id -> the MLflow run id of that trial.
    """

    experiment_id: str
    by_trial: Mapping[str, str] = field(default_factory=dict)


def run_url(ui_url: str, experiment_id: str, run_id: str) -> str:
    """The MLflow UI's page of one run: ``<ui>/#/experiments/<experiment id>/runs/<run id>``. Pure.

    ``ui_url`` is the UI's address; a page address of it (``http://host:5000/#/experiments/1``,
    as ``hpo ui`` prints it) works too: its ``#`` part is dropped."""
    base = ui_url.split("#", 1)[0].rstrip("/")
    return f"{base}/#/experiments/{quote(experiment_id, safe='')}/runs/{quote(run_id, safe='')}"


__all__ = ["RunIds", "run_url"]
