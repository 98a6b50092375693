"""The best trial's model: ``best_model/`` in the output folder, the parent run's copy of it, its
MLflow raw-row and PyTorch models, and its registry version, alike for a dataset in memory and
a streamed one. Driver process only, after the search."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import yaml
from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.config.paths import apply_params
from ludwig_hpo.data import PreparedData
from ludwig_hpo.data.streaming.record import StreamedData
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import DataError, UserError, one_line_error
from ludwig_hpo.results import TrialRecord
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.protocol import Tracker

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from ludwig_hpo.data.preprocess import FeatureMeta, KeptRows
    from ludwig_hpo.execution.streaming.local import LocalSplits

#: Rows of the test split logged as the MLflow model's input example.
INPUT_EXAMPLE_ROWS = 5


def export_best(
    best: TrialRecord,
    checkpoint: str | None,
    *,
    loaded: LoadedSweep,
    data: PreparedData | StreamedData,
    paths: SweepPaths,
    store: Tracker,
    parent: str,
    console: Console,
) -> None:
    """Write ``best_model/``: the best trial's best weights (``model.pt`` of its checkpoint),
    the sweep file's mapping with its parameters (``config.yaml``) and the preprocessing fitted
    on the training split (``preprocessing.json``), so the model can be rebuilt with
    :func:`ludwig_hpo.model.build_model` and fed new rows. Logs the folder to the parent run,
    tags the exported epoch, and logs the MLflow raw-row and PyTorch models (the raw-row one
    registered when ``tracking.register_model`` is set; a streamed dataset's are built from the
    fitted preprocessing and a few rows read again from its files); an llm's pyfunc model
    instead (:func:`~ludwig_hpo.driver.export_llm.log_best_llm`).

    Args:
        best: the best search trial.
        checkpoint: its checkpoint folder holding its best weights, as the monitor or Tune
            reported it; None or a folder without ``model.pt``: the newest kept checkpoint of
            the trial in the output folder is taken, and without one ``best_model/`` holds the
            config only (a warning is printed).
    """
    out = paths.best_model
    out.mkdir(exist_ok=True)
    paths.best_config.write_text(yaml.safe_dump(apply_params(loaded.raw, best.params), sort_keys=False))
    meta = {name: dataclasses.asdict(m) for name, m in data.meta.items()}
    paths.best_preprocessing.write_text(json.dumps(meta, indent=1, default=str))
    weights = Path(checkpoint) / paths.best_weights.name if checkpoint else None
    if weights is None or not weights.exists():
        kept = paths.kept_weights(best.trial_id)
        weights = kept[-1] if kept else None
    if weights is not None:
        shutil.copy2(weights, paths.best_weights)
        _note_exported_epoch(best, paths.best_weights, store, parent, console)
    else:
        console.print(
            f"warning: no checkpoint of the best trial {best.trial_id} was found; {out.name}/ holds its config only",
            highlight=False,
        )
    store.log_artifact(parent, out, layout.BEST_MODEL_ARTIFACT)
    if weights is not None and isinstance(data, PreparedData) and loaded.config.is_llm:
        from ludwig_hpo.driver.export_llm import log_best_llm

        log_best_llm(best, paths, loaded, data, store, parent, console)
    elif weights is not None:
        _log_best_model(best, paths, loaded, data, store, parent, console)


def _note_exported_epoch(best: TrialRecord, weights: Path, store: Tracker, parent: str, console: Console) -> None:
    """Tag the parent run with the epoch whose weights ``best_model/model.pt`` holds
    (``best_model.epoch``), and say so when it is not the trial's best epoch: a trial that
    the scheduler stopped, or a sweep's time budget ended, between a better epoch and its
    next checkpoint exports the best weights it wrote."""
    import torch

    exported = torch.load(weights, map_location="cpu", weights_only=True).get("epoch")
    best_epoch = next((h.epoch for h in best.history if h.objective == best.objective_best), None)
    store.set_tags(parent, {layout.BEST_MODEL_EPOCH_TAG: exported})
    if exported is not None and best_epoch is not None and exported != best_epoch:
        console.print(
            f"note: best_model/ holds epoch {exported} of trial {best.trial_id}, whose best "
            f"epoch {best_epoch} ended before its next checkpoint",
            highlight=False,
        )


def _log_best_model(
    best: TrialRecord,
    paths: SweepPaths,
    loaded: LoadedSweep,
    data: PreparedData | StreamedData,
    store: Tracker,
    parent: str,
    console: Console,
) -> None:
    """The best trial's model (calibrated) as the parent run's MLflow logged models: ``model``,
    the raw-row pyfunc model (also written to ``model/`` of the output folder; registered when
    ``tracking.register_model`` is set), and ``pytorch_model``, the module in MLflow's PyTorch
    flavour taking the prepared columns. Each has the first test rows as input example. Tags
    the parent run with ``best_model_uri`` (the pyfunc's), ``pytorch_model_uri`` and
    ``registered_model`` (``<name>/<version>``). A raw-row model that cannot be built (its
    dataset no longer readable, rows MLflow cannot infer a signature of) is one warning line;
    the PyTorch model is logged all the same (a streamed dataset's, when its files still read)."""
    import numpy as np
    import torch

    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.driver.holdout import calibrate_best
    from ludwig_hpo.execution.streaming.local import LocalSplits
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.build import ECDModel
    from ludwig_hpo.model.saved_weights import load_saved_state_dict
    from ludwig_hpo.model.serving import FlatInputModel, flat_inputs
    from ludwig_hpo.tracking.models import log_pytorch_model

    cfg = resolve_trial_config(loaded.raw, best.params)
    model = build_model(cfg, data.meta)
    load_saved_state_dict(model, torch.load(paths.best_weights, map_location="cpu", weights_only=True)["state_dict"])
    name = loaded.config.tracking.register_model
    tags: dict[str, str] = {}
    local: PreparedData | LocalSplits | None = data if isinstance(data, PreparedData) else None
    try:
        if local is None:
            local = LocalSplits(loaded.config, loaded.base_dir, cast(StreamedData, data))
        calibrate_best(model, cfg, local)  # Ludwig's calibration: the served probabilities are calibrated
        if isinstance(local, PreparedData):
            save_raw_row_model(paths.served_model, model, best, loaded, local)
        else:
            save_streamed_raw_row_model(paths.served_model, model, best, loaded, local)
    except Exception as e:  # noqa: BLE001 - one warning line; the sweep's results and the module are kept
        why = e.one_line() if isinstance(e, UserError) else one_line_error(f"{type(e).__name__}: {e}")
        console.print(f"warning: no raw-row model was logged: {why}", highlight=False)
    else:
        tags.update(log_served_model(paths, store, parent, name, console))
    if local is None:  # a streamed dataset whose files no longer read: no rows for the example
        store.set_tags(parent, tags)
        return
    ecd = cast(ECDModel, model)  # the PyTorch flavour's one-tensor form is an ECD model's
    flat = FlatInputModel(ecd, data.meta, [f.name for f in cfg.output_features])
    if isinstance(local, PreparedData):
        inputs, rows = local.inputs, local.splits["test"][:INPUT_EXAMPLE_ROWS]
    else:
        inputs = local.prepared_rows("test", INPUT_EXAMPLE_ROWS) or local.prepared_rows("train", INPUT_EXAMPLE_ROWS)
        rows = np.arange(len(next(iter(inputs.values()))))  # the first rows read: all of them
    example = flat_inputs(inputs, rows, ecd.input_names, data.meta)
    plain = log_pytorch_model(store, parent, flat, example, name=layout.PYTORCH_MODEL_ARTIFACT)
    tags[layout.PYTORCH_MODEL_URI_TAG] = plain.uri
    store.set_tags(parent, tags)


def save_raw_row_model(
    folder: Path, model: torch.nn.Module, best: TrialRecord, loaded: LoadedSweep, data: PreparedData
) -> None:
    """Write ``model`` (trained, calibrated, of ``best``'s configuration) as an MLflow pyfunc
    model folder at ``folder`` (replacing one there; written beside it, then renamed): the
    training split's raw cells it refits its preprocessing on (those of the features without a
    fitted record, :func:`~ludwig_hpo.model.raw_rows.reference_rows`) are read again from the
    sweep's dataset and split as the sweep split it; its input example is the first test rows
    (else training rows). Driver only.

    Raises:
        UserError: the dataset cannot be read or split again.
    """
    from ludwig_hpo.data import dataset_folder, load_dataframe
    from ludwig_hpo.data.preprocess import kept_rows
    from ludwig_hpo.model.raw_rows import reference_rows

    cfg = loaded.config
    kept = kept_rows(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
    train = kept.df.iloc[kept.splits["train"]]
    cwd = dataset_folder(cfg.dataset.source, loaded.base_dir)  # relative image paths of the example
    _save_served(
        folder, model, best, loaded, data.meta, reference_rows(train, cfg), input_example(kept, INPUT_EXAMPLE_ROWS), cwd
    )


def save_streamed_raw_row_model(
    folder: Path, model: torch.nn.Module, best: TrialRecord, loaded: LoadedSweep, local: LocalSplits
) -> None:
    """:func:`save_raw_row_model` of a streamed sweep: the same pyfunc model, whose
    preprocessing is the fitted record alone (``local.streamed.meta``, what
    ``best_model/preprocessing.json`` holds; every feature type a stream prepares applies its
    fitted statistics to new rows, a text input its vocabulary, width and padding id, so no
    training cell is kept); its input example is the first test rows (else training rows) read
    again from the files. Driver only.

    Raises:
        UserError: the files cannot be read again; a feature would need the training split's
            raw cells (a type without a fitted record).
    """
    from ludwig_hpo.data.preprocess import FITTED_TYPES
    from ludwig_hpo.model.raw_rows import reference_rows

    cfg = loaded.config
    example = local.raw_rows("test", INPUT_EXAMPLE_ROWS)
    if example.empty:
        example = local.raw_rows("train", INPUT_EXAMPLE_ROWS)
    reference = reference_rows(example.iloc[:0], cfg, text_from_record=True)
    unfitted = [*reference.columns] + [
        n for n, m in local.streamed.meta.items() if m.type in FITTED_TYPES and not m.fitted
    ]
    if unfitted:
        raise DataError(
            f"a streamed sweep's model keeps no training rows, but {unfitted[0]!r} has no fitted record to "
            "prepare new rows with",
            source=cfg.dataset.source,
            key="dataset.streaming",
            fix="set dataset.streaming: false to load the dataset in memory",
        )
    _save_served(folder, model, best, loaded, local.streamed.meta, reference, example, None)


def _save_served(
    folder: Path,
    model: torch.nn.Module,
    best: TrialRecord,
    loaded: LoadedSweep,
    meta: dict[str, FeatureMeta],
    reference: pd.DataFrame,
    example: pd.DataFrame,
    data_dir: Path | None,
) -> None:
    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.model.pyfunc import ServedModel, save_pyfunc

    served = ServedModel(model, resolve_trial_config(loaded.raw, best.params), meta, reference)
    write_replacing(folder, lambda tmp: save_pyfunc(tmp, served, example, loaded.raw, best.params, data_dir=data_dir))


def input_example(kept: KeptRows, rows: int) -> pd.DataFrame:
    """The first ``rows`` raw test rows of ``kept`` (the sweep's rows and splits), else its
    first training rows: a logged model's input example. Pure; driver."""
    test = kept.splits.get("test")
    chosen = test if test is not None and len(test) else kept.splits["train"]
    return kept.df.iloc[chosen[:rows]]


def write_replacing(folder: Path, write: Callable[[Path], None]) -> None:
    """Run ``write`` on a folder beside ``folder``, then rename it to ``folder`` (replacing one
    there), so a write that fails leaves nothing half-written. Driver only.

    Raises:
        whatever ``write`` raises (its folder removed).
    """
    tmp = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing half-written stays
        raise
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def log_served_model(
    paths: SweepPaths, store: Tracker, parent: str, name: str | None, console: Console
) -> dict[str, str]:
    """Log ``model/`` of the output folder as the parent run's logged model ``model``
    (registered as a new version of ``name`` when given, which the console says) and return
    the parent's tags naming it: ``best_model_uri``, ``registered_model``. Driver only.

    Raises:
        mlflow.exceptions.MlflowException: the store refused the upload or the registration.
    """
    from ludwig_hpo.tracking.models import log_saved_model

    logged = log_saved_model(store, parent, paths.served_model, layout.MODEL_ARTIFACT, register_as=name)
    tags = {layout.BEST_MODEL_URI_TAG: logged.uri}
    if logged.version is not None and name is not None:
        tags[layout.REGISTERED_MODEL_TAG] = layout.registered_model_value(name, logged.version)
        console.print(f"model registry: {name} version {logged.version}", highlight=False)
    return tags


def log_best_trial(best: TrialRecord, metric: str, goal: str, store: Tracker, parent: str) -> None:
    """The best trial on the parent run: tag ``best_trial_id``, params ``best.<path>``, metric
    ``best/<metric>`` and the artifact ``best_trial.json`` (id, metric, goal, value, params)."""
    store.set_tags(parent, {layout.BEST_TRIAL_ID_TAG: best.trial_id})
    store.log_params(parent, {layout.best_param(k): v for k, v in best.params.items()})
    store.log_metrics(parent, {layout.best_metric(metric): best.objective_best}, step=0)
    summary = {"trial_id": best.trial_id, "metric": metric, "goal": goal, "value": best.objective_best}
    text = json.dumps({**summary, "params": best.params}, indent=2, default=str)
    store.log_text(parent, text, layout.BEST_TRIAL_ARTIFACT)
