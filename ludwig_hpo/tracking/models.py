"""The best model as an MLflow logged model (PyTorch flavour), logged from the sweep driver;
and the store's side of that job (:func:`log_model_folder`, :func:`register_version`, what
:meth:`~ludwig_hpo.tracking.mlflow_store.MlflowStore.log_model` and
:meth:`~ludwig_hpo.tracking.mlflow_store.MlflowStore.register_model_version` run).

The model is saved with ``mlflow.pytorch.save_model`` into a temporary folder and logged as an
MLflow logged model named ``model``, an output of the run, through the store's client (what
``mlflow.pytorch.log_model(..., name="model")`` does, so MLflow's run and experiment model views
list it), so no fluent (process-global) MLflow state is used: an inherited ``MLFLOW_RUN_ID`` or
tracking URI cannot redirect it.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ludwig_hpo import __version__
from ludwig_hpo.tracking.layout import MODEL_ARTIFACT
from ludwig_hpo.tracking.protocol import Tracker

if TYPE_CHECKING:  # torch and pandas load with the model, not with the store that imports this module
    import pandas as pd
    import torch


class LoggedModel(NamedTuple):
    """Where the model went: ``uri`` (``models:/<model id>``, for ``mlflow.pytorch.load_model``;
    ``runs:/<run id>/model`` loads it too), MLflow's ``model_id`` and the registered ``version``
    (None when not registered)."""

    uri: str
    model_id: str
    version: str | None


def requirements() -> list[str]:
    """The pip requirements written with a logged model (PyTorch or pyfunc): this package and what
    it runs on, at the versions installed here. Runs in the driver."""
    from importlib.metadata import version

    import torch

    return [
        f"torch=={torch.__version__.split('+')[0]}",
        f"mlflow=={version('mlflow')}",
        f"numpy=={version('numpy')}",
        f"pandas=={version('pandas')}",
        f"ludwig_hpo=={__version__}",
    ]


def log_pytorch_model(
    store: Tracker,
    run_id: str,
    model: torch.nn.Module,
    example: pd.DataFrame,
    register_as: str | None = None,
    name: str = MODEL_ARTIFACT,
) -> LoggedModel:
    """Save ``model`` (CPU, eval mode) with MLflow's PyTorch flavour, an input example and the
    signature inferred from ``model(example)``, log it as the logged model ``model`` of
    ``run_id``, and optionally register it as a new version of model ``register_as``. Driver only.

    Args:
        store: the tracking store (:class:`~ludwig_hpo.tracking.protocol.Tracker`).
        model: takes one float32 tensor (batch, columns of ``example``), returns one tensor
            (batch, outputs); its ``output_columns`` attribute, when present, names the outputs.
        example: a few input rows (their column names become the signature's).
        name: the logged model's name (``model``; the sweep logs this one as ``pytorch_model``
            beside its raw-row model).

    Raises:
        mlflow.exceptions.MlflowException: the store refused the upload or the registration.
    """
    import mlflow.pytorch
    import pandas as pd
    import torch
    from mlflow.models import infer_signature

    model = model.cpu().eval()
    with torch.no_grad():
        prediction = model(torch.tensor(example.to_numpy(dtype="float32"))).numpy()
    names = getattr(model, "output_columns", None)  # named outputs, e.g. a binary's probability
    signature = infer_signature(example, pd.DataFrame(prediction, columns=names) if names else prediction)
    with tempfile.TemporaryDirectory(prefix="hpo-model-") as tmp:
        path = Path(tmp) / name
        # pickle: the whole module, any batch size (MLflow's 'pt2' export fixes the example's
        # shapes); MLflow warns about pickle on every save, which is not news for the console
        log = logging.getLogger("mlflow.pytorch")
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            mlflow.pytorch.save_model(
                model,
                str(path),
                signature=signature,
                input_example=example,
                pip_requirements=requirements(),
                serialization_format="pickle",
            )
        finally:
            log.setLevel(level)
        return log_saved_model(store, run_id, path, name, register_as)


def log_saved_model(store: Tracker, run_id: str, path: Path, name: str, register_as: str | None = None) -> LoggedModel:
    """Log the saved MLflow model folder ``path`` as the logged model ``name`` of ``run_id``
    (and register it as a new version of ``register_as`` when given). Driver only.

    Raises:
        mlflow.exceptions.MlflowException: the store refused the upload or the registration.
    """
    model_id = store.log_model(run_id, name, path)
    version = store.register_model_version(register_as, run_id, name, model_id) if register_as else None
    return LoggedModel(f"models:/{model_id}", model_id, version)


def log_model_folder(client: Any, experiment_id: str, run_id: str, name: str, path: Path) -> str:
    """Log the saved MLflow model folder ``path`` (holding ``MLmodel``) as an MLflow logged
    model named ``name``, output of ``run_id`` (step 0), through ``client`` (an
    ``mlflow.MlflowClient`` of the store holding experiment ``experiment_id``), as
    ``mlflow.<flavor>.log_model`` does: the run's and the experiment's model views list it.
    Returns its model id (``models:/<id>`` loads it, and so does ``runs:/<run_id>/<name>``).
    Runs wherever the store's client lives (the driver, or the store process).

    Raises:
        mlflow.exceptions.MlflowException: the store refused the model or its upload.
    """
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus
    from mlflow.models import Model

    saved = Model.load(str(path))
    params = {k: str(v) for k, v in client.get_run(run_id).data.params.items()}
    model = client.create_logged_model(experiment_id, name=name, source_run_id=run_id, params=params)
    try:
        # the MLmodel names where it lives, as a model logged by MLflow itself does
        saved.model_id, saved.model_uuid, saved.run_id = model.model_id, model.model_id, run_id
        saved.artifact_path = model.artifact_location
        saved.save(str(Path(path) / "MLmodel"))
        client.log_model_artifacts(model.model_id, str(path))
        client.log_outputs(run_id, [LoggedModelOutput(model.model_id, step=0)])
    except BaseException:
        client.finalize_logged_model(model.model_id, LoggedModelStatus.FAILED)
        raise
    client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    return str(model.model_id)


def register_version(client: Any, name: str, run_id: str, artifact_path: str, model_id: str | None = None) -> str:
    """Register a model of ``run_id`` as a new version of registered model ``name`` (created
    when missing) through ``client`` (an ``mlflow.MlflowClient``): the logged model ``model_id``
    when given, else the run's artifact folder ``artifact_path``; returns the version number.
    Runs wherever the store's client lives (the driver, or the store process).

    Raises:
        mlflow.exceptions.MlflowException: the store refused the registration.
    """
    from mlflow.exceptions import MlflowException

    try:
        client.create_registered_model(name)
    except MlflowException as e:
        if e.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    if model_id is not None:
        # the model's own location, not models:/<id>: MLflow resolves that URI through its
        # process-global tracking URI, which need not be this store's
        source = client.get_logged_model(model_id).artifact_location
        return str(client.create_model_version(name, source, run_id=run_id, model_id=model_id).version)
    source = f"{client.get_run(run_id).info.artifact_uri.rstrip('/')}/{artifact_path}"
    return str(client.create_model_version(name, source, run_id=run_id).version)
