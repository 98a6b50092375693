"""Which raw-row model ``hpo predict / evaluate / serve`` take: ``DIR|MODEL``, one of

- a sweep's or ``hpo train``'s output folder (its ``model/``, the pyfunc model the sweep logged),
- an MLflow pyfunc model folder (holding ``MLmodel``),
- an MLflow model URI (``runs:/<parent run id>/model``, ``models:/<id>``, ``models:/<name>/<version>``),
  resolved in ``MLFLOW_TRACKING_URI`` (the store a ``hpo sweep`` output folder's ``mlflow.db`` is).

The CLI process only; MLflow is imported when a model is loaded.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import DataError

if TYPE_CHECKING:  # torch and MLflow load with the model, not with the CLI
    from ludwig_hpo.model.llm_pyfunc import ServedLLM
    from ludwig_hpo.model.pyfunc import ServedModel

#: An MLflow model URI's scheme (``runs:/``, ``models:/``, ``file:/``, ``s3://``, ...).
_URI = re.compile(r"^[a-z][a-z0-9+.-]*:/", re.IGNORECASE)
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
#: A SQLite store's URI prefix; the rest is the database file's path.
_SQLITE = "sqlite:///"
_FIX = "pass a sweep's (or hpo train's) output folder, an MLflow model folder, or runs:/<parent run id>/model"


@dataclass(frozen=True)
class ModelSource:
    """A model to load: ``uri`` (a local folder's path, or an MLflow URI) and the
    ``tracking_uri`` an MLflow URI resolves in (None: a folder)."""

    uri: str
    tracking_uri: str | None

    def load(self) -> ServedModel | ServedLLM:
        """The :class:`~ludwig_hpo.model.pyfunc.ServedModel` (or an llm's
        :class:`~ludwig_hpo.model.llm_pyfunc.ServedLLM`) of the pyfunc model at ``uri``,
        loaded with ``mlflow.pyfunc.load_model``.

        Raises:
            DataError: no such run, model or artifact, or not a raw-row model (one line).
        """
        import mlflow
        from mlflow.exceptions import MlflowException

        # MLflow's own helper puts back the URI as it was, unset included: pinning the URI
        # get_tracking_uri() reports would make later MLFLOW_TRACKING_URI changes of the process
        # silently ignored
        from mlflow.tracking._tracking_service.utils import _use_tracking_uri

        from ludwig_hpo.model.pyfunc import quiet_artifacts, served_from_pyfunc

        env_before = os.environ.get(TRACKING_URI_ENV)
        using = _use_tracking_uri(self.tracking_uri) if self.tracking_uri is not None else contextlib.nullcontext()
        try:
            with using, quiet_artifacts():
                loaded = mlflow.pyfunc.load_model(self.uri)
        except (MlflowException, OSError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            where = f" in {self.tracking_uri}" if self.tracking_uri else ""
            raise DataError(f"cannot load the model{where}: {first[:300]}", source=self.uri, fix=_FIX) from None
        finally:  # MLflow keeps the URI in the environment too
            if env_before is None:
                os.environ.pop(TRACKING_URI_ENV, None)
            else:
                os.environ[TRACKING_URI_ENV] = env_before
        return served_from_pyfunc(loaded)


def resolve_source(source: str, tracking_uri: str | None = None) -> ModelSource:
    """``source`` as the CLI was given it, checked before anything is loaded.

    Raises:
        DataError: a folder that is neither an output folder with a model nor a model folder;
            a path that does not exist; an MLflow URI without a tracking store to resolve it in,
            or with a SQLite store whose file does not exist (checked so none is created).
    """
    path = Path(source)
    if _URI.match(source) and not path.exists():
        uri = tracking_uri or os.environ.get(TRACKING_URI_ENV)
        if uri is None and source.startswith(("runs:/", "models:/")):
            raise DataError(
                "an MLflow run or model URI needs its tracking store",
                source=source,
                key="MLFLOW_TRACKING_URI",
                fix="set MLFLOW_TRACKING_URI (e.g. sqlite:///DIR/mlflow.db), or pass the sweep's output folder",
            )
        if uri is not None and uri.startswith(_SQLITE) and not Path(uri[len(_SQLITE) :]).is_file():
            # MLflow would create an empty store there, then find no run in it
            raise DataError(
                f"no MLflow store at {uri}",
                source=source,
                key=TRACKING_URI_ENV,
                fix="point it at the sweep's store (sqlite:///DIR/mlflow.db), or pass the sweep's output folder",
            )
        return ModelSource(source, uri)
    if not path.is_dir():
        raise DataError("no such folder", source=source, fix=_FIX)
    if (path / "MLmodel").is_file():
        return ModelSource(str(path), None)
    paths = SweepPaths(path)
    if (paths.served_model / "MLmodel").is_file():
        return ModelSource(str(paths.served_model), None)
    if paths.best_model.is_dir() or paths.state.is_file():
        raise DataError(
            f"this output folder holds no raw-row model ({paths.served_model.name}/): its sweep ended without "
            "a trained model, or ran before raw-row models were saved",
            source=source,
            fix="rerun the sweep (or hpo train) with this version",
        )
    raise DataError("not a sweep's or hpo train's output folder, nor an MLflow model folder", source=source, fix=_FIX)
