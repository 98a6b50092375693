"""``calibration: true`` applied to a trained model: each calibrated output's temperature fitted
on the validation split (:func:`~ludwig_hpo.model.calibration.fit_temperature`), as Ludwig
calibrates after training. Driver (CPU, one process), on the best model before it is scored
on the test split and exported."""

from __future__ import annotations

import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.model.calibration import fit_temperature
from ludwig_hpo.train.data import DeviceData, batches

#: Rows per forward pass of the validation split.
BATCH_ROWS = 512


@torch.no_grad()
def _logits(model: torch.nn.Module, dd: DeviceData, rows: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    out: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    for idx in batches(rows.numpy(), BATCH_ROWS, dd.device, drop_last=False):
        z = model(dd.batch(idx)[0])
        for n in names:
            out[n].append(z[n].float())
    return {n: torch.cat(v) for n, v in out.items()}


def calibrate(model: torch.nn.Module, cfg: SweepConfig, data: PreparedData) -> dict[str, float]:
    """Fit the temperature of every output with ``calibration: true`` on the validation rows
    and set it on the model's heads (``heads.output_metrics[name].temperature``, pickled with the
    model). Returns ``{output name: temperature}``; empty when no output is calibrated or the
    validation split has no rows."""
    names = [f.name for f in cfg.output_features if getattr(f, "calibration", False)]
    rows = data.splits.get("validation")
    if not names or rows is None or len(rows) == 0:
        return {}
    dd = DeviceData(data, torch.device("cpu"))
    was_training = model.training
    model.eval()
    logits = _logits(model, dd, torch.as_tensor(rows), names)
    if was_training:
        model.train()
    kinds = {f.name: f.type for f in cfg.output_features}
    fitted: dict[str, float] = {}
    for name in names:
        target = torch.as_tensor(data.targets[name][rows])
        fitted[name] = fit_temperature(logits[name], target, binary=kinds[name] == "binary")
        model.heads.output_metrics[name].temperature = fitted[name]  # type: ignore[union-attr, index]  # ECDModel's OutputHeads
    return fitted
