"""The best trial scored on the test split, as Ludwig's hyperopt scores each trial's model on
its test set: the best weights ``best_model/model.pt`` holds, rebuilt with the best trial's
configuration and evaluated on the test rows in the driver (CPU, one process). Driver only,
after the best model's export."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.data import PreparedData
from ludwig_hpo.driver.console import say
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import one_line_error
from ludwig_hpo.results import TrialRecord
from ludwig_hpo.tracking import layout

#: Rows per forward pass when ``trainer.eval_batch_size`` is ``auto`` (the driver tunes nothing).
EVAL_BATCH_SIZE = 512


def on_test_split(metric: str) -> str:
    """The test split's key of a ``<split>/<feature>/<metric>`` score: ``test/<feature>/<metric>``."""
    return layout.TEST_SCORE_PREFIX + metric.split("/", 1)[-1]


def score_best_on_test(
    best: TrialRecord,
    loaded: LoadedSweep,
    data: PreparedData,
    paths: SweepPaths,
    console: Console,
    weights: Path | None = None,
) -> dict[str, float]:
    """``{"test/<feature>/<metric>": value}`` (and ``test/combined/loss``) of the best trial's
    exported best weights on the test split, but a score that repeats another one
    (:func:`~ludwig_hpo.tracking.layout.redundant_scores`, as in a trial's run); empty when the
    split has no rows or no weights were exported (a line says why).

    ``weights``: a ``model.pt`` of ``best``'s configuration to score instead of
    ``best_model/model.pt`` (the search's best trial's weights, scored for comparison when
    ``kfold.select: cv`` exports another model).

    A failure to rebuild or score the model is one warning line, not the sweep's end: the
    search's results are written all the same.
    """
    try:
        return _scores(best, loaded, data, paths.best_weights if weights is None else weights, console)
    except Exception as e:
        why = one_line_error(f"{type(e).__name__}: {e}")
        say(console, f"warning: the best trial could not be scored on the test split: {why}")
        return {}


def _scores(
    best: TrialRecord, loaded: LoadedSweep, data: PreparedData, weights: Path, console: Console
) -> dict[str, float]:
    import torch

    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.saved_weights import load_saved_state_dict
    from ludwig_hpo.train.calibrate import calibrate
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    rows = data.splits.get("test")
    if rows is None or len(rows) == 0:
        say(console, "test split: no rows; the best trial is not scored on it")
        return {}
    if not weights.is_file():
        say(console, f"test split: no weights of the best trial {best.trial_id}; it is not scored on it")
        return {}
    cfg = resolve_trial_config(loaded.raw, best.params)
    model = build_model(cfg, data.meta)
    load_saved_state_dict(model, torch.load(weights, map_location="cpu", weights_only=True)["state_dict"])
    for name, temperature in calibrate(model, cfg, data).items():  # Ludwig's calibration: before the test scores
        say(console, f"calibration: {name}: temperature {temperature:.3f}, fitted on the validation split")
    size = cfg.trainer.eval_batch_size
    batch = size if isinstance(size, int) else EVAL_BATCH_SIZE
    scores = evaluate(model, cfg, DeviceData(data, torch.device("cpu")), rows, "test", batch)
    # as a trial's run holds its scores: a score that repeats another one is left out
    drop = layout.redundant_scores(set(scores), keep=on_test_split(cfg.hyperopt.metric_key))
    return {k: v for k, v in scores.items() if k not in drop}
