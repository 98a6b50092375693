"""The best model as an MLflow logged model (PyTorch flavour), logged from the sweep driver.

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
from typing import NamedTuple

import pandas as pd
import torch

from ludwig_hpo import __version__
from ludwig_hpo.tracking.layout import MODEL_ARTIFACT
from ludwig_hpo.tracking.protocol import Tracker


class LoggedModel(NamedTuple):
    """Where the model went: ``uri`` (``models:/<model id>``, for ``mlflow.pytorch.load_model``;
    ``runs:/<run id>/model`` loads it too), MLflow's ``model_id`` and the registered ``version``
    (None when not registered)."""

    uri: str
    model_id: str
    version: str | None


def _requirements() -> list[str]:
    from importlib.metadata import version

    return [
        f"torch=={torch.__version__.split('+')[0]}",
        f"mlflow=={version('mlflow')}",
        f"numpy=={version('numpy')}",
        f"pandas=={version('pandas')}",
        f"ludwig_hpo=={__version__}",
    ]


def log_pytorch_model(
    store: Tracker, run_id: str, model: torch.nn.Module, example: pd.DataFrame, register_as: str | None = None
) -> LoggedModel:
    """Save ``model`` (CPU, eval mode) with MLflow's PyTorch flavour, an input example and the
    signature inferred from ``model(example)``, log it as the logged model ``model`` of
    ``run_id``, and optionally register it as a new version of model ``register_as``. Driver only.

    Args:
        store: the tracking store (:class:`~ludwig_hpo.tracking.protocol.Tracker`).
        model: takes one float32 tensor (batch, columns of ``example``), returns one tensor
            (batch, outputs); its ``output_columns`` attribute, when present, names the outputs.
        example: a few input rows (their column names become the signature's).

    Raises:
        mlflow.exceptions.MlflowException: the store refused the upload or the registration.
    """
    import mlflow.pytorch
    from mlflow.models import infer_signature

    model = model.cpu().eval()
    with torch.no_grad():
        prediction = model(torch.tensor(example.to_numpy(dtype="float32"))).numpy()
    names = getattr(model, "output_columns", None)  # named outputs, e.g. a binary's probability
    signature = infer_signature(example, pd.DataFrame(prediction, columns=names) if names else prediction)
    with tempfile.TemporaryDirectory(prefix="hpo-model-") as tmp:
        path = Path(tmp) / MODEL_ARTIFACT
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
                pip_requirements=_requirements(),
                serialization_format="pickle",
            )
        finally:
            log.setLevel(level)
        model_id = store.log_model(run_id, MODEL_ARTIFACT, path)
    version = store.register_model_version(register_as, run_id, MODEL_ARTIFACT, model_id) if register_as else None
    return LoggedModel(f"models:/{model_id}", model_id, version)
