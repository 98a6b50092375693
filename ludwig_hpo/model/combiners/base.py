"""What every combiner is handed and returns, and Ludwig's sequence reductions.

A combiner's ``forward(encodings)`` takes ``{input feature name: encoder output}`` in the order
of ``input_features`` ((batch, width), or (batch, length, width) from an encoder with
``sequence = True``) and returns the hidden tensor the output heads read: (batch,
``output_size``), or (batch, length, ``output_size``) when its ``sequence`` is True. Runs on
every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ludwig_hpo.errors import ConfigError

#: The key of a model's output dict that holds the combiner's auxiliary loss (0-dim) while
#: training (TabNet's sparsity loss), added to the training loss. No feature may be named so
#: (``combiner`` is a reserved name).
AUX_LOSS = "combiner"


@dataclass(frozen=True)
class EncodedInput:
    """One input feature as its combiner sees it: ``name``, Ludwig ``type``, the encoder's
    ``width`` (its ``output_size``) and, for a sequence encoder, the sequence ``length``
    (None for a (batch, width) encoding)."""

    name: str
    type: str
    width: int
    length: int | None = None

    @property
    def flat_size(self) -> int:
        """The encoding's size flattened to a vector (length x width for a sequence)."""
        return self.width * (self.length or 1)


def flatten(x: torch.Tensor) -> torch.Tensor:
    """(batch, ...) -> (batch, prod(...))."""
    return x.reshape(x.shape[0], -1)


def build_error(message: str, key: str, fix: str) -> ConfigError:
    """The one-line error of a combiner that cannot take its inputs (found when the model is built)."""
    return ConfigError(message, key=key, fix=fix)


def refuse_sequences(kind: str, inputs: list[EncodedInput], key: str = "combiner.type") -> None:
    """Raise a one-line error when an input keeps its sequence but ``kind`` takes vectors only."""
    seq = [i.name for i in inputs if i.length is not None]
    if seq:
        raise build_error(
            f"the {kind} combiner takes (batch, width) encodings, but {seq} keep their sequence (reduce_output: null)",
            key,
            "give those encoders a reduce_output, or use combiner type sequence_concat",
        )


def sequence_length(x: torch.Tensor) -> torch.Tensor:
    """(batch, length, width) -> (batch,) int64: the positions with a non-zero vector (Ludwig's
    ``sequence_length_3D``, which counts padding as all-zero rows)."""
    return (x.abs().amax(dim=2) > 0).sum(dim=1)


def sequence_mask(lengths: torch.Tensor, max_length: int) -> torch.Tensor:
    """(batch,) lengths -> (batch, max_length) bool, True before each length."""
    return torch.arange(max_length, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


class AttentionReducer(nn.Module):
    """Ludwig's ``FeedForwardAttentionReducer``: softmax over positions of Linear(hidden 256) ->
    tanh -> Linear(1, no bias), the weighted sum of the positions."""

    def __init__(self, width: int, hidden_size: int = 256) -> None:
        super().__init__()
        self.fc_layer1 = nn.Linear(width, hidden_size)
        self.fc_layer2 = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attention = torch.softmax(self.fc_layer2(torch.tanh(self.fc_layer1(x))), dim=1)
        return (attention * x).sum(dim=1)


class SequenceReducer(nn.Module):
    """Ludwig's ``SequenceReducer``: (batch, length, width) -> (batch, width), or (batch, length x
    width) for ``concat``; ``None``/``none`` returns the sequence unchanged. ``mean`` averages
    every position, padding included, as Ludwig's ``ReduceMean`` does; ``last`` takes the last
    non-zero position."""

    def __init__(self, mode: str | None, length: int, width: int) -> None:
        super().__init__()
        self.mode = "mean" if mode == "avg" else (None if mode in (None, "none", "None") else mode)
        self.attention = AttentionReducer(width) if self.mode == "attention" else None
        self.output_size = width * length if self.mode == "concat" else width

    @property
    def keeps_sequence(self) -> bool:
        """True when the sequence is returned unchanged."""
        return self.mode is None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode is None:
            return x
        if self.mode == "sum":
            return x.sum(dim=1)
        if self.mode == "mean":
            return x.mean(dim=1)
        if self.mode == "max":
            return x.amax(dim=1)
        if self.mode == "concat":
            return flatten(x)
        if self.mode == "last":
            last = (sequence_length(x) - 1).clamp(min=0)
            return x[torch.arange(x.shape[0], device=x.device), last]
        assert self.attention is not None
        return self.attention(x)
