"""MLflow tracking from the sweep driver only: one parent run per sweep, child runs nested
under it via the ``mlflow.parentRunId`` tag. MLflow's limits (parameter length, parameters
per batch, non-finite values) are handled here and nowhere else; keys are spelled by
:mod:`ludwig_hpo.tracking.names`.

Only the driver talks to the store, so a new SQLite store is created (and its schema
migrated) by exactly one process.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ludwig_hpo.errors import TrackingError
from ludwig_hpo.tracking.layout import EXPERIMENT_KIND_MODEL_TRAINING, EXPERIMENT_KIND_TAG, PARENT_RUN_ID_TAG
from ludwig_hpo.tracking.models import log_model_folder, register_version
from ludwig_hpo.tracking.names import ROOT_PARAM_KEY, mlflow_key, name_of_key
from ludwig_hpo.tracking.protocol import Tracker
from ludwig_hpo.tracking.resolve import EMBEDDED_ARTIFACTS_FOLDER
from ludwig_hpo.train.report_keys import OBJECTIVE


def _chunks(items: list, n: int) -> Iterable[list]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def param_value(value: Any) -> str:
    """A parameter value as MLflow shows it: scalars as-is, lists/dicts as compact JSON,
    cut to MLflow's length limit."""
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

    text = value if isinstance(value, str) else json.dumps(value, default=str, separators=(", ", ": "))
    return text if len(text) <= MAX_PARAM_VAL_LENGTH else text[: MAX_PARAM_VAL_LENGTH - 3] + "..."


#: MLflow's name for the ``"."`` parameter (partial config blocks merged at the root).
ROOT_PARAM_NAME = ROOT_PARAM_KEY


def param_name(name: str) -> str:
    """A parameter path as an MLflow parameter key (:func:`~ludwig_hpo.tracking.names.mlflow_key`)."""
    return mlflow_key(name)


def metric_name(name: str) -> str:
    """A metric name as an MLflow metric key (:func:`~ludwig_hpo.tracking.names.mlflow_key`)."""
    return mlflow_key(name)


def _tags(tags: dict[str, Any]) -> list[Any]:
    """Tags as MLflow ``RunTag`` entities: keys as MLflow keys, values as strings cut to MLflow's tag length."""
    from mlflow.entities import RunTag
    from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

    return [RunTag(mlflow_key(k), str(v)[:MAX_TAG_VAL_LENGTH]) for k, v in tags.items()]


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def quiet_mlflow_logs() -> None:
    """MLflow's and Alembic's INFO lines (schema creation and migration) off: they are not for
    the sweep's console. The process that opens a store."""
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def sqlalchemy_engine(client) -> Any:
    """The SQLAlchemy engine of an ``MlflowClient`` on a database store; None where its MLflow
    version does not expose it (or the store is not a database)."""
    return getattr(getattr(getattr(client, "_tracking_client", None), "store", None), "engine", None)


def _tune_sqlite(client) -> None:
    """Write-ahead logging for the embedded SQLite store (the process that writes the store).

    SQLite's default rollback journal syncs the disk several times per transaction (the
    journal, the database, the journal's removal), each a wait for the disk (a long one on a
    shared disk), and the sink writes a few times per trial. With a write-ahead log and
    ``synchronous=NORMAL`` a commit appends to the log without waiting for the disk; the log
    is synced when it is folded into the database. A committed write survives the driver
    being killed (it is in the operating system's cache); only a power loss or an operating
    system crash can lose the last commits, never corrupt the store. The journal mode is kept
    by the database file (readers such as ``mlflow ui`` use it too); ``synchronous`` is set
    on each of the writer's connections (``bench/bookkeeping.py`` times a trial's writes). An
    MLflow version whose client does
    not expose its SQLAlchemy engine keeps SQLite's defaults."""
    import sqlalchemy

    engine = sqlalchemy_engine(client)
    if engine is None:
        return
    if not sqlalchemy.event.contains(engine, "connect", _sqlite_pragmas):
        sqlalchemy.event.listen(engine, "connect", _sqlite_pragmas)
        engine.dispose()  # pooled connections opened before the listener get the pragmas too


