"""Ludwig's ``concat`` and ``sequence_concat`` combiners."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ludwig_hpo.config.combiners import ConcatCombiner as ConcatConfig
from ludwig_hpo.config.combiners import SequenceConcatCombiner as SequenceConcatConfig
from ludwig_hpo.model.combiners.base import (
    EncodedInput,
    SequenceReducer,
    build_error,
    flatten,
    sequence_length,
    sequence_mask,
)
from ludwig_hpo.model.combiners.fc import fc_stack


class ConcatCombiner(nn.Module):
    """The encodings joined along their last axis ((batch, sum of widths); with
    ``flatten_inputs`` a sequence encoding is flattened first), then the fully connected stack
    (none by default: the output is the concatenation itself)."""

    ludwig_initialized = True
    sequence = False

    def __init__(self, cfg: ConcatConfig, inputs: list[EncodedInput]) -> None:
        super().__init__()
        seq = [i.name for i in inputs if i.length is not None]
        if seq and not cfg.flatten_inputs:
            raise build_error(
                f"the concat combiner joins (batch, width) encodings, but {seq} keep their sequence",
                "combiner.flatten_inputs",
                "set flatten_inputs: true, give those encoders a reduce_output, or use type sequence_concat",
            )
        self.names = [i.name for i in inputs]
        self.flatten_inputs = cfg.flatten_inputs
        width = sum(i.flat_size for i in inputs)
        self.fc = fc_stack(cfg, width, activation_key="activation", dropout_key="dropout", residual=cfg.residual)
        self.output_size = self.fc.output_size

    def join(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        """(batch, sum of widths): the encodings in input order, flattened when asked."""
        parts = [encodings[n] for n in self.names]
        if self.flatten_inputs:
            parts = [flatten(p) for p in parts]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def forward(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.fc(self.join(encodings))

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        # Models saved when the combiner was a plain Sequential of (Linear, ReLU, Dropout) blocks
        # keep their weights under "<prefix><3 i>.weight": the i-th layer's linear.
        for key in [k for k in state_dict if k.startswith(prefix)]:
            head, _, leaf = key[len(prefix) :].partition(".")
            if head.isdigit() and leaf in ("weight", "bias") and int(head) % 3 == 0:
                state_dict[f"{prefix}fc.layers.{int(head) // 3}.linear.{leaf}"] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class SequenceConcatCombiner(nn.Module):
    """The main sequence feature's (batch, length, width) encoding joined along the last axis
    with every other input (a sequence of the same length as it is, a vector repeated at each
    position); positions past the main sequence's length (its non-zero rows) are zeroed; then
    ``reduce_output`` (null: (batch, length, total width) for the heads).

    The main sequence feature is ``main_sequence_feature``, else the first input that keeps a
    sequence (Ludwig's rule)."""

    ludwig_initialized = True

    def __init__(self, cfg: SequenceConcatConfig, inputs: list[EncodedInput]) -> None:
        super().__init__()
        seqs = [i for i in inputs if i.length is not None]
        main = next((i for i in inputs if i.name == cfg.main_sequence_feature), None)
        if main is None:
            main = seqs[0] if seqs else None
        if main is None or main.length is None:
            which = f"main_sequence_feature {cfg.main_sequence_feature!r}" if cfg.main_sequence_feature else "no input"
            raise build_error(
                f"the sequence_concat combiner needs a sequence, but {which} keeps one",
                "combiner.main_sequence_feature",
                "give a sequence input's encoder reduce_output: null, or use combiner type concat",
            )
        for i in seqs:
            if i.length != main.length:
                raise build_error(
                    f"{i.name!r} has sequence length {i.length} but the main sequence {main.name!r} has {main.length}",
                    "combiner.main_sequence_feature",
                    "give both features the same max_sequence_length, or reduce the output of one of them",
                )
        self.main = main.name
        self.others = [i.name for i in inputs if i.name != main.name]
        self.length = main.length
        width = main.width + sum(i.width for i in inputs if i.name != main.name)
        self.reduce = SequenceReducer(cfg.reduce_output, main.length, width)
        self.sequence = self.reduce.keeps_sequence
        self.output_size = self.reduce.output_size

    def forward(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        main = encodings[self.main]
        length = main.shape[1]
        parts = [main]
        for name in self.others:
            x = encodings[name]
            parts.append(x if x.dim() == 3 else x.unsqueeze(1).expand(-1, length, -1))
        hidden = torch.cat(parts, dim=2)
        mask = sequence_mask(sequence_length(main), length)
        return self.reduce(hidden * mask.unsqueeze(-1).to(hidden.dtype))
