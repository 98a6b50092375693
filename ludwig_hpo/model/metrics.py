"""Each output's metrics, with Ludwig's names (:data:`~ludwig_hpo.config.metrics.METRICS`),
computed exactly over a split that DDP ranks score in shards.

Every metric but ROC AUC is a function of per-sample sums: each rank adds its batches' sums
(:meth:`OutputMetrics.sums`, one float64 vector per output), the ranks all-reduce them, and
:meth:`OutputMetrics.finish` turns the totals into the metrics. ROC AUC ranks every score, so
the scores are gathered (:meth:`OutputMetrics.scores`). Runs on every rank.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ludwig_hpo.config.metrics import METRICS
from ludwig_hpo.config.outputs import AnyOutput
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.losses import OutputLoss, num_classes


def _ratio(a: float, b: float) -> float:
    """``a / b``, 0 when ``b`` is 0 (scikit-learn's and torchmetrics' zero division)."""
    return a / b if b else 0.0


class OutputMetrics:
    """The metrics of one output feature.

    Args:
        feature: the output feature's config; meta: its :class:`FeatureMeta` (classes, size).
        loss: its loss (the ``loss`` metric is that loss over the split).

    ``sums(logits, target)`` -> (:attr:`size`,) float64 sums of a batch; ``finish(totals,
    samples, scores)`` -> ``{metric: value}`` for every metric of the output's type.
    """

    #: the calibrated temperature of a binary's or category's logits (1: none; also the value
    #: of a model pickled without it)
    temperature = 1.0

    def __init__(self, feature: AnyOutput, meta: FeatureMeta | None, loss: OutputLoss) -> None:
        self.kind = feature.type
        self.loss = loss
        self.names = tuple(METRICS[feature.type])
        self.width = max(num_classes(feature, meta), 1)
        self.threshold = float(getattr(feature, "threshold", 0.5))
        self.clip = getattr(feature, "clip", None)
        self.softmax = bool(getattr(feature, "softmax", False))
        self.top_k = min(int(getattr(feature, "top_k", 0)), self.width)
        #: whether :meth:`scores` is needed (ROC AUC)
        self.gathers = "roc_auc" in self.names
        #: a binary's or category's logits are divided by it before the sigmoid or softmax of
        #: its probabilities (``calibration``: :mod:`ludwig_hpo.model.calibration`)
        self.temperature = 1.0
        per = {"number": 6, "binary": 4, "category": 2, "set": 1, "vector": 1 + 3 * self.width}
        self.size = 3 + per[self.kind]

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        """What the predictions are made of: a number's output clipped to ``clip``, a vector's
        softmaxed with ``softmax``, a binary's or category's logits divided by the calibrated
        temperature, else the output as it is."""
        if self.kind in ("binary", "category") and self.temperature != 1.0:
            return logits / self.temperature
        if self.kind == "number" and self.clip is not None:
            return logits.clamp(self.clip[0], self.clip[1])
        if self.kind == "vector" and self.softmax:
            return torch.softmax(logits, dim=-1)
        return logits

    @torch.no_grad()
    def sums(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(size,) float64: the loss's three sums, then the type's own."""
        z = logits.detach().float()
        parts = [self.loss.sums(z, target).double()]
        t = target.double()
        if self.kind in ("number", "vector"):
            p = self.predictions(z).double()
            err = p - t
            if self.kind == "number":
                pct = err.abs() / t.abs().clamp_min(1.17e-06)
                parts.append(
                    torch.stack(
                        [(err**2).sum(), err.abs().sum(), pct.sum(), ((err / t) ** 2).sum(), t.sum(), (t**2).sum()]
                    )
                )
            else:
                parts += [err.abs().sum().reshape(1), (err**2).sum(0), t.sum(0), (t**2).sum(0)]
        elif self.kind == "binary":
            pred = torch.sigmoid(self.predictions(z)) >= self.threshold
            truth = t > 0.5
            parts.append(
                torch.stack(
                    [(pred & truth).sum(), (pred & ~truth).sum(), (~pred & truth).sum(), (~pred & ~truth).sum()]
                ).double()
            )
        elif self.kind == "category":
            correct = (z.argmax(-1) == target).sum().double()
            hits = (
                (z.topk(self.top_k, dim=-1).indices == target.unsqueeze(-1)).any(-1).sum().double()
                if self.top_k > 0
                else correct * 0
            )
            parts.append(torch.stack([correct, hits]))
        else:  # set
            pred = torch.sigmoid(z) >= self.threshold
            truth = t > 0.5
            inter = (pred & truth).sum(-1).double()
            union = (pred | truth).sum(-1).double()
            jaccard = torch.where(union > 0, inter / union.clamp_min(1), torch.ones_like(union))
            parts.append(jaccard.sum().reshape(1))
        return torch.cat([p.reshape(-1) for p in parts])

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        """What ROC AUC ranks: a binary's logit (batch,), a category's probabilities (batch, classes)."""
        z = self.predictions(logits.detach().float())
        return torch.softmax(z, dim=-1) if self.kind == "category" else z

    def finish(
        self, totals: list[float], samples: float, scores: tuple[np.ndarray, np.ndarray] | None = None
    ) -> dict[str, float]:
        """``{metric: value}`` from the all-reduced :meth:`sums` of ``samples`` rows (and, for
        ROC AUC, every row's :meth:`scores` and target)."""
        n = max(samples, 1.0)
        out = {"loss": float(self.loss.finish(totals[0], totals[1], totals[2], n))}
        s = totals[3:]
        if self.kind == "number":
            sse, sae, sape, sspe, st, st2 = s
            out["mean_squared_error"] = sse / n
            out["mean_absolute_error"] = out["mae"] = sae / n
            out["root_mean_squared_error"] = math.sqrt(sse / n)
            out["root_mean_squared_percentage_error"] = math.sqrt(sspe / n) if math.isfinite(sspe) else math.inf
            out["mean_absolute_percentage_error"] = sape / n
            out["r2"] = _r2(sse, st2 - st * st / n)
        elif self.kind == "vector":
            d = self.width
            sq_err, t_sum, t_sq = np.array(s[1 : 1 + d]), np.array(s[1 + d : 1 + 2 * d]), np.array(s[1 + 2 * d :])
            out["mean_squared_error"] = float(sq_err.sum()) / (n * d)
            out["mean_absolute_error"] = s[0] / (n * d)
            sst = t_sq - t_sum * t_sum / n
            out["r2"] = float(np.mean([_r2(float(sq_err[i]), float(sst[i])) for i in range(d)]))
        elif self.kind == "binary":
            tp, fp, fn, tn = s
            out["accuracy"] = (tp + tn) / n
            out["precision"] = _ratio(tp, tp + fp)
            out["recall"] = _ratio(tp, tp + fn)
            out["specificity"] = _ratio(tn, tn + fp)
        elif self.kind == "category":
            out["accuracy"] = s[0] / n
            out["hits_at_k"] = s[1] / n
        else:
            out["jaccard"] = s[0] / n
        if self.gathers:
            out["roc_auc"] = float("nan") if scores is None else self.roc_auc(*scores)
        return out

    def roc_auc(self, scores: np.ndarray, labels: np.ndarray) -> float:
        """Binary: :func:`roc_auc` of the logits; category: the mean over classes (one against
        the rest) of each class's ROC AUC, over the classes present and absent in ``labels``
        (scikit-learn's ``multi_class="ovr", average="macro"``); NaN when none is."""
        if self.kind == "binary":
            return roc_auc(scores, labels)
        ids = np.asarray(labels).astype(np.int64)
        per = [roc_auc(scores[:, c], (ids == c).astype(np.float64)) for c in range(scores.shape[1]) if scores.size]
        per = [v for v in per if not math.isnan(v)]
        return float(np.mean(per)) if per else float("nan")


def _r2(sse: float, sst: float) -> float:
    """1 - SS_res / SS_tot (scikit-learn's r2_score: 1 for a perfect fit of a constant target, else 0)."""
    if sst <= 0:
        return 1.0 if sse == 0 else 0.0
    return 1.0 - sse / sst


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
