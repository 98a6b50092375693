"""The best trial's llm model as the parent run's MLflow logged model ``model``: a pyfunc that
generates from raw rows (:mod:`ludwig_hpo.model.llm_pyfunc`), also written to ``model/`` of the
output folder. No PyTorch-flavour twin is logged: an llm's prepared columns are token ids, which
no caller has. Driver process only, after the search (see :mod:`ludwig_hpo.driver.export`).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.data import PreparedData
from ludwig_hpo.driver.export import input_example, log_served_model, write_replacing
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import UserError, one_line_error
from ludwig_hpo.results import TrialRecord
from ludwig_hpo.tracking.protocol import Tracker

#: Rows of the test split logged as the MLflow model's input example (each is answered once).
LLM_INPUT_EXAMPLE_ROWS = 2


def log_best_llm(
    best: TrialRecord,
    paths: SweepPaths,
    loaded: LoadedSweep,
    data: PreparedData,
    store: Tracker,
    parent: str,
    console: Console,
) -> None:
    """Rebuild the best trial's llm model (its base model, then the adapter ``best_model/model.pt``
    holds), save it as the pyfunc model ``model/`` (the adapter in peft's format with the base
    model's reference or a local base folder's files; the merged model with
    ``adapter.postprocessor.merge_adapter_into_base_model``), log it (registered when
    ``tracking.register_model`` is set) and tag the parent run with ``best_model_uri``. A model
    that cannot be saved (its dataset no longer readable, say) is one warning line."""
    import torch

    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.saved_weights import load_saved_state_dict

    cfg = resolve_trial_config(loaded.raw, best.params)
    model = build_model(cfg, data.meta)
    load_saved_state_dict(model, torch.load(paths.best_weights, map_location="cpu", weights_only=True)["state_dict"])
    model.eval()
    try:
        _save(paths.served_model, model, best, loaded, data)
    except Exception as e:  # noqa: BLE001 - one warning line; the sweep's results and best_model/ are kept
        why = e.one_line() if isinstance(e, UserError) else one_line_error(f"{type(e).__name__}: {e}")
        console.print(f"warning: no llm model was logged: {why}", highlight=False)
        return
    store.set_tags(parent, log_served_model(paths, store, parent, loaded.config.tracking.register_model, console))


def _save(folder: Path, model, best: TrialRecord, loaded: LoadedSweep, data: PreparedData) -> None:
    """``model`` as a pyfunc folder at ``folder`` (replacing one there; written beside it, then
    renamed), its input example the first test rows (else training rows) read again from the
    sweep's dataset.

    Raises:
        UserError: the dataset cannot be read or split again.
    """
    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.data.preprocess import kept_rows
    from ludwig_hpo.model.llm_pyfunc import save_llm_pyfunc

    cfg = loaded.config
    example = input_example(kept_rows(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg), LLM_INPUT_EXAMPLE_ROWS)
    trial_cfg = resolve_trial_config(loaded.raw, best.params)
    write_replacing(
        folder, lambda tmp: save_llm_pyfunc(tmp, model, trial_cfg, data.meta, example, loaded.raw, best.params)
    )
