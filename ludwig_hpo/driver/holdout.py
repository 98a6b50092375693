"""The best trial scored on the test split, as Ludwig's hyperopt scores each trial's model on
its test set: the best weights ``best_model/model.pt`` holds, rebuilt with the best trial's
configuration and evaluated on the test rows in the driver (CPU, one process). A streamed
dataset's test split is read file after file as it is scored
(:class:`~ludwig_hpo.execution.streaming.local.LocalSplits`), through the evaluation a rank
scores a streamed split with: the same metrics as on the same rows in memory. Driver only,
after the best model's export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.data import PreparedData
from ludwig_hpo.data.streaming.record import StreamedData
from ludwig_hpo.driver.console import say
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import one_line_error
from ludwig_hpo.results import TrialRecord
from ludwig_hpo.tracking import layout

if TYPE_CHECKING:
    import torch

    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.execution.streaming.local import LocalSplits

#: Rows per forward pass when ``trainer.eval_batch_size`` is ``auto`` (the driver tunes nothing).
EVAL_BATCH_SIZE = 512


def on_test_split(metric: str) -> str:
    """The test split's key of a ``<split>/<feature>/<metric>`` score: ``test/<feature>/<metric>``."""
    return layout.TEST_SCORE_PREFIX + metric.split("/", 1)[-1]


def score_best_on_test(
    best: TrialRecord,
    loaded: LoadedSweep,
    data: PreparedData | StreamedData,
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

    ``data``: the rows in memory, or a streamed dataset whose test (and, for a calibrated
    output, validation) split is read again from its files, a batch at a time.

    A failure to rebuild or score the model is one warning line, not the sweep's end: the
    search's results are written all the same.
    """
    try:
        return _scores(best, loaded, data, paths.best_weights if weights is None else weights, console)
    except Exception as e:
        why = one_line_error(f"{type(e).__name__}: {e}")
        say(console, f"warning: the best trial could not be scored on the test split: {why}")
        return {}


def calibrate_best(model: torch.nn.Module, cfg: SweepConfig, data: PreparedData | LocalSplits) -> dict[str, float]:
    """Ludwig's calibration of the best model (its outputs with ``calibration: true``) on the
    validation split, in memory or streamed from a streamed dataset's files
    (:func:`~ludwig_hpo.train.calibrate.calibrate_on`): ``{output name: temperature}``, set on
    the model. Driver, CPU."""
    import torch

    from ludwig_hpo.train.calibrate import BATCH_ROWS, calibrate, calibrate_on
    from ludwig_hpo.train.stream_feed import StreamScorer

    if isinstance(data, PreparedData):
        return calibrate(model, cfg, data)
    if not any(getattr(f, "calibration", False) for f in cfg.output_features) or not data.streamed.rows["validation"]:
        return {}
    return calibrate_on(
        model, cfg, StreamScorer(data.stream("validation"), torch.device("cpu")).eval_batches(BATCH_ROWS)
    )


def _scores(
    best: TrialRecord, loaded: LoadedSweep, data: PreparedData | StreamedData, weights: Path, console: Console
) -> dict[str, float]:
    import numpy as np
    import torch

    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.execution.streaming.local import LocalSplits
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.saved_weights import load_saved_state_dict
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate
    from ludwig_hpo.train.stream_feed import StreamScorer

    # a streamed split is read whole by its scorer: no row positions
    rows = data.splits.get("test", np.zeros(0, np.int64)) if isinstance(data, PreparedData) else np.zeros(0, np.int64)
    count = len(rows) if isinstance(data, PreparedData) else data.rows["test"]
    if count == 0:
        say(console, "test split: no rows; the best trial is not scored on it")
        return {}
    if not weights.is_file():
        say(console, f"test split: no weights of the best trial {best.trial_id}; it is not scored on it")
        return {}
    cfg = resolve_trial_config(loaded.raw, best.params)
    model = build_model(cfg, data.meta)
    load_saved_state_dict(model, torch.load(weights, map_location="cpu", weights_only=True)["state_dict"])
    local = data if isinstance(data, PreparedData) else LocalSplits(loaded.config, loaded.base_dir, data)
    for name, temperature in calibrate_best(model, cfg, local).items():  # Ludwig's: before the test scores
        say(console, f"calibration: {name}: temperature {temperature:.3f}, fitted on the validation split")
    size = cfg.trainer.eval_batch_size
    batch = size if isinstance(size, int) else EVAL_BATCH_SIZE
    cpu = torch.device("cpu")
    source = DeviceData(local, cpu) if isinstance(local, PreparedData) else StreamScorer(local.stream("test"), cpu)
    scores = evaluate(model, cfg, source, rows, "test", batch)
    # as a trial's run holds its scores: a score that repeats another one is left out
    drop = layout.redundant_scores(set(scores), keep=on_test_split(cfg.hyperopt.metric_key))
    return {k: v for k, v in scores.items() if k not in drop}
