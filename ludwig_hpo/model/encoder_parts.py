"""Building blocks of Ludwig's encoders (``ludwig/modules/{embedding,reduction,convolutional,
recurrent}_modules.py``): embedding tables, the sequence reduction, 1-d convolution layers, the
recurrent stack, and an encoder section's fully connected stack. Runs on every rank;
parameters come from torch's global RNG in construction order."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ludwig_hpo.model.combiners.fc import FCStack, activation, layer_specs
from ludwig_hpo.model.init import init_embedding


def fc_stack(cfg: Any, in_size: int, num_layers: int, *, act: str | None = None, drop: float | None = None) -> FCStack:
    """An encoder section's fully connected stack (``fc_layers``, else ``num_layers`` layers of
    ``output_size``; ``act``/``drop`` replace the section's ``activation``/``dropout``):
    (batch, in_size) -> (batch, output_size); no layers is the identity."""
    defaults = {
        "output_size": cfg.output_size,
        "use_bias": cfg.use_bias,
        "weights_initializer": cfg.weights_initializer,
        "bias_initializer": cfg.bias_initializer,
        "norm": cfg.norm,
        "norm_params": cfg.norm_params,
        "activation": cfg.activation if act is None else act,
        "dropout": cfg.dropout if drop is None else drop,
    }
    return FCStack(in_size, layer_specs(cfg.fc_layers, num_layers, defaults))


class Embedding(nn.Module):
    """Ludwig's ``embedding_matrix``: ids (any shape) -> (..., size). ``dense``: a learned table
    of ``min(embedding_size, vocab_size)`` columns (``embedding_size`` exactly when ``force``),
    filled by ``initializer`` (uniform(-1, 1) when None), frozen unless ``trainable``;
    ``sparse``: fixed one-hot rows (``size == vocab_size``). Dropout on the result."""

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int,
        *,
        representation: str = "dense",
        trainable: bool = True,
        force: bool = False,
        initializer: Any = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if representation == "sparse":
            self.size = vocab_size
            self.table = nn.Embedding(vocab_size, vocab_size)
            with torch.no_grad():
                self.table.weight.copy_(torch.eye(vocab_size))
            self.table.weight.requires_grad_(False)
        else:
            self.size = embedding_size if force else min(embedding_size, vocab_size)
            self.table = nn.Embedding(vocab_size, self.size)
            init_embedding(self.table, initializer)
            self.table.weight.requires_grad_(trainable)
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    @property
    def weight(self) -> torch.Tensor:
        """The (vocab_size, size) table."""
        return self.table.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.table(ids.long()))


def reduce_sequence(x: torch.Tensor, mode: str | None) -> torch.Tensor:
    """Ludwig's ``SequenceReducer`` over axis 1 of (batch, length, size): ``sum``, ``mean`` /
    ``avg``, ``max``, ``concat`` (batch, length * size), ``last`` (the last step whose vector is
    not all zeros, Ludwig's length rule), None (unchanged)."""
    if mode is None:
        return x
    if mode == "sum":
        return x.sum(dim=1)
    if mode in ("mean", "avg"):
        return x.mean(dim=1)
    if mode == "max":
        return x.amax(dim=1)
    if mode == "concat":
        return x.reshape(x.shape[0], -1)
    if mode == "last":
        used = (x.abs().amax(dim=2) > 0).long()
        idx = (used.sum(dim=1) - 1).clamp(min=0)
        return x[torch.arange(x.shape[0], device=x.device), idx]
    raise ValueError(f"no reduction {mode!r}")


def reduced_width(mode: str | None, length: int, size: int) -> int:
    """The width :func:`reduce_sequence` leaves of (length, size) steps (``concat``: their product)."""
    return length * size if mode == "concat" else size


class Conv1DLayer(nn.Module):
    """Ludwig's ``Conv1DLayer``: (batch, length, in_channels) -> (batch, length', num_filters):
    Conv1d (``padding`` same or valid), norm, activation, dropout, then pooling of
    ``pool_size`` (none when None) by ``pool_strides`` (``pool_size`` when None)."""

    def __init__(self, in_channels: int, length: int, spec: dict[str, Any]) -> None:
        super().__init__()
        k, stride, dil = int(spec["filter_size"]), int(spec.get("strides", 1)), int(spec.get("dilation_rate", 1))
        same = spec.get("padding", "same") == "same"
        # "same" as torch computes it (left: half the total, right: the rest), padded by hand so
        # an even filter width pads without torch's copy warning
        total = dil * (k - 1) if same else 0
        self.same_pad = (total // 2, total - total // 2) if same and stride == 1 else None
        pad = 0 if self.same_pad is not None else (total // 2 if same else 0)
        n = int(spec["num_filters"])
        self.conv = nn.Conv1d(
            in_channels, n, k, stride=stride, padding=pad, dilation=dil, bias=bool(spec.get("use_bias", True))
        )
        norm, params = spec.get("norm"), dict(spec.get("norm_params") or {})
        self.batch_norm = nn.BatchNorm1d(n, **params) if norm == "batch" else None
        self.layer_norm = nn.LayerNorm(n, **params) if norm == "layer" else None
        self.act = activation(spec.get("activation", "relu"))
        self.drop = nn.Dropout(float(spec.get("dropout", 0.0)))
        size = spec.get("pool_size")
        #: (pool size, pool stride), or None without pooling
        self.pool = (int(size), int(spec.get("pool_strides") or size)) if size else None
        self.pool_same = spec.get("pool_padding", "same") == "same"
        self.pool_avg = spec.get("pool_function", "max") in ("average", "avg", "mean")
        out = length if self.same_pad is not None else (length + 2 * pad - dil * (k - 1) - 1) // stride + 1
        if self.pool is not None:
            p, s = self.pool
            out = math.ceil(out / s) if self.pool_same else (out - p) // s + 1
        if out < 1:
            raise ValueError(f"a sequence of {length} steps is too short for filter {k} and pooling {self.pool}")
        self.length = out
        self.output_size = n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.transpose(1, 2)
        h = self.conv(F.pad(h, self.same_pad) if self.same_pad is not None else h)
        if self.batch_norm is not None:
            h = self.batch_norm(h)
        if self.layer_norm is not None:
            h = self.layer_norm(h.transpose(1, 2)).transpose(1, 2)
        h = self.drop(self.act(h))
        if self.pool is not None:
            p, s = self.pool
            if self.pool_same:  # Ludwig's "same" pooling: ceil(length / stride) outputs
                need = max(0, (math.ceil(h.shape[-1] / s) - 1) * s + p - h.shape[-1])
                h = F.pad(h, (need // 2, need - need // 2), value=0.0 if self.pool_avg else float("-inf"))
            h = F.avg_pool1d(h, p, s) if self.pool_avg else F.max_pool1d(h, p, s)
        return h.transpose(1, 2)


#: Ludwig's recurrent cells by ``cell_type`` (the block / cudnn / ln variants are torch's LSTM and GRU).
CELLS: dict[str, Callable[..., nn.Module]] = {
    "rnn": nn.RNN,
    "lstm": nn.LSTM,
    "lstm_block": nn.LSTM,
    "ln": nn.LSTM,
    "lstm_cudnn": nn.LSTM,
    "gru": nn.GRU,
    "gru_block": nn.GRU,
    "gru_cudnn": nn.GRU,
}


class RecurrentStack(nn.Module):
    """Ludwig's ``RecurrentStack``: (batch, length, in_size) -> (batch, length, hidden_size,
    doubled when ``bidirectional``); ``dropout`` between layers; ``activation`` is the plain
    ``rnn`` cell's (tanh or relu)."""

    def __init__(
        self,
        in_size: int,
        hidden_size: int,
        cell_type: str,
        num_layers: int,
        bidirectional: bool,
        use_bias: bool,
        dropout: float,
        activation_name: str,
    ) -> None:
        super().__init__()
        kwargs: dict[str, Any] = {"nonlinearity": activation_name} if cell_type == "rnn" else {}
        self.rnn = CELLS[cell_type](
            in_size,
            hidden_size,
            num_layers=num_layers,
            bias=use_bias,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
            bidirectional=bidirectional,
            **kwargs,
        )
        self.output_size = hidden_size * (2 if bidirectional else 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return out
