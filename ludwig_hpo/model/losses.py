"""Each output's loss as Ludwig's ``loss`` section defines it (``ludwig/modules/loss_modules.py``).

A loss is kept as three sums over samples, so that a split's loss is exact across DDP ranks
(the ranks all-reduce the sums, then :meth:`OutputLoss.finish` is applied once):

* ``weighted``: the sum of each sample's term times its weight (a category's class weight, else 1),
* ``weights``: the sum of the weights,
* ``penalty``: the sum of each sample's confidence penalty (0 without ``confidence_penalty``),

and the loss is ``post(weighted / weights) + confidence_penalty * penalty / samples``, where
``post`` is the square root of the ``root_`` losses and ``(1 - robust_lambda) * x +
robust_lambda / classes`` with ``robust_lambda``. A training step's loss is the same formula
over its batch (differentiable). Runs on every rank.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ludwig_hpo.config.outputs import AnyOutput
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.errors import ConfigError

#: Ludwig's name of the unknown class, whose weight (first in a list) outputs here do not have.
UNKNOWN = "<UNK>"
#: torchmetrics' floor of |target| in a percentage error.
_EPS = 1.17e-06


def num_classes(feature: AnyOutput, meta: FeatureMeta | None) -> int:
    """Width of the output's logits: classes (category, set), the vector's size, else 1."""
    if feature.type in ("category", "set"):
        return len(meta.vocab) if meta is not None else 0
    if feature.type == "vector":
        return int(meta.shape[0]) if meta is not None and meta.shape else 0
    return 1


def _per_class(values: Any, feature: AnyOutput, meta: FeatureMeta | None, key: str) -> np.ndarray:
    """A per-class list (optionally with Ludwig's leading ``<UNK>`` entry) or ``{class: value}``
    as a float64 vector in the output's class order.

    Raises:
        ConfigError: a list of another length, or a mapping missing a class or naming an unknown one.
    """
    where = f"output_features[{feature.name}].loss.{key}"
    n = num_classes(feature, meta)
    if isinstance(values, Mapping):
        if meta is None or not meta.vocab:
            raise ConfigError(f"{{class: weight}} needs the output's classes; a {feature.type} has none", key=where)
        by_name = {str(k): float(v) for k, v in values.items()}
        names = [str(c) for c in meta.vocab]
        missing = [c for c in names if c not in by_name]
        unknown = sorted(set(by_name) - set(names) - {UNKNOWN})
        if missing or unknown:
            raise ConfigError(
                f"the classes are {names}, but {key} misses {missing} and names {unknown}",
                key=where,
                fix="give one value per class, named as in the data",
            )
        return np.array([by_name[c] for c in names], dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == n + 1 and feature.type != "vector":
        arr = arr[1:]  # Ludwig's vocabulary starts with <UNK>, which these outputs do not predict
    if len(arr) != n:
        order = f" (in this order: {[str(c) for c in meta.vocab]})" if meta is not None and meta.vocab else ""
        raise ConfigError(
            f"{key} has {len(arr)} values but the output has {n} classes", key=where, fix=f"give {n} values{order}"
        )
    return arr


def _similarity_targets(
    sims: Sequence[Sequence[float]], temperature: float, feature: AnyOutput, meta: Any
) -> np.ndarray:
    """Ludwig's supervision rows: each row of ``class_similarities`` softmaxed at ``temperature``
    (``exp((x - max) / t)`` normalized), a leading ``<UNK>`` row and column dropped.

    Raises:
        ConfigError: a matrix whose size is not the number of classes (or that plus one).
    """
    s = np.asarray(sims, dtype=np.float64)
    n = num_classes(feature, meta)
    if len(s) == n + 1:
        s = s[1:, 1:]
    if s.shape != (n, n):
        raise ConfigError(
            f"class_similarities is {len(sims)} x {len(sims)} but the output has {n} classes",
            key=f"output_features[{feature.name}].loss.class_similarities",
            fix=f"give a {n} x {n} matrix in the classes' order",
        )
    e = np.exp((s - s.max(axis=1, keepdims=True)) / temperature)
    return e / e.sum(axis=1, keepdims=True)


def _entropy_penalty(probs: torch.Tensor, classes: int) -> torch.Tensor:
    """(batch, classes) probabilities -> (batch,) ``(log classes - entropy) / log classes``."""
    max_entropy = math.log(classes)
    entropy = (-(probs * torch.log(probs.clamp(1e-10, 1.0))).sum(-1)).clamp_min(0)
    return (max_entropy - entropy) / max_entropy


class OutputLoss:
    """One output feature's loss (its ``loss`` section, resolved against the data).

    ``sums(logits, target)`` -> (3,) tensor ``[weighted, weights, penalty]`` of a batch;
    ``finish(weighted, weights, penalty, samples)`` -> the loss; ``__call__(logits, target)``
    -> the batch's mean loss (0-dim, differentiable). Logits and targets as
    :class:`~ludwig_hpo.model.outputs.OutputHeads` and ``PreparedData.targets`` shape them.

    Raises:
        ConfigError: class weights or similarities that do not fit the output's classes.
    """

    def __init__(self, feature: AnyOutput, meta: FeatureMeta | None) -> None:
        cfg = feature.loss
        self.kind = feature.type
        self.type = "softmax_cross_entropy" if cfg.type == "sparse_softmax_cross_entropy" else cfg.type
        self.weight = float(cfg.weight)
        self.classes = max(num_classes(feature, meta), 2)
        self.robust_lambda = float(getattr(cfg, "robust_lambda", 0.0))
        self.confidence_penalty = float(getattr(cfg, "confidence_penalty", 0.0))
        self.delta = float(getattr(cfg, "delta", 1.0))
        self.root = self.type in ("root_mean_squared_error", "root_mean_squared_percentage_error")
        cw = getattr(cfg, "class_weights", None)
        self.class_weights = None if cw is None else _per_class(cw, feature, meta, "class_weights")
        pcw = getattr(cfg, "positive_class_weight", None)
        self.class_weights = np.array([pcw], dtype=np.float64) if pcw else self.class_weights
        sims = getattr(cfg, "class_similarities", None)
        temperature = float(getattr(cfg, "class_similarities_temperature", 0.0))
        self.similarities = (
            _similarity_targets(sims, temperature, feature, meta)
            if sims is not None and temperature > 0 and self.kind == "category"
            else None
        )
        self._on: dict[tuple[str, torch.dtype], tuple[torch.Tensor | None, torch.Tensor | None]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_on": {}}  # the device copies are made again where it is loaded

    def _tensors(self, like: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The class weights and similarity rows on ``like``'s device and dtype (made once)."""
        key = (str(like.device), like.dtype)
        if key not in self._on:
            cw, sims = self.class_weights, self.similarities
            self._on[key] = (
                None if cw is None else torch.as_tensor(cw, dtype=like.dtype, device=like.device),
                None if sims is None else torch.as_tensor(sims, dtype=like.dtype, device=like.device),
            )
        return self._on[key]

    def terms(
        self, logits: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Per sample: (batch,) term, (batch,) weight or None (all 1), (batch,) penalty or None."""
        z = logits.float()
        weights, sims = self._tensors(z)
        t = self.type
        if t in ("mean_squared_error", "root_mean_squared_error"):
            return _rows((z - target) ** 2), None, None
        if t == "mean_absolute_error":
            return _rows((z - target).abs()), None, None
        if t == "mean_absolute_percentage_error":
            return _rows((z - target).abs() / target.abs().clamp_min(_EPS)), None, None
        if t == "root_mean_squared_percentage_error":
            return _rows(((target - z) / target) ** 2), None, None
        if t == "huber":
            return _rows(F.huber_loss(z, target, reduction="none", delta=self.delta)), None, None
        if t == "binary_weighted_cross_entropy":
            term = F.binary_cross_entropy_with_logits(z, target.float(), pos_weight=weights, reduction="none")
            penalty = None
            if self.confidence_penalty > 0:
                p = torch.sigmoid(z)
                penalty = _entropy_penalty(torch.stack([p, 1 - p], dim=-1), 2)
            return term, None, penalty
        if t == "sigmoid_cross_entropy":
            return (
                _rows(F.binary_cross_entropy_with_logits(z, target, pos_weight=weights, reduction="none")),
                None,
                None,
            )
        # softmax_cross_entropy: a category (class ids) or a vector (a distribution per row)
        logp = torch.log_softmax(z, dim=-1)
        penalty = _entropy_penalty(logp.exp(), z.shape[-1]) if self.confidence_penalty > 0 else None
        if self.kind == "vector":
            q = target if weights is None else target * weights
            return -(q * logp).sum(-1), None, penalty
        if sims is not None:
            term = -(sims.index_select(0, target) * logp).sum(-1)
        else:
            term = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        return term, (None if weights is None else weights.index_select(0, target)), penalty

    def sums(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(3,) ``[weighted, weights, penalty]`` of the batch (float32, differentiable)."""
        term, w, penalty = self.terms(logits, target)
        n = term.new_tensor(float(term.shape[0]))
        weighted = term.sum() if w is None else (term * w).sum()
        return torch.stack(
            [weighted, n if w is None else w.sum(), term.new_zeros(()) if penalty is None else penalty.sum()]
        )

    def finish(self, weighted: Any, weights: Any, penalty: Any, samples: Any) -> Any:
        """The loss from the sums (floats or tensors alike)."""
        base = weighted / weights if isinstance(weights, torch.Tensor) or weights else weighted * 0.0
        if self.root:
            base = base**0.5
        if self.robust_lambda > 0:
            base = (1 - self.robust_lambda) * base + self.robust_lambda / self.classes
        if self.confidence_penalty > 0:
            base = base + self.confidence_penalty * penalty / samples
        return base

    def __call__(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # :meth:`finish` of :meth:`sums`, without stacking the sums (a training step's hot path)
        term, w, penalty = self.terms(logits, target)
        base = term.mean() if w is None else (term * w).sum() / w.sum()
        if self.root:
            base = base.sqrt()
        if self.robust_lambda > 0:
            base = (1 - self.robust_lambda) * base + self.robust_lambda / self.classes
        if penalty is not None:
            base = base + self.confidence_penalty * penalty.mean()
        return base


def _rows(x: torch.Tensor) -> torch.Tensor:
    """Elementwise losses -> (batch,): a vector's or set's elements averaged per row."""
    return x.mean(dim=-1) if x.dim() > 1 else x


class OutputLosses:
    """Every output's :class:`OutputLoss` and their weighted sum, Ludwig's combined loss.

    ``__call__(logits, targets)`` -> ``sum(loss.weight * loss)`` over the outputs (0-dim). A
    weight of 1 and a single output add no autograd node. Runs on every rank.

    Raises:
        ConfigError: as :class:`OutputLoss`.
    """

    def __init__(self, outputs: Sequence[AnyOutput], meta: Mapping[str, FeatureMeta] | None) -> None:
        from ludwig_hpo.model.llm_metrics import LLMLoss

        # an llm's text output: next-token cross entropy over its target tokens
        self.losses: dict[str, OutputLoss | LLMLoss] = {
            f.name: LLMLoss(f) if f.type == "text" else OutputLoss(f, None if meta is None else meta.get(f.name))
            for f in outputs
        }

    def __call__(self, logits: Mapping[str, torch.Tensor], targets: Mapping[str, torch.Tensor]) -> torch.Tensor:
        total: torch.Tensor | None = None
        for name, loss in self.losses.items():
            part = loss(logits[name], targets[name])
            if loss.weight != 1:
                part = loss.weight * part
            total = part if total is None else total + part
        if total is None:  # the schema requires at least one output feature
            raise ValueError("the config has no output feature")
        return total


def check_losses(outputs: Sequence[AnyOutput], meta: Mapping[str, FeatureMeta], source: str | None = None) -> None:
    """Resolve every output's loss against the prepared data's classes, so that a class weight
    or similarity matrix that does not fit is one line before any trial starts. Driver.

    Args:
        source: the sweep file, named by the error.

    Raises:
        ConfigError: a class weight list of the wrong length, a mapping missing a class, a
            similarity matrix of the wrong size, a ``vector_size`` the data does not have.
    """
    try:
        _check(outputs, meta)
    except ConfigError as e:
        raise ConfigError(e.message, source=source or e.source, key=e.key, fix=e.fix) from None


def _check(outputs: Sequence[AnyOutput], meta: Mapping[str, FeatureMeta]) -> None:
    OutputLosses(outputs, meta)
    for f in outputs:
        size = getattr(f, "vector_size", None)
        m = meta.get(f.name)
        if size is not None and m is not None and m.shape and int(m.shape[0]) != size:
            raise ConfigError(
                f"vector_size is {size} but the column holds vectors of {m.shape[0]} values",
                key=f"output_features[{f.name}].vector_size",
                fix=f"set vector_size: {m.shape[0]} or drop it",
            )
