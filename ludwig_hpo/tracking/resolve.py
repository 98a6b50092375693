"""Which MLflow store a sweep writes to, and the URI of a sweep folder's embedded store.

The precedence is one rule, used by ``hpo sweep``, ``hpo validate``, ``hpo report`` and ``hpo ui``:
``tracking.uri`` of the sweep file, else the ``MLFLOW_TRACKING_URI`` environment variable, else
an embedded SQLite store (``mlflow.db``) in the sweep's output folder, whose artifacts live beside
it (``mlartifacts/``). Pure: nothing here opens a store or touches the disk except
:func:`existing_store_uri`, which checks that the file is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ludwig_hpo.config.schema import TrackingConfig
from ludwig_hpo.errors import TrackingError

#: The embedded store's SQLite file in a sweep's output folder.
EMBEDDED_STORE_FILE = "mlflow.db"
#: The embedded store's artifact folder in a sweep's output folder.
EMBEDDED_ARTIFACTS_FOLDER = "mlartifacts"
#: The environment variable MLflow itself reads for its tracking URI.
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"

StoreOrigin = Literal["tracking.uri", "MLFLOW_TRACKING_URI", "embedded"]


def sqlite_uri(folder: Path) -> str:
    """``sqlite:///<absolute folder>/mlflow.db``: the URI of the embedded store of a sweep's
    output folder (whether or not the file exists yet)."""
    return f"sqlite:///{(Path(folder) / EMBEDDED_STORE_FILE).resolve()}"


@dataclass(frozen=True)
class TrackingTarget:
    """Where a sweep's runs go.

    Attributes:
        uri: the tracking URI (``sqlite:///...`` for the embedded store, ``http://...``, a folder...).
        origin: which rule chose it: ``tracking.uri``, ``MLFLOW_TRACKING_URI`` or ``embedded``.
        experiment: the MLflow experiment (``tracking.experiment``, else the sweep's name).
        store_file: the embedded store's SQLite file, as given (not resolved); None otherwise.
        artifact_location: the embedded store's artifact folder; None for other stores (their
            own default applies).
    """

    uri: str
    origin: StoreOrigin
    experiment: str
    store_file: Path | None = None
    artifact_location: Path | None = None

    @property
    def embedded(self) -> bool:
        """True for the SQLite store in the output folder."""
        return self.origin == "embedded"

    def describe(self) -> str:
        """``"<uri or store file> (<origin>), experiment '<name>'"``: what ``hpo validate`` prints."""
        if self.store_file is not None:
            return f"{self.store_file} (embedded SQLite store), experiment {self.experiment!r}"
        return f"{self.uri} ({self.origin}), experiment {self.experiment!r}"


def resolve_tracking(tracking: TrackingConfig, name: str, env: Mapping[str, str], output_dir: Path) -> TrackingTarget:
    """The store of a sweep named ``name`` whose output folder is ``output_dir``.

    Args:
        tracking: the sweep file's ``tracking`` section.
        name: the sweep's name (the experiment when ``tracking.experiment`` is unset).
        env: the environment to read ``MLFLOW_TRACKING_URI`` from (``os.environ``).
        output_dir: the sweep's output folder (it need not exist yet).
    """
    experiment = tracking.experiment or name
    if tracking.uri:
        return TrackingTarget(tracking.uri, "tracking.uri", experiment)
    if env.get(TRACKING_URI_ENV):
        return TrackingTarget(env[TRACKING_URI_ENV], "MLFLOW_TRACKING_URI", experiment)
    return TrackingTarget(
        sqlite_uri(output_dir),
        "embedded",
        experiment,
        store_file=output_dir / EMBEDDED_STORE_FILE,
        artifact_location=output_dir / EMBEDDED_ARTIFACTS_FOLDER,
    )


def existing_store_uri(results_dir: Path) -> str:
    """The tracking URI of a sweep output folder's embedded store (``DIR/mlflow.db``).

    Raises:
        TrackingError: the folder holds no ``mlflow.db``.
    """
    if not (Path(results_dir) / EMBEDDED_STORE_FILE).is_file():
        raise TrackingError(
            f"no {EMBEDDED_STORE_FILE} in this folder",
            source=str(results_dir),
            fix="pass the output folder printed by 'hpo sweep', or --tracking-uri with --experiment/--run-id",
        )
    return sqlite_uri(results_dir)
