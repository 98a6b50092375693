"""Output heads: decoder layers, the loss and the per-batch metric sums of each output type.

Metrics are accumulated as sums over samples so that DDP ranks can all-reduce them and
divide once: the reduced value is exactly the metric over the whole split.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ludwig_hpo.config.metrics import METRICS
from ludwig_hpo.config.outputs import OutputFeature
from ludwig_hpo.data.preprocess import FeatureMeta

#: Metrics accumulated as per-sample sums (all of :data:`METRICS` but roc_auc, which needs every score).
SUMMED_METRICS = {t: tuple(m for m in ms if m != "roc_auc") for t, ms in METRICS.items() if t != "combined"}


class OutputHead(nn.Module):
    """(batch, combiner width) -> logits: category (batch, classes), binary / number (batch,)."""

    def __init__(self, feature: OutputFeature, meta: FeatureMeta, in_size: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        d = feature.decoder
        for _ in range(d.num_fc_layers):
            layers += [nn.Linear(in_size, d.output_size), nn.ReLU(), nn.Dropout(d.dropout)]
            in_size = d.output_size
        self.kind = feature.type  # not ``type``: that is nn.Module's dtype-cast method
        n_out = len(meta.vocab) if feature.type == "category" else 1
        self.net = nn.Sequential(*layers, nn.Linear(in_size, n_out))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.net(h)
        return out if self.kind == "category" else out.squeeze(-1)

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("type"), str):  # a head pickled with its kind under ``type``
            state["kind"] = state.pop("type")
        super().__setstate__(state)


class OutputHeads(nn.ModuleDict):
    """Every output feature's head, keyed by :func:`~ludwig_hpo.model.build.module_key` of its name.

    ``forward(hidden)`` takes the combiner's output, (batch, width), and returns
    ``{output feature name: logits}`` (shapes as :class:`OutputHead`). Runs on every rank.
    """

    def __init__(self, output_features: list[OutputFeature], meta: dict[str, FeatureMeta], in_size: int) -> None:
        super().__init__({_module_key(f.name): OutputHead(f, meta[f.name], in_size) for f in output_features})
        self.output_names = [f.name for f in output_features]

    def forward(self, hidden: torch.Tensor) -> dict[str, torch.Tensor]:
        return {name: self[_module_key(name)](hidden) for name in self.output_names}


def _module_key(name: str) -> str:
    """A feature's name as a submodule key (torch refuses a ``.``): ``.`` as ``%2E``, ``%`` as ``%25``."""
    if "." not in name and "%" not in name:
        return name
    return name.replace("%", "%25").replace(".", "%2E")


def loss(kind: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean loss over the batch: cross-entropy (category), BCE with logits (binary), MSE (number)."""
    if kind == "category":
        return F.cross_entropy(logits, target)
    if kind == "binary":
        return F.binary_cross_entropy_with_logits(logits, target)
    return F.mse_loss(logits, target)


def metric_sums(kind: str, logits: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-batch sums (0-dim float64 tensors): ``loss`` summed over samples, ``accuracy`` as
    the count of correct predictions, ``mae`` as the sum of absolute errors."""
    logits, target = logits.detach().float(), target.detach()
    if kind == "category":
        return {
            "loss": F.cross_entropy(logits, target, reduction="sum").double(),
            "accuracy": (logits.argmax(-1) == target).sum().double(),
        }
    if kind == "binary":
        return {
            "loss": F.binary_cross_entropy_with_logits(logits, target.float(), reduction="sum").double(),
            "accuracy": ((logits > 0).float() == target).sum().double(),
        }
    return {"loss": F.mse_loss(logits, target, reduction="sum").double(), "mae": (logits - target).abs().sum().double()}


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of binary ``labels`` (0/1, shape (n,)) ranked by ``scores``
    (shape (n,)): the Mann-Whitney U statistic with average ranks for ties, which equals
    scikit-learn's ``roc_auc_score`` at a fraction of its per-call cost (it runs once per
    epoch). NaN when only one class is present or a score is not finite."""
    positive = np.asarray(labels) > 0.5
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    scores = np.asarray(scores, dtype=np.float64)
    if n_pos == 0 or n_neg == 0 or not np.isfinite(scores).all():
        return float("nan")
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]
    starts = np.empty(len(ordered), dtype=bool)  # filled in place: np.r_'s per-call overhead exceeds the work
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    first = np.flatnonzero(starts)  # start of each run of ties
    ends = np.empty_like(first)
    ends[:-1], ends[-1] = first[1:], len(ordered)
    ranks = np.empty(len(ordered))
    ranks[order] = np.repeat((first + ends + 1) / 2.0, ends - first)  # 1-based average rank
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))
