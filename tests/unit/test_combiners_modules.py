"""Ludwig's combiners one by one: output shape and width, the parameters of a small config
counted by hand from Ludwig's architecture, and gradients reaching every parameter."""

from __future__ import annotations

import pytest
import torch
from pydantic import TypeAdapter

from ludwig_hpo.config.combiners import CombinerConfig
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model.combiners import EncodedInput, build_combiner

BATCH = 6
COMBINER = TypeAdapter(CombinerConfig)
#: widths 3 (category), 5 (category), 1 (number), 1 (binary)
INPUTS = [
    EncodedInput("c1", "category", 3),
    EncodedInput("c2", "category", 5),
    EncodedInput("n", "number", 1),
    EncodedInput("b", "binary", 1),
]
SMALL_TRANSFORMER = {"hidden_size": 4, "num_heads": 2, "transformer_output_size": 6}
# one transformer block of hidden 4, feed-forward 6: q, k, v, combine_heads 4 x (4*4+4) = 80,
# two layer norms 2 x 8 = 16, feed-forward (4*6+6) + (6*4+4) = 58
BLOCK = 80 + 16 + 58


def _build(raw: dict, inputs: list[EncodedInput] = INPUTS) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_combiner(COMBINER.validate_python(raw), inputs)


def _encodings(inputs: list[EncodedInput] = INPUTS) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {
        i.name: torch.randn(BATCH, *((i.length,) if i.length else ()), i.width, generator=g).requires_grad_()
        for i in inputs
    }


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


