"""What the sweep asks of its tracking store: the :class:`Tracker` protocol.

Two classes implement it: :class:`~ludwig_hpo.tracking.mlflow_store.MlflowStore` (MLflow's
client in the calling process) and :class:`~ludwig_hpo.tracking.process.StoreProcess` (the same
store in a child process, each call a round trip through a pipe). Code above the store (the
sweep, :class:`~ludwig_hpo.tracking.sink.MlflowSink`, the logged model) is typed against this
protocol and works with either.

Every method runs on the driver process, on whichever thread calls it (the sink calls from its
writer thread); an implementation serves calls one at a time, in the order they arrive. Run ids
are MLflow's 32-character hex strings. Steps are epochs (1-based; 0 for values logged once).
Timestamps are milliseconds since the Unix epoch. A run's status is one of MLflow's ``RUNNING``,
``FINISHED``, ``FAILED``, ``KILLED``. Values MLflow cannot hold (non-finite or non-numeric
metrics, over-long params and tags) are skipped or cut by the implementation, never raised.
Errors of the store (a refused write, an unknown run id) are MLflow's own exceptions;
:class:`~ludwig_hpo.errors.TrackingError` when the store cannot be reached at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ludwig_hpo.train.report_keys import OBJECTIVE


class Tracker(Protocol):
    """The tracking store of one experiment, as the sweep uses it (driver process only)."""

    #: The tracking URI the runs are written to (``sqlite:///...``, ``http://...``, a folder).
    uri: str
    #: The MLflow experiment the runs are in (its id, as the UI's addresses name it).
    experiment_id: str

    def start_run(
        self,
        name: str,
        *,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> str:
        """Create a RUNNING run named ``name`` (a child of ``parent_id`` when given, through
        the ``mlflow.parentRunId`` tag) with ``tags`` (values as strings) and ``params``;
        returns its run id."""
        ...

    def reopen_run(self, run_id: str) -> None:
        """Mark an existing run RUNNING again (a resumed sweep continues its runs)."""
        ...

    def clear_tags(self, run_id: str, keys: tuple[str, ...]) -> None:
        """Delete the tags ``keys`` the run holds (those it does not hold are skipped)."""
        ...

    def end_run(self, run_id: str, status: str) -> None:
        """Close a run as ``FINISHED``, ``FAILED`` or ``KILLED``."""
        ...

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        """Log parameters once (a logged parameter cannot change); lists and dicts as JSON."""
        ...

    def log_metrics(self, run_id: str, metrics: dict[str, Any], step: int) -> None:
        """Log the finite numeric values of ``metrics`` at ``step``; others are skipped."""
        ...

    def log_steps(
        self, run_id: str, *, params: dict[str, Any], tags: dict[str, Any], metrics: list[tuple[str, Any, int, int]]
    ) -> None:
        """Parameters, tags and ``(name, value, step, timestamp ms)`` metrics in one write
        (the store splits it at MLflow's per-request limits)."""
        ...

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        """Set tags (values as strings); a tag set again takes the new value."""
        ...

    def log_text(self, run_id: str, text: str, file_name: str) -> None:
        """Write ``text`` as the artifact file ``file_name`` of the run."""
        ...

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        """Copy a file or a folder (``path``, on the driver's disk) into the run's artifacts,
        under ``artifact_path`` when given."""
        ...

    def log_model(self, run_id: str, name: str, path: Path) -> str:
        """Log the saved MLflow model folder ``path`` as a logged model named ``name``, output
        of ``run_id`` (listed in the run's and the experiment's model views); returns its
        model id (``models:/<id>``)."""
        ...

    def register_model_version(self, name: str, run_id: str, artifact_path: str, model_id: str | None = None) -> str:
        """Register a model of ``run_id`` (the logged model ``model_id`` when given, else the
        run's artifact folder ``artifact_path``) as a new version of the registered model
        ``name`` (created when missing); returns the version number."""
        ...

    def children_by_tag(self, parent_id: str, tag: str, *, status: str | None = None) -> dict[str, str]:
        """``{tag value: run id}`` of the child runs of ``parent_id`` that carry ``tag`` (the
        earliest run wins if two share a value); with ``status``, only runs in that status."""
        ...

    def last_step(self, run_id: str, metric: str = OBJECTIVE) -> int:
        """The largest step logged for ``metric`` in ``run_id`` (0 when none)."""
        ...

    def step_history(self, run_id: str) -> dict[str, dict[int, float]]:
        """Every metric logged in ``run_id``, by name as written: ``{name: {step: value}}``."""
        ...

    def close_running_children(self, parent_id: str, tags: dict[str, Any]) -> list[str]:
        """End every child run of ``parent_id`` still RUNNING as KILLED, with ``tags``; returns
        their run names."""
        ...

    def close(self) -> None:
        """Release the store after the calls made so far (safe to call twice); no call may
        follow."""
        ...
