"""Output heads: Ludwig's decoder keys and defaults, ``dependencies``, ``reduce_input``, and set
and vector heads that train."""

from __future__ import annotations

import pytest
import torch
from pydantic import TypeAdapter, ValidationError

from ludwig_hpo.config.outputs import OutputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.outputs import OutputHeads

OUT = TypeAdapter(OutputFeature)
META = {
    "num": FeatureMeta("num", "number"),
    "bin": FeatureMeta("bin", "binary"),
    "cat": FeatureMeta("cat", "category", vocab=("a", "b", "c")),
    "tags": FeatureMeta("tags", "set", vocab=("x", "y", "z", "w")),
    "vec": FeatureMeta("vec", "vector", shape=(5,)),
}


def outputs(*raw: dict) -> list:
    return [OUT.validate_python(r) for r in raw]


def heads(*raw: dict, in_size: int = 6) -> OutputHeads:
    torch.manual_seed(0)
    return OutputHeads(outputs(*raw), META, in_size)


def test_ludwigs_default_decoder_is_one_projection_xavier_initialized_with_a_zero_bias():
    h = heads({"name": "num", "type": "number"}, {"name": "cat", "type": "category"})
    for name, width in (("num", 1), ("cat", 3)):
        head = h[name]
        assert len(head.stack.layers) == 0
        assert head.projection.weight.shape == (width, 6)
        assert torch.count_nonzero(head.projection.bias) == 0
        bound = (6 / (6 + width)) ** 0.5  # xavier_uniform's
        assert head.projection.weight.abs().max() <= bound
    out = h(torch.randn(4, 6))
    assert out["num"].shape == (4,) and out["cat"].shape == (4, 3)


def test_fc_layers_and_num_fc_layers_build_ludwigs_stack():
    h = heads(
        {
            "name": "cat",
            "type": "category",
            "decoder": {
                "fc_layers": [{"output_size": 8, "norm": "layer"}, {"output_size": 3, "activation": "tanh"}],
                "fc_activation": "elu",
                "fc_dropout": 0.2,
            },
        },
        {"name": "num", "type": "number", "decoder": {"num_fc_layers": 2, "fc_output_size": 4, "use_bias": False}},
        {"name": "bin", "type": "binary", "decoder": {"num_fc_layers": 1, "output_size": 5, "dropout": 0.1}},
    )
    first, second = h["cat"].stack.layers
    assert (first.linear.in_features, first.output_size, second.output_size) == (6, 8, 3)
    assert isinstance(first.norm, torch.nn.LayerNorm) and isinstance(first.act, torch.nn.ELU)
    assert isinstance(second.act, torch.nn.Tanh) and first.dropout.p == 0.2
    assert h["cat"].projection.in_features == 3
    assert [layer.output_size for layer in h["num"].stack.layers] == [4, 4]
    assert h["num"].projection.bias is None
    # the short spellings of a regressor's fc_output_size and fc_dropout
    (only,) = h["bin"].stack.layers
    assert only.output_size == 5 and only.dropout.p == 0.1
    assert outputs({"name": "n", "type": "number"})[0].decoder.fc_output_size == 256  # Ludwig's default


def test_dependencies_feed_the_dependencys_hidden_state_in_dependency_order():
    h = heads(
        {"name": "cat", "type": "category", "dependencies": ["num", "bin"]},
        {"name": "num", "type": "number", "decoder": {"num_fc_layers": 1, "fc_output_size": 4}},
        {"name": "bin", "type": "binary", "dependencies": ["num"]},
    )
    assert h.output_order == ["num", "bin", "cat"]
    assert h["bin"].projection.in_features == 6 + 4  # its own input + num's hidden state
    assert h["cat"].projection.in_features == 6 + 4 + 10
    x = torch.randn(3, 6, requires_grad=False)
    out = h(x)
    out["cat"].sum().backward()
    # the dependent's loss reaches the dependency's layers
    assert h["num"].stack.layers[0].linear.weight.grad.abs().sum() > 0
    assert h["num"].projection.weight.grad is None  # a dependency's hidden state, not its prediction


