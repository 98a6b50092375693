"""The trained model as an MLflow pyfunc model that takes raw rows: a DataFrame with the
dataset's columns in, Ludwig-named predictions out (:mod:`ludwig_hpo.model.predictions`),
preprocessing (:mod:`ludwig_hpo.model.raw_rows`) and postprocessing inside.

Everything the model needs is in its MLflow artifacts (the ``serving`` folder, see
:class:`ServedModel`): it loads without Ray and without the sweep's output folder, in
``mlflow.pyfunc.load_model``, ``mlflow models serve`` and ``hpo predict / evaluate / serve``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import mlflow.pyfunc
import pandas as pd
import torch
from mlflow.pyfunc import PythonModel

from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.errors import DataError
from ludwig_hpo.model.predictions import output_values, prediction_frame
from ludwig_hpo.model.raw_rows import BadRowsError, RawRows, RowPreparer
from ludwig_hpo.tracking.models import requirements

if TYPE_CHECKING:
    from ludwig_hpo.model.llm_pyfunc import ServedLLM

#: The artifact (a folder) of the pyfunc model holding what :class:`ServedModel` loads.
SERVING_ARTIFACT = "serving"
#: Its files: the module (pickled, calibration included), the config it was built from
#: (``{"raw": the sweep file's mapping, "params": the trial's sampled values}``), the fitted
#: :class:`FeatureMeta` per feature, and the training split's raw cells (:func:`reference_rows`).
MODEL_FILE, CONFIG_FILE, META_FILE, REFERENCE_FILE = "model.pt", "config.json", "preprocessing.json", "reference.pkl"
#: ``params`` key of ``predict`` that leaves bad rows out instead of refusing the request.
SKIP_BAD_ROWS = "skip_bad_rows"


def meta_from_json(doc: dict[str, Any]) -> dict[str, FeatureMeta]:
    """``preprocessing.json`` (``dataclasses.asdict`` of each :class:`FeatureMeta`) back as
    :class:`FeatureMeta` (lists as tuples). Pure."""
    return {
        name: FeatureMeta(
            name=m["name"],
            type=m["type"],
            vocab=tuple(m["vocab"]),
            shape=tuple(m["shape"]),
            stats=dict(m["stats"]),
            fitted=dict(m.get("fitted", {})),
        )
        for name, m in doc.items()
    }


class Scored(NamedTuple):
    """Predictions of some rows: ``frame`` (Ludwig's columns, one row per prepared row) and
    ``rows`` (the prepared rows, their positions, the bad rows left out)."""

    frame: pd.DataFrame
    rows: RawRows


class ServedModel:
    """A trained model with its fitted preprocessing, as saved in the pyfunc's ``serving`` folder.

    Args:
        model: the trained module (CPU, eval mode).
        cfg: its resolved config; meta: its :class:`FeatureMeta` per feature;
        reference: the training split's raw cells (:func:`~ludwig_hpo.model.raw_rows.reference_rows`).
    """

    def __init__(
        self, model: torch.nn.Module, cfg: SweepConfig, meta: dict[str, FeatureMeta], reference: pd.DataFrame
    ) -> None:
        self.model, self.cfg, self.meta = model.cpu().eval(), cfg, meta
        self.preparer = RowPreparer(cfg, meta, reference)
        self.binary_labels = self.preparer.binary_labels()

    @classmethod
    def load(cls, folder: Path) -> ServedModel:
        """The model saved in ``folder`` by :meth:`save`.

        Raises:
            DataError: the folder is not a served model's (a file is missing).
        """
        missing = [f for f in (MODEL_FILE, CONFIG_FILE, META_FILE, REFERENCE_FILE) if not (folder / f).is_file()]
        if missing:
            raise DataError(
                f"not a raw-row model folder: {', '.join(missing)} missing",
                source=str(folder),
                fix="pass a sweep's or hpo train's output folder, or the runs:/<parent run>/model URI",
            )
        doc = json.loads((folder / CONFIG_FILE).read_text())
        cfg = resolve_trial_config(doc["raw"], doc["params"])
        meta = meta_from_json(json.loads((folder / META_FILE).read_text()))
        reference = pd.read_pickle(folder / REFERENCE_FILE)
        model = torch.load(folder / MODEL_FILE, map_location="cpu", weights_only=False)
        return cls(model, cfg, meta, reference)

    def save(self, folder: Path, raw: dict[str, Any], params: dict[str, Any]) -> None:
        """Write the ``serving`` folder: the module, ``config.json`` (``raw`` and ``params``,
        as :func:`~ludwig_hpo.config.loader.resolve_trial_config` takes them), the metadata,
        the reference cells."""
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.model, folder / MODEL_FILE)
        (folder / CONFIG_FILE).write_text(json.dumps({"raw": raw, "params": params}, default=str))
        meta = {name: dataclasses.asdict(m) for name, m in self.meta.items()}
        (folder / META_FILE).write_text(json.dumps(meta, indent=1, default=str))
        self.preparer.reference.to_pickle(folder / REFERENCE_FILE)

    def input_columns(self) -> list[str]:
        """The dataset columns the model reads, in input-feature order."""
        return list(dict.fromkeys(f.source_column for f in self.cfg.input_features))

    def predict(self, df: pd.DataFrame, *, skip_bad_rows: bool = False, data_dir: Path | None = None) -> Scored:
        """Ludwig-named predictions of ``df``'s rows (see :mod:`ludwig_hpo.model.predictions`).

        Raises:
            DataError: a column the model reads is missing.
            BadRowsError: rows that cannot be prepared (unless ``skip_bad_rows``), or none can.
        """
        rows = self.preparer.prepare(df, data_dir=data_dir, skip_bad_rows=skip_bad_rows)
        values = output_values(self.model, rows.data)
        return Scored(prediction_frame(values, self.cfg, rows.data, self.binary_labels), rows)

    def prepare_labelled(
        self, df: pd.DataFrame, *, skip_bad_rows: bool = False, data_dir: Path | None = None
    ) -> RawRows:
        """``df``'s rows with their targets prepared (for scoring), as :meth:`predict` raises."""
        return self.preparer.prepare(df, targets=True, data_dir=data_dir, skip_bad_rows=skip_bad_rows)


class RawRowModel(PythonModel):
    """The MLflow pyfunc face of :class:`ServedModel`: ``predict(DataFrame of raw rows)`` ->
    DataFrame of Ludwig-named predictions. ``params={"skip_bad_rows": true}`` leaves bad rows
    out; otherwise a bad row is an ``INVALID_PARAMETER_VALUE`` error (HTTP 400 from the
    scoring server) listing each bad row's reason. Loads in the scoring process."""

    served: ServedModel | None = None

    def load_context(self, context: Any) -> None:
        self.served = ServedModel.load(Path(context.artifacts[SERVING_ARTIFACT]))

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        from mlflow.exceptions import MlflowException
        from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

        assert self.served is not None, "load_context runs before predict"
        df = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        try:
            return self.served.predict(df, skip_bad_rows=bool((params or {}).get(SKIP_BAD_ROWS, False))).frame
        except BadRowsError as e:
            text = "; ".join([e.one_line(), *e.lines()])
            raise MlflowException(text, error_code=INVALID_PARAMETER_VALUE) from None
        except DataError as e:
            raise MlflowException(e.one_line(), error_code=INVALID_PARAMETER_VALUE) from None


def save_pyfunc(
    path: Path,
    served: ServedModel,
    example: pd.DataFrame,
    raw: dict[str, Any],
    params: dict[str, Any],
    *,
    data_dir: Path | None = None,
) -> None:
    """Save ``served`` as an MLflow pyfunc model folder at ``path`` (new): its ``serving``
    artifact, the signature of the raw input columns (inferred from ``example``, real rows;
    relative image paths start at ``data_dir``) and of the predictions of ``example``, which
    is also the input example. ``raw`` and ``params``: the sweep file's mapping and the
    trial's sampled values the model's config is resolved from.

    Raises:
        DataError / BadRowsError: ``example`` cannot be scored (a model that cannot score
            its own test rows is not saved).
    """
    from mlflow.models import infer_signature

    columns = served.input_columns()
    example = example[columns].reset_index(drop=True)
    predictions = served.predict(example, data_dir=data_dir).frame
    signature = infer_signature(example, predictions, params={SKIP_BAD_ROWS: False})
    with tempfile.TemporaryDirectory(prefix="hpo-serving-") as tmp:
        folder = Path(tmp) / SERVING_ARTIFACT
        served.save(folder, raw, params)
        log = logging.getLogger("mlflow.pyfunc")
        level = log.level
        log.setLevel(logging.ERROR)  # MLflow's notes on pickled models are not news for the console
        try:
            with quiet_artifacts():
                mlflow.pyfunc.save_model(
                    str(path),
                    python_model=RawRowModel(),
                    artifacts={SERVING_ARTIFACT: str(folder)},
                    signature=signature,
                    input_example=example,
                    pip_requirements=requirements(),
                )
        finally:
            log.setLevel(level)


@contextlib.contextmanager
def quiet_artifacts() -> Iterator[None]:
    """No MLflow progress bar while artifacts are copied (a model saved or loaded): the
    console keeps its one line per step. Restores the variable after."""
    key = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def served_from_pyfunc(loaded: Any) -> ServedModel | ServedLLM:
    """The served model inside a loaded pyfunc model (``mlflow.pyfunc.load_model``): a
    :class:`ServedModel`, or an llm's :class:`~ludwig_hpo.model.llm_pyfunc.ServedLLM`.

    Raises:
        DataError: the model is not a raw-row model of this package (e.g. an older sweep's
            PyTorch model of prepared columns).
    """
    from ludwig_hpo.model.llm_pyfunc import LLMRowModel

    inner = loaded.unwrap_python_model() if hasattr(loaded, "unwrap_python_model") else None
    if isinstance(inner, LLMRowModel) and inner.served is not None:
        return inner.served
    if not isinstance(inner, RawRowModel) or inner.served is None:
        raise DataError(
            "this MLflow model is not a raw-row model of ludwig_hpo (a sweep before raw-row models logged "
            "one taking prepared columns)",
            fix="rerun the sweep (or hpo train) with this version to log a raw-row model",
        )
    return inner.served
