"""Combiners that keep a sequence: ``sequence_concat`` (Ludwig's main sequence, the others tiled
along it, padding zeroed, then ``reduce_output``) and ``transformer`` with ``reduce_output: null``."""

from __future__ import annotations

import pytest
import torch
from pydantic import TypeAdapter

from ludwig_hpo.config.combiners import CombinerConfig
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model.combiners import EncodedInput, build_combiner
from ludwig_hpo.model.combiners.base import SequenceReducer

COMBINER = TypeAdapter(CombinerConfig)
LENGTH = 5
INPUTS = [
    EncodedInput("n", "number", 2),
    EncodedInput("tokens", "sequence", 3, length=LENGTH),
    EncodedInput("chars", "sequence", 4, length=LENGTH),
]


def _encodings() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    tokens = torch.randn(2, LENGTH, 3)
    tokens[0, 3:] = 0  # row 0 is 3 long: positions 3 and 4 are padding
    return {"n": torch.randn(2, 2), "tokens": tokens, "chars": torch.randn(2, LENGTH, 4)}


def _build(raw: dict, inputs: list[EncodedInput] = INPUTS) -> torch.nn.Module:
    return build_combiner(COMBINER.validate_python({"type": "sequence_concat", **raw}), inputs)


def test_sequence_concat_keeps_the_sequence_by_default():
    combiner = _build({})
    assert combiner.sequence is True and combiner.output_size == 3 + 2 + 4
    enc = _encodings()
    out = combiner(enc)
    assert out.shape == (2, LENGTH, 9)
    # the first input with a sequence is the main one; the vector is repeated at each position
    assert torch.equal(out[1, :, :3], enc["tokens"][1])
    assert torch.equal(out[1, :, 3:5], enc["n"][1].expand(LENGTH, 2))
    assert torch.equal(out[1, :, 5:], enc["chars"][1])
    # past the main sequence's length every column is zeroed, the other inputs' too
    assert torch.equal(out[0, 3:], torch.zeros(2, 9)) and (out[0, :3, 3:] != 0).all()


def test_main_sequence_feature_and_reductions():
    enc = _encodings()
    chars_first = _build({"main_sequence_feature": "chars"})
    assert torch.equal(chars_first(enc)[0, :, :4], enc["chars"][0])  # not masked: chars has no padding
    for mode, width in [("sum", 9), ("mean", 9), ("avg", 9), ("max", 9), ("last", 9), ("concat", 45)]:
        combiner = _build({"reduce_output": mode})
        assert combiner.sequence is False and combiner.output_size == width
        assert combiner(enc).shape == (2, width)
    last = _build({"reduce_output": "last"})(enc)
    full = _build({})(enc)
    assert torch.equal(last[0], full[0, 2]) and torch.equal(last[1], full[1, LENGTH - 1])


def test_sequence_concat_needs_one_sequence_of_one_length():
    with pytest.raises(ConfigError, match="needs a sequence"):
        _build({}, [EncodedInput("n", "number", 2)])
    with pytest.raises(ConfigError, match="sequence length 4"):
        _build({}, [EncodedInput("a", "sequence", 3, length=5), EncodedInput("b", "sequence", 3, length=4)])


def test_attention_reduction_is_a_weighted_mean_of_positions():
    reducer = SequenceReducer("attention", LENGTH, 3)
    x = torch.ones(2, LENGTH, 3)
    assert torch.allclose(reducer(x), torch.ones(2, 3), atol=1e-6)  # softmax weights sum to 1


def test_transformer_without_reduction_returns_one_token_per_input():
    raw = {"type": "transformer", "hidden_size": 4, "num_heads": 2, "reduce_output": None}
    inputs = [
        EncodedInput("a", "number", 1),
        EncodedInput("b", "category", 3),
        EncodedInput("s", "sequence", 2, length=3),
    ]
    combiner = build_combiner(COMBINER.validate_python(raw), inputs)
    assert combiner.sequence is True and combiner.output_size == 4 and combiner.fc is None
    enc = {"a": torch.randn(2, 1), "b": torch.randn(2, 3), "s": torch.randn(2, 3, 2)}  # s is flattened to 6
    assert combiner(enc).shape == (2, 3, 4)