#: Seconds to wait for an MLflow server's health check (MLflow's own client retries for minutes).
SERVER_CHECK_TIMEOUT_S = 10.0


def check_server(
    uri: str,
    *,
    key: str | None = "tracking.uri",
    fix: str = "start it (e.g. mlflow server --host 127.0.0.1 --port 5000), fix the URI, "
    "or remove tracking.uri to use the embedded store",
) -> None:
    """Fail fast, in one line, when an MLflow server does not answer its health check
    (within :data:`SERVER_CHECK_TIMEOUT_S` seconds).

    Args:
        key, fix: the key path and the fix the error names (they depend on where the URI came from).

    Raises:
        TrackingError: connection refused, timeout, or an HTTP error status.
    """
    import urllib.error
    import urllib.request

    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=SERVER_CHECK_TIMEOUT_S) as r:
            if r.status == 200:
                return
            reason = f"HTTP {r.status}"
    except urllib.error.HTTPError as e:
        reason = f"HTTP {e.code}"
    except (urllib.error.URLError, OSError) as e:
        reason = str(getattr(e, "reason", e))
    raise TrackingError(f"the MLflow server does not answer ({reason})", source=uri, key=key, fix=fix)


class MlflowStore(Tracker):
    """Runs of one experiment in one tracking store: the :class:`~ludwig_hpo.tracking.protocol.Tracker`
    in the calling process. Driver process only.

    Args:
        uri: tracking URI (``sqlite:///...``, ``http://127.0.0.1:5000``, a folder...).
        experiment: experiment name (created if missing).
        artifact_location: where a new experiment stores artifacts (a folder), or None
            for the server's default.

    Raises:
        TrackingError: the store cannot be reached or written (checked at construction).
    """

    def __init__(self, uri: str, experiment: str, artifact_location: Path | None = None) -> None:
        from mlflow.tracking import MlflowClient

        quiet_mlflow_logs()
        if uri.startswith(("http://", "https://")):
            check_server(uri)
        if uri.startswith("sqlite:///"):
            folder = Path(uri.removeprefix("sqlite:///")).parent
            if not folder.is_dir():
                raise TrackingError(
                    f"the folder of the SQLite store does not exist: {folder}",
                    source=uri,
                    key="tracking.uri",
                    fix="create the folder or fix the path",
                )
            # a local store keeps artifacts beside it (MLflow's default is ./mlruns of the current folder)
            artifact_location = artifact_location or folder / EMBEDDED_ARTIFACTS_FOLDER
        self.uri = uri
        try:
            self.client = MlflowClient(tracking_uri=uri)
            if uri.startswith("sqlite:///"):
                _tune_sqlite(self.client)
            exp = self.client.get_experiment_by_name(experiment)
            if exp is not None and exp.lifecycle_stage == "deleted":
                raise TrackingError(
                    f"experiment {experiment!r} is deleted in this store",
                    source=uri,
                    key="tracking.experiment",
                    fix=f"restore it (mlflow experiments restore --experiment-id {exp.experiment_id}) "
                    "or choose another tracking.experiment",
                )
            if exp is None:
                loc = artifact_location.resolve().as_uri() if artifact_location else None
                kind = {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND_MODEL_TRAINING}  # the UI opens on its runs, not traces
                self.experiment_id = self.client.create_experiment(experiment, artifact_location=loc, tags=kind)
            else:
                self.experiment_id = exp.experiment_id
        except TrackingError:
            raise
        except Exception as e:
            first = (str(e).splitlines() or [type(e).__name__])[0][:300]
            raise TrackingError(
                f"cannot use the MLflow store: {first}",
                source=uri,
                key="tracking.uri",
                fix="start the server, fix the URI, or remove tracking.uri to use the embedded store",
            ) from None

    # -------------------------------------------------------------------- runs
    def start_run(
        self,
        name: str,
        *,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> str:
        """Create a RUNNING run (a child of ``parent_id`` when given); returns its run id."""
        all_tags = {mlflow_key(k): str(v) for k, v in (tags or {}).items()}
        if parent_id:
            all_tags[PARENT_RUN_ID_TAG] = parent_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        if params:
            self.log_params(run.info.run_id, params)
        return run.info.run_id

    def reopen_run(self, run_id: str) -> None:
        """Mark an existing run RUNNING again (a resumed sweep continues its runs)."""
        self.client.update_run(run_id, status="RUNNING")

    def clear_tags(self, run_id: str, keys: tuple[str, ...]) -> None:
        """Delete the tags ``keys`` the run holds (MLflow refuses to delete a missing tag)."""
        held = self.client.get_run(run_id).data.tags
        for key in keys:
            if key in held:
                self.client.delete_tag(run_id, key)

    def children_by_tag(self, parent_id: str, tag: str, *, status: str | None = None) -> dict[str, str]:
        """``{tag value: run id}`` of the child runs of ``parent_id`` that carry ``tag``
        (the earliest run wins if two share a value); with ``status`` (``RUNNING``,
        ``FINISHED``, ...), only the runs in that status."""
        found: dict[str, str] = {}
        token = None
        query = f"tags.`{PARENT_RUN_ID_TAG}` = '{parent_id}'" + (
            f" and attributes.status = '{status}'" if status else ""
        )
        while True:
            page = self.client.search_runs(
                [self.experiment_id], query, order_by=["attributes.start_time DESC"], max_results=1000, page_token=token
            )
            for run in page:
                if tag in run.data.tags:
                    found[run.data.tags[tag]] = run.info.run_id
            token = page.token
            if not token:
                return found

    def close_running_children(self, parent_id: str, tags: dict[str, Any]) -> list[str]:
        """End every child run of ``parent_id`` still RUNNING as KILLED with ``tags``; returns
        their names. Driver only (a resumed sweep, at its end: runs of trials that started
        after Tune last saved its state and were lost with the interrupted driver)."""
        names = []
        for run in self.client.search_runs(
            [self.experiment_id],
            f"tags.`{PARENT_RUN_ID_TAG}` = '{parent_id}' and attributes.status = 'RUNNING'",
            max_results=1000,
        ):
            self.set_tags(run.info.run_id, tags)
            self.end_run(run.info.run_id, "KILLED")
            names.append(run.info.run_name)
        return names

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        """Log parameters (values via :func:`param_value`), at most 100 per request."""
        from mlflow.entities import Param
        from mlflow.utils.validation import MAX_PARAMS_TAGS_PER_BATCH

        items = [Param(param_name(k), param_value(v)) for k, v in params.items()]
        for chunk in _chunks(items, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, params=chunk)

    def log_metrics(self, run_id: str, metrics: dict[str, Any], step: int) -> None:
        """Log the finite numeric values of ``metrics`` at ``step`` (epoch); others are skipped."""
        from mlflow.entities import Metric
        from mlflow.utils.validation import MAX_METRICS_PER_BATCH

        now = int(time.time() * 1000)
        items = [
            Metric(metric_name(k), float(v), now, step)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ]
        for chunk in _chunks(items, MAX_METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=chunk)

    def log_batch(
        self, run_id: str, *, params: dict[str, Any], tags: dict[str, Any], metrics: dict[str, Any], step: int
    ) -> None:
        """:meth:`log_params`, :meth:`set_tags` and :meth:`log_metrics` in one write when within
        MLflow's per-request limits (each write to a SQLite store is a transaction, with a
        fixed cost of its own), else in as many as needed."""
        from mlflow.entities import Metric, Param
        from mlflow.utils.validation import MAX_ENTITIES_PER_BATCH, MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

        now = int(time.time() * 1000)
        p = [Param(param_name(k), param_value(v)) for k, v in params.items()]
        t = _tags(tags)
        m = [
            Metric(metric_name(k), float(v), now, step)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ]
        if (
            len(p) <= MAX_PARAMS_TAGS_PER_BATCH
            and len(t) <= MAX_PARAMS_TAGS_PER_BATCH
            and len(m) <= MAX_METRICS_PER_BATCH
            and len(p) + len(t) + len(m) <= MAX_ENTITIES_PER_BATCH
        ):
            if p or t or m:
                self.client.log_batch(run_id, metrics=m, params=p, tags=t)
            return
        self.log_params(run_id, params)
        self.set_tags(run_id, tags)
        self.log_metrics(run_id, metrics, step)

    def log_steps(
        self, run_id: str, *, params: dict[str, Any], tags: dict[str, Any], metrics: list[tuple[str, Any, int, int]]
    ) -> None:
        """Parameters, tags and metrics logged at several steps (``(name, value, step,
        timestamp ms)``; non-finite and non-numeric values skipped) in one request, which
        MLflow's client splits at its per-request limits: one SQLite transaction for the
        events of a trial that queued up while the previous write ran."""
        from mlflow.entities import Metric, Param

        p = [Param(param_name(k), param_value(v)) for k, v in params.items()]
        t = _tags(tags)
        m = [
            Metric(metric_name(k), float(v), ms, step)
            for k, v, step, ms in metrics
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ]
        if p or t or m:
            self.client.log_batch(run_id, metrics=m, params=p, tags=t)

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        """Set tags (values as strings, cut to MLflow's tag length)."""
        from mlflow.utils.validation import MAX_PARAMS_TAGS_PER_BATCH

        for chunk in _chunks(_tags(tags), MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, tags=chunk)

    def last_step(self, run_id: str, metric: str = OBJECTIVE) -> int:
        """The largest step logged for ``metric`` in ``run_id`` (0 when none): where a resumed
        trial's run continues."""
        return max((m.step for m in self.client.get_metric_history(run_id, metric_name(metric))), default=0)

    def step_history(self, run_id: str) -> dict[str, dict[int, float]]:
        """Every metric ``run_id`` logged, by name as written: ``{name: {step: value}}`` (what a
        continued trial's record takes back when the driver's saved record is behind the run)."""
        names = self.client.get_run(run_id).data.metrics
        return {
            name_of_key(key): {m.step: m.value for m in self.client.get_metric_history(run_id, key)} for key in names
        }

    def end_run(self, run_id: str, status: str) -> None:
        """Close a run as ``FINISHED``, ``FAILED`` or ``KILLED``."""
        self.client.set_terminated(run_id, status=status)

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        """Copy a file or folder into the run's artifacts."""
        if Path(path).is_dir():
            self.client.log_artifacts(run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(run_id, str(path), artifact_path)

    def log_model(self, run_id: str, name: str, path: Path) -> str:
        """Log the saved MLflow model folder ``path`` as the logged model ``name`` of ``run_id``;
        returns its model id (:func:`~ludwig_hpo.tracking.models.log_model_folder`).

        Raises:
            mlflow.exceptions.MlflowException: the store refused the model or its upload.
        """
        return log_model_folder(self.client, self.experiment_id, run_id, name, path)

    def register_model_version(self, name: str, run_id: str, artifact_path: str, model_id: str | None = None) -> str:
        """Register a model of ``run_id`` as a new version of ``name``; returns the version
        number (:func:`~ludwig_hpo.tracking.models.register_version`).

        Raises:
            mlflow.exceptions.MlflowException: the store refused the registration.
        """
        return register_version(self.client, name, run_id, artifact_path, model_id)

    def log_text(self, run_id: str, text: str, file_name: str) -> None:
        """Write ``text`` as an artifact file of the run."""
        self.client.log_text(run_id, text, file_name)

    def close(self) -> None:
        """Nothing to release: MLflow keeps one store per URI for the whole process (its
        connection pool included), shared with every other client of that URI. Safe to call twice."""
