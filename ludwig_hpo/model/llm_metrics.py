"""The loss and teacher-forced metrics of an llm config's text output, as token sums.

Logits are (B, L', V) (position t predicts token t + 1; L' <= L when the model trimmed the
batch's trailing padding) and labels (B, L) int64 with :data:`~ludwig_hpo.data.llm.IGNORE_INDEX`
(-100) at the prompt and padding. The loss is next-token cross entropy over the target tokens
only (the labels shifted by one, -100 ignored), the mean over target tokens. A split's metrics
are functions of sums each rank adds and :mod:`ludwig_hpo.train.evaluate` all-reduces, so a DDP
evaluation counts every token once:

``[nll, tokens, 0, correct tokens, rows right, rows with a target]``

``loss`` = nll / tokens, ``perplexity`` = exp(loss), ``token_accuracy`` = correct / tokens,
``sequence_accuracy`` = rows whose every target token is the argmax / rows with a target.
Runs on every rank.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

#: The label of a position without loss (the value :mod:`ludwig_hpo.data.llm` writes).
IGNORE_INDEX = -100
#: The teacher-forced metrics of an llm text output, in report order.
TEACHER_FORCED = ("loss", "perplexity", "token_accuracy", "sequence_accuracy")


def shifted(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L'-1, V) logits of the positions that predict a next token and their (B, L'-1)
    labels (the labels one position on), both cut to the logits' width L'."""
    width = logits.shape[1]
    return logits[:, :-1], labels[:, 1:width]


class LLMLoss:
    """The loss of an llm text output: the interface of :class:`~ludwig_hpo.model.losses.OutputLoss`.

    ``__call__(logits, labels)`` -> mean cross entropy over the batch's target tokens (0-dim,
    differentiable; 0 with the graph kept when the batch has none); ``sums`` -> (3,)
    ``[nll, tokens, 0]``; ``finish(nll, tokens, penalty, samples)`` -> nll / tokens.
    """

    kind = "text"
    type = "next_token_softmax_cross_entropy"

    def __init__(self, feature: Any) -> None:
        loss = getattr(feature, "loss", None)
        self.weight = float(getattr(loss, "weight", 1.0))

    def __call__(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        z, y = shifted(logits, labels)
        flat_y = y.reshape(-1)
        count = (flat_y != IGNORE_INDEX).sum()
        total = F.cross_entropy(z.reshape(-1, z.shape[-1]).float(), flat_y, ignore_index=IGNORE_INDEX, reduction="sum")
        return total / count.clamp_min(1)

    def sums(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        z, y = shifted(logits, labels)
        flat_y = y.reshape(-1)
        nll = F.cross_entropy(z.reshape(-1, z.shape[-1]).float(), flat_y, ignore_index=IGNORE_INDEX, reduction="sum")
        count = (flat_y != IGNORE_INDEX).sum().to(nll.dtype)
        return torch.stack([nll, count, nll.new_zeros(())])

    def finish(self, weighted: Any, weights: Any, penalty: Any, samples: Any) -> Any:
        return weighted / weights if weights else weighted * 0.0


class LLMMetrics:
    """The teacher-forced metrics of an llm text output: the interface of
    :class:`~ludwig_hpo.model.metrics.OutputMetrics` (``sums``, ``finish``, ``size``,
    ``gathers``, ``names``, ``predictions``).

    ``sums(logits, labels)`` -> (6,) float64 (see the module docstring); ``finish(totals,
    samples)`` -> ``{loss, perplexity, token_accuracy, sequence_accuracy}``.
    """

    kind = "text"
    gathers = False
    size = 6
    temperature = 1.0

    def __init__(self, feature: Any, loss: LLMLoss | None = None) -> None:
        self.loss = loss or LLMLoss(feature)
        self.names = TEACHER_FORCED

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        return logits

    @torch.no_grad()
    def sums(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        z, y = shifted(logits.detach(), labels)
        parts = self.loss.sums(logits.detach(), labels).double()
        target = y != IGNORE_INDEX
        right = (z.argmax(-1) == y) & target
        per_row = target.sum(-1)
        has = per_row > 0
        whole = has & (right.sum(-1) == per_row)
        extra = torch.stack([right.sum(), whole.sum(), has.sum()]).double()
        return torch.cat([parts, extra])

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def finish(
        self, totals: list[float], samples: float, scores: tuple[np.ndarray, np.ndarray] | None = None
    ) -> dict[str, float]:
        nll, tokens, _, correct, whole, rows = totals[:6]
        loss = nll / tokens if tokens else math.nan
        return {
            "loss": loss,
            "perplexity": math.exp(loss) if math.isfinite(loss) and loss < 700 else math.inf,
            "token_accuracy": correct / tokens if tokens else 0.0,
            "sequence_accuracy": whole / rows if rows else 0.0,
        }
