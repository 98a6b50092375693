"""``calibration: true`` applied to a trained model: each calibrated output's temperature fitted
on the validation split (:func:`~ludwig_hpo.model.calibration.fit_temperature`), as Ludwig
calibrates after training. Driver (CPU, one process), on the best model before it is scored
on the test split and exported."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.model.calibration import fit_temperature
from ludwig_hpo.train.data import DeviceData, batches

#: Rows per forward pass of the validation split.
BATCH_ROWS = 512


def calibrate(model: torch.nn.Module, cfg: SweepConfig, data: PreparedData) -> dict[str, float]:
    """Fit the temperature of every output with ``calibration: true`` on the validation rows
    and set it on the model's heads (``heads.output_metrics[name].temperature``, pickled with the
    model). Returns ``{output name: temperature}``; empty when no output is calibrated or the
    validation split has no rows."""
    rows = data.splits.get("validation")
    if rows is None or len(rows) == 0:
        return {}
    dd = DeviceData(data, torch.device("cpu"))
    return calibrate_on(model, cfg, (dd.batch(idx) for idx in batches(rows, BATCH_ROWS, dd.device, drop_last=False)))


def calibrate_on(
    model: torch.nn.Module, cfg: SweepConfig, pairs: Iterable[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]
) -> dict[str, float]:
    """:func:`calibrate` on the validation rows given as ``(inputs, targets)`` CPU batches (a
    streamed split's, read as they are scored: only the calibrated outputs' logits and targets,
    (rows,) or (rows, classes) float32, are kept). Returns ``{output name: temperature}``; empty
    when no output is calibrated (``pairs`` is then not read) or ``pairs`` holds no rows."""
    names = [f.name for f in cfg.output_features if getattr(f, "calibration", False)]
    if not names:
        return {}
    logits: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    targets: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for x, y in pairs:
            z = model(x)
            for n in names:
                logits[n].append(z[n].float())
                targets[n].append(y[n])
    if was_training:
        model.train()
    if not logits[names[0]]:
        return {}
    kinds = {f.name: f.type for f in cfg.output_features}
    fitted: dict[str, float] = {}
    for name in names:
        fitted[name] = fit_temperature(
            torch.cat(logits[name]), torch.cat(targets[name]), binary=kinds[name] == "binary"
        )
        model.heads.output_metrics[name].temperature = fitted[name]  # type: ignore[union-attr, index]  # ECDModel's OutputHeads
    return fitted