CASES = {
    # Ludwig's default concat: no fully connected layer, the concatenation itself (3+5+1+1)
    "concat-default": ({}, 10, 0),
    # 10 -> 4 (batch norm: 2 x 4) -> 4: (10*4+4+8) + (4*4+4+8)
    "concat-2-layers-batch-norm": ({"num_fc_layers": 2, "output_size": 4, "norm": "batch"}, 4, 52 + 28),
    # fc_layers: 10 -> 7 (no bias) -> 2 (layer norm: 2 x 2)
    "concat-fc-layers": (
        {"fc_layers": [{"output_size": 7, "use_bias": False}, {"output_size": 2, "norm": "layer"}]},
        2,
        70 + (7 * 2 + 2 + 4),
    ),
    # TabNet over 10 features, N_a 2, N_d 3 (width 5, GLU units 10), 2 steps, 2 blocks (1 shared):
    # input bn 20; step-0 transformer (10*10 + 20) + (5*10 + 20); steps 1..2 reuse the first
    # Linear: 2 x (20 + 50 + 20); attentive 2 x ((2*10) + 20); final projection 3*3+3
    "tabnet": (
        {"type": "tabnet", "size": 2, "output_size": 3, "num_steps": 2, "num_total_blocks": 2, "num_shared_blocks": 1},
        3,
        20 + 190 + 180 + 80 + 12,
    ),
    # 4 projectors to 4 (3*4+4, 5*4+4, 1*4+4, 1*4+4), one block, mean over the 4 tokens
    "transformer": ({"type": "transformer", **SMALL_TRANSFORMER}, 4, 16 + 24 + 8 + 8 + BLOCK),
    # ... and a fully connected layer 4 -> 2 after the reduction
    "transformer-fc": (
        {"type": "transformer", **SMALL_TRANSFORMER, "num_fc_layers": 1, "output_size": 2, "fc_activation": "tanh"},
        2,
        56 + BLOCK + 10,
    ),
    # tokens of the two categories only; number and binary (width 2) through a layer norm (4);
    # name embedding "add": one row per input (4 x 4); concat of the 2 tokens: 8 + 2 wide
    "tabtransformer-add": (
        {"type": "tabtransformer", **SMALL_TRANSFORMER, "embed_input_feature_name": "add"},
        10,
        16 + (16 + 24) + 4 + BLOCK,
    ),
    # name embedding of 1 concatenated: projectors to 3 (3*3+3, 5*3+3), embedding 4 x 1, mean
    "tabtransformer-int-mean": (
        {"type": "tabtransformer", **SMALL_TRANSFORMER, "embed_input_feature_name": 1, "reduce_output": "mean"},
        6,
        4 + (12 + 18) + 4 + BLOCK,
    ),
    # 4 projectors (56), the [CLS] token (4), one block; its output is the [CLS] token's
    "ft_transformer": ({"type": "ft_transformer", **SMALL_TRANSFORMER}, 4, 56 + 4 + BLOCK),
    # entity 1 (3 + 1) -> 4, entity 2 (5 + 1) -> 4; output 2*4 + 2; the bilinear matrix is a buffer
    "comparator": (
        {"type": "comparator", "entity_1": ["c1", "n"], "entity_2": ["c2", "b"], "output_size": 4},
        10,
        (4 * 4 + 4) + (6 * 4 + 4),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_output_shape_width_and_ludwig_parameter_count(case):
    raw, width, params = CASES[case]
    combiner = _build(raw).train()
    assert combiner.output_size == width and combiner.sequence is False
    assert _count(combiner) == params
    enc = _encodings()
    out = combiner(enc)
    assert out.shape == (BATCH, width) and out.dtype == torch.float32
    out.square().sum().backward()
    for name, p in combiner.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), f"{name} gets no finite gradient"
    assert any(enc[n].grad is not None and enc[n].grad.abs().sum() > 0 for n in enc)


def test_concat_keys_and_ludwig_initializers():
    combiner = _build({"num_fc_layers": 1, "output_size": 64})
    assert set(combiner.state_dict()) == {"fc.layers.0.linear.weight", "fc.layers.0.linear.bias"}
    w = combiner.fc.layers[0].linear.weight
    bound = (6 / (10 + 64)) ** 0.5  # xavier_uniform over fan_in 10, fan_out 64
    assert w.abs().max() <= bound and w.abs().max() > 0.8 * bound
    assert torch.equal(combiner.fc.layers[0].linear.bias, torch.zeros(64))
    custom = _build(
        {
            "num_fc_layers": 1,
            "output_size": 3,
            "weights_initializer": {"type": "constant", "val": 0.5},
            "bias_initializer": "ones",
        }
    )
    assert torch.equal(custom.fc.layers[0].linear.weight, torch.full((3, 10), 0.5))
    assert torch.equal(custom.fc.layers[0].linear.bias, torch.ones(3))


def test_concat_residual_adds_where_the_widths_match():
    layers = {"fc_layers": [{"output_size": 10}, {"output_size": 10}], "activation": None}
    plain, residual = _build(layers), _build({**layers, "residual": True})
    enc = {k: v.detach() for k, v in _encodings().items()}
    x = torch.cat([enc[i.name] for i in INPUTS], dim=-1)
    h1 = plain.fc.layers[0](x)
    assert torch.allclose(plain(enc), plain.fc.layers[1](h1))
    assert torch.allclose(residual(enc), x + h1 + residual.fc.layers[1](x + h1))


def test_fc_layers_keys_written_win_over_the_section():
    combiner = _build(
        {"fc_layers": [{"output_size": 2, "activation": None}, {}], "activation": "tanh", "output_size": 5}
    )
    first, second = combiner.fc.layers
    assert isinstance(first.act, torch.nn.Identity) and isinstance(second.act, torch.nn.Tanh)
    assert second.output_size == 5 and combiner.output_size == 5


def test_comparator_output_is_dot_product_difference_and_bilinear():
    combiner = _build({"type": "comparator", "entity_1": ["c1", "n"], "entity_2": ["c2", "b"], "output_size": 4})
    assert set(combiner.state_dict()) >= {"bilinear_weights"}
    enc = {k: v.detach() for k, v in _encodings().items()}
    e1 = combiner.e1_fc_stack(torch.cat([enc["c1"], enc["n"]], 1))
    e2 = combiner.e2_fc_stack(torch.cat([enc["c2"], enc["b"]], 1))
    out = combiner(enc)
    assert torch.allclose(out[:, :1], (e1 * e2).sum(1, keepdim=True))
    assert torch.allclose(out[:, 1:5], e1 * e2) and torch.allclose(out[:, 5:9], (e1 - e2).abs())
    assert torch.allclose(out[:, 9], torch.einsum("bi,ij,bj->b", e1, combiner.bilinear_weights, e2), atol=1e-5)


def test_a_kept_sequence_is_refused_by_a_vector_combiner():
    seq = [EncodedInput("tokens", "sequence", 4, length=7), EncodedInput("n", "number", 1)]
    with pytest.raises(ConfigError, match="keep their sequence") as e:
        _build({}, seq)
    assert e.value.key == "combiner.flatten_inputs"
    flat = _build({"flatten_inputs": True}, seq)
    assert flat.output_size == 7 * 4 + 1
    assert flat(_encodings(seq)).shape == (BATCH, 29)
    with pytest.raises(ConfigError, match="keep their sequence"):
        _build({"type": "tabtransformer", **SMALL_TRANSFORMER}, [EncodedInput("n", "number", 1, length=3)])