@pytest.mark.parametrize(
    ("deps", "message"),
    [
        ({"a": ["b"], "b": ["a"]}, "output dependencies form a cycle: a -> b -> a"),
        ({"a": ["a"], "b": []}, "'a' is not another output feature"),
        ({"a": ["nope"], "b": []}, "'nope' is not another output feature"),
    ],
)
def test_dependency_cycles_and_unknown_names_are_refused(make_config, deps, message):
    outs = [{"name": n, "type": "number", "dependencies": d} for n, d in deps.items()]
    with pytest.raises(ValidationError) as e:
        make_config([{"name": "x", "type": "number"}], outs)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("mode", "reduce"),
    [
        ("sum", lambda x: x.sum(1)),
        ("mean", lambda x: x.mean(1)),
        ("avg", lambda x: x.mean(1)),
        ("max", lambda x: x.amax(1)),
        ("last", lambda x: x[:, -1]),
    ],
)
def test_reduce_input_reduces_a_sequence_and_leaves_a_vector(mode, reduce):
    h = heads({"name": "num", "type": "number", "reduce_input": mode})
    seq = torch.randn(2, 4, 6)
    assert torch.allclose(h(seq)["num"], h(reduce(seq))["num"])
    flat = torch.randn(2, 6)
    assert torch.allclose(h(flat)["num"], h["num"].projection(flat).squeeze(-1))


def test_attention_reduce_input_and_unsupported_ones():
    h = heads({"name": "cat", "type": "category", "reduce_input": "attention"})
    assert h(torch.randn(2, 4, 6))["cat"].shape == (2, 3)
    with pytest.raises(ValidationError, match="'concat' of a sequence for an output head is not supported yet"):
        outputs({"name": "n", "type": "number", "reduce_input": "concat"})


@pytest.mark.parametrize("raw", [{"name": "tags", "type": "set"}, {"name": "vec", "type": "vector"}])
def test_set_and_vector_heads_train(raw):
    h = heads(raw)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 6, generator=g)
    width = 4 if raw["type"] == "set" else 5
    target = (x[:, :width] > 0).float()
    opt = torch.optim.Adam(h.parameters(), lr=0.05)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        out = h(x)
        assert out[raw["name"]].shape == (32, width)
        loss = h.output_losses({raw["name"]: out[raw["name"]]}, {raw["name"]: target})
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_a_projectors_activation_and_clip():
    h = heads({"name": "vec", "type": "vector", "decoder": {"activation": "sigmoid", "clip": [0.2, 0.6]}})
    out = h(torch.randn(10, 6) * 5)["vec"]
    assert out.min() >= 0.2 and out.max() <= 0.6
    with pytest.raises(ValidationError, match="clip is a projector's key"):
        outputs({"name": "n", "type": "number", "decoder": {"clip": [0, 1]}})


def test_the_served_model_predicts_clipped_numbers_and_softmaxed_vectors(make_config):
    import numpy as np
    import pandas as pd

    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.serving import FlatInputModel, flat_inputs

    rng = np.random.default_rng(0)
    x = rng.normal(size=60) * 10
    vectors = [" ".join(str(v) for v in rng.random(3)) for _ in range(60)]
    frame = pd.DataFrame({"x": x, "y": 100 * x, "v": vectors})
    outs = [{"name": "y", "type": "number", "clip": [-1, 1]}, {"name": "v", "type": "vector", "softmax": True}]
    cfg = make_config([{"name": "x", "type": "number"}], outs)
    data = prepare(frame, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta).eval()
    flat = FlatInputModel(model, data.meta, ["y", "v"])
    rows = data.splits["train"]
    pred = flat(torch.tensor(flat_inputs(data.inputs, rows, model.input_names, data.meta).to_numpy()))
    assert flat.output_columns == ["y", "v[0]", "v[1]", "v[2]"]
    with torch.no_grad():
        raw = model({"x": torch.tensor(data.inputs["x"][rows])})
    assert raw["y"].abs().max() > 1.0 and pred[:, 0].abs().max() <= 1.0
    assert not torch.allclose(raw["v"].sum(-1), torch.ones(len(rows)))
    assert torch.allclose(pred[:, 1:].sum(-1), torch.ones(len(rows)))


def test_outputs_may_be_named_like_the_heads_attributes():
    torch.manual_seed(0)
    raw = [{"name": n, "type": "number"} for n in ("order", "metrics", "losses")]
    h = OutputHeads(outputs(*raw), {n["name"]: FeatureMeta(n["name"], "number") for n in raw}, 6)
    assert set(h(torch.randn(2, 6))) == {"order", "metrics", "losses"}
