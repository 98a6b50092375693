"""Ludwig's ``calibration: true`` of binary and category outputs: temperature scaling
(Guo et al., "On Calibration of Modern Neural Networks"), fitted after training on the
validation split as Ludwig's ``TemperatureScaling.train_calibration`` fits it.

One temperature ``T`` per output divides the logits before the sigmoid or softmax of the
probabilities (served, ranked by ROC AUC, and thresholded by a binary's ``threshold``); the
loss keeps the raw logits, and argmax and top-k predictions do not change. Runs in the driver,
on the best model, before it is scored on the test split and exported.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: Ludwig's expected calibration error bins.
ECE_BINS = 15


def _two_class(logits: torch.Tensor) -> torch.Tensor:
    """A binary output's (n,) logits as (n, 2) class logits (Ludwig's ``[0, logit]``)."""
    return torch.stack([torch.zeros_like(logits), logits], dim=-1)


def expected_calibration_error(logits: torch.Tensor, labels: torch.Tensor, bins: int = ECE_BINS) -> float:
    """Ludwig's ``ECELoss``: the confidence-accuracy gap averaged over ``bins`` equal-width
    confidence bins, weighted by each bin's share of the rows. ``logits`` (n, classes)."""
    probs = torch.softmax(logits, dim=-1)
    confidence, predicted = probs.max(dim=-1)
    correct = (predicted == labels).float()
    edges = torch.linspace(0, 1, bins + 1)
    ece = 0.0
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        in_bin = (confidence > lo) & (confidence <= hi)
        share = float(in_bin.float().mean())
        if share > 0:
            ece += abs(float(confidence[in_bin].mean()) - float(correct[in_bin].mean())) * share
    return ece


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, binary: bool) -> float:
    """The temperature minimizing the validation rows' negative log-likelihood, by LBFGS from
    1 (lr 0.01, 50 iterations, strong Wolfe line search), as Ludwig fits it; 1 (no scaling) is
    kept, as Ludwig reverts to it, when the fitted one raises the expected calibration error.
    CPU, float32.

    Args:
        logits: (n,) logits of a binary output or (n, classes) of a category output.
        labels: (n,) 0/1 targets (binary) or class ids (category).
    """
    z = _two_class(logits.float()) if binary else logits.float()
    y = labels.long()
    start = 1.0
    temperature = torch.full((1,), start, requires_grad=True)
    optimizer = torch.optim.LBFGS([temperature], lr=0.01, max_iter=50, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(z / temperature, y)
        loss.backward()
        return loss

    before = expected_calibration_error(z, y)
    optimizer.step(closure)
    fitted = float(temperature.detach())
    if not fitted > 0 or expected_calibration_error(z / fitted, y) > before:
        return start
    return fitted
