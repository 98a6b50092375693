"""Ludwig's combiners: the encoder outputs of every input feature -> the hidden tensor the
output heads read. One module per family; :func:`build_combiner` picks the one a config names.

Every combiner has an int ``output_size``, a bool ``sequence`` (True: it returns (batch, length,
``output_size``)) and ``forward(encodings)`` over ``{input name: encoder output}``; those with
an auxiliary loss (``tabnet``) also have ``forward_with_loss``. Runs on every rank.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ludwig_hpo.config import combiners as cfgs
from ludwig_hpo.model.combiners.base import AUX_LOSS, EncodedInput
from ludwig_hpo.model.combiners.comparator import ComparatorCombiner
from ludwig_hpo.model.combiners.concat import ConcatCombiner, SequenceConcatCombiner
from ludwig_hpo.model.combiners.tabnet import TabNetCombiner
from ludwig_hpo.model.combiners.transformer import (
    FTTransformerCombiner,
    TabTransformerCombiner,
    TransformerCombiner,
)

__all__ = ["AUX_LOSS", "EncodedInput", "build_combiner"]

_BUILDERS: dict[type, Any] = {
    cfgs.ConcatCombiner: ConcatCombiner,
    cfgs.SequenceConcatCombiner: SequenceConcatCombiner,
    cfgs.TabNetCombiner: TabNetCombiner,
    cfgs.TransformerCombiner: TransformerCombiner,
    cfgs.TabTransformerCombiner: TabTransformerCombiner,
    cfgs.FTTransformerCombiner: FTTransformerCombiner,
    cfgs.ComparatorCombiner: ComparatorCombiner,
}


def build_combiner(cfg: Any, inputs: list[EncodedInput]) -> nn.Module:
    """The combiner of ``cfg`` (a member of :data:`~ludwig_hpo.config.combiners.CombinerConfig`)
    over ``inputs`` (in ``input_features`` order). Draws its parameters from torch's global RNG.

    Raises:
        ConfigError: the inputs do not fit the combiner (a kept sequence where it takes
            vectors, no sequence for ``sequence_concat``, sequences of different lengths).
        ValueError: a config type without an implementation (the schema prevents it).
    """
    builder = _BUILDERS.get(type(cfg))
    if builder is None:
        raise ValueError(f"no combiner for {type(cfg).__name__}")
    module: nn.Module = builder(cfg, inputs)
    return module
