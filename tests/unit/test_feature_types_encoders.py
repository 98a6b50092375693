"""Every input encoder built from a config written as Ludwig writes it: Ludwig's default
encoder per type, its output shape with Ludwig's defaults, and the semantics of the options
(frozen embeddings, one-hot rows, reductions, h3 masking, date waves)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from pydantic import TypeAdapter, ValidationError

from ludwig_hpo.config.features import InputFeature
from ludwig_hpo.data.feature_types import encode_input
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.encoders import build_encoder

ADAPTER: TypeAdapter = TypeAdapter(InputFeature)
B = 5
CELLS = {
    "set": ["a b", "b c", "d", "a e f g h", "c"],
    "bag": ["a b b", "b c", "d", "a e", "c c c"],
    "sequence": ["a b b c d e f g", "b c", "d", "a z q r", "x"],
    "timeseries": ["1 2 3 4 5 6 7 8 9 10", "4 5", "3", "1 2 3 4 5", "1"],
    "vector": ["1 2 3", "4 5 6", "1 1 1", "0 0 0", "1 1 1"],
    "date": ["2020-01-02 03:04:05", "2021-12-31", "2019-03-03", "2000-02-29 23:59:59", "1999-07-04"],
    "h3": [622236723497533439, 599686042433355775, 576495936675512319, 622236723497533439, 599686042433355775],
}


def _feature(kind: str, encoder: dict | None = None, **extra):
    raw = {"name": "x", "type": kind, **extra}
    if encoder is not None:
        raw["encoder"] = encoder
    return ADAPTER.validate_python(raw)


def _encoded(kind: str, encoder: dict | None = None):
    feat = _feature(kind, encoder)
    x, meta = encode_input(feat, pd.Series(CELLS[kind], name="c"), "k", np.arange(B), DataOrigin())
    torch.manual_seed(0)
    return feat, build_encoder(feat, meta), torch.tensor(x), meta


@pytest.mark.parametrize(
    ("kind", "default"),
    [
        ("number", "passthrough"),
        ("binary", "passthrough"),
        ("category", "dense"),
        ("set", "embed"),
        ("bag", "embed"),
        ("vector", "dense"),
        ("timeseries", "parallel_cnn"),
        ("date", "embed"),
        ("sequence", "embed"),
        ("h3", "embed"),
    ],
)
def test_ludwigs_default_encoder_of_each_type(kind, default):
    assert _feature(kind).encoder.type == default
    assert _feature(kind, {}).encoder.type == default  # an encoder section without type


# (type, encoder section, output shape for a batch of B, whether it is a sequence)
SHAPES = [
    ("set", None, (B, 9), False),  # embedding_size 50, at most the vocabulary (8 tokens + <UNK>)
    ("set", {"num_fc_layers": 1}, (B, 10), False),  # Ludwig's output_size 10
    ("set", {"representation": "sparse"}, (B, 9), False),
    ("bag", {"embedding_size": 4}, (B, 4), False),
    ("vector", None, (B, 256), False),  # dense: output_size 256
    ("vector", {"type": "passthrough"}, (B, 3), False),
    ("timeseries", None, (B, 256), False),  # parallel_cnn: fc 512 then 256
    ("timeseries", {"type": "stacked_cnn"}, (B, 256), False),
    ("timeseries", {"type": "rnn", "state_size": 8}, (B, 8), False),
    ("timeseries", {"type": "passthrough"}, (B, 10, 1), True),  # Ludwig: reduce_output null
    ("timeseries", {"type": "passthrough", "reduce_output": "sum"}, (B, 1), False),
    ("timeseries", {"type": "dense", "output_size": 6}, (B, 6), False),
    ("date", None, (B, 72), False),  # 1 + 7 x 10 + 1
    ("date", {"type": "wave"}, (B, 9), False),
    ("date", {"num_fc_layers": 2, "output_size": 5}, (B, 5), False),
    ("h3", None, (B, 10), False),
    ("h3", {"type": "weighted_sum", "should_softmax": True}, (B, 10), False),
    ("h3", {"type": "rnn", "bidirectional": True, "cell_type": "gru"}, (B, 20), False),
    ("sequence", None, (B, 15), False),  # embed: 256 at most the vocabulary (11 tokens + 4 symbols)
    ("sequence", {"reduce_output": None}, (B, 10, 15), True),
    ("sequence", {"reduce_output": "concat", "embedding_size": 3}, (B, 30), False),
    ("sequence", {"type": "parallel_cnn"}, (B, 256), False),
    ("sequence", {"type": "parallel_cnn", "reduce_output": None}, (B, 10, 1024), True),  # 4 x 256 filters
    ("sequence", {"type": "stacked_cnn", "num_fc_layers": 0}, (B, 256), False),
    ("sequence", {"type": "stacked_cnn", "reduce_output": None}, (B, 1, 256), True),  # 10 -> 4 -> 2 -> 1
    ("sequence", {"type": "rnn"}, (B, 256), False),
    ("sequence", {"type": "rnn", "cell_type": "lstm", "bidirectional": True, "num_layers": 2}, (B, 512), False),
    ("sequence", {"type": "rnn", "reduce_output": None, "state_size": 4}, (B, 10, 4), True),
    ("sequence", {"type": "passthrough"}, (B, 10, 1), True),
    ("sequence", {"type": "stacked_parallel_cnn"}, (B, 256), False),
    ("sequence", {"type": "stacked_parallel_cnn", "num_stacked_layers": 1, "reduce_output": None}, (B, 10, 1024), True),
    ("sequence", {"type": "cnnrnn"}, (B, 256), False),
    ("sequence", {"type": "cnnrnn", "reduce_output": None, "state_size": 6}, (B, 4, 6), True),  # 10 steps pooled by 3
    ("sequence", {"type": "transformer"}, (B, 256), False),  # hidden_size 256; embeddings projected from 15
    ("sequence", {"type": "transformer", "hidden_size": 8, "num_heads": 2, "reduce_output": None}, (B, 10, 8), True),
    (
        "timeseries",
        {"type": "transformer", "hidden_size": 4, "num_heads": 2, "num_fc_layers": 1, "output_size": 3},
        (B, 3),
        False,
    ),
    ("timeseries", {"type": "cnnrnn", "num_filters": 4, "state_size": 5, "bidirectional": True}, (B, 10), False),
]


@pytest.mark.parametrize(("kind", "encoder", "shape", "sequence"), SHAPES, ids=[f"{s[0]}-{s[1]}" for s in SHAPES])
def test_encoder_output_shape_and_width(kind, encoder, shape, sequence):
    _, enc, x, meta = _encoded(kind, encoder)
    y = enc(x)
    assert tuple(y.shape) == shape and y.dtype == torch.float32 and torch.isfinite(y).all()
    assert isinstance(enc.output_size, int) and enc.output_size == shape[-1]
    assert bool(getattr(enc, "sequence", False)) is sequence
    if sequence:
        assert getattr(enc, "length", meta.shape[0]) == shape[1]
    if any(p.requires_grad for p in enc.parameters()):
        y.float().sum().backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.parameters())


def _meta(kind: str, vocab: int = 0, shape: tuple[int, ...] = ()) -> FeatureMeta:
    return FeatureMeta("x", kind, vocab=tuple(str(i) for i in range(vocab)), shape=shape)


@pytest.mark.parametrize(
    ("encoder", "width"),
    [
        (None, 6),
        ({"embedding_size": 4}, 4),
        ({"type": "sparse"}, 6),
        ({"type": "onehot"}, 6),
        ({"type": "passthrough"}, 1),
    ],
)
def test_category_encoders(encoder, width):
    enc = build_encoder(_feature("category", encoder), _meta("category", 6))
    y = enc(torch.tensor([0, 3, 5]))
    assert tuple(y.shape) == (3, width) and enc.output_size == width
    if encoder and encoder.get("type") in ("sparse", "onehot"):
        assert y.tolist() == torch.eye(6)[[0, 3, 5]].tolist() and not list(enc.parameters())
    if encoder and encoder.get("type") == "passthrough":
        assert y.squeeze(-1).tolist() == [0.0, 3.0, 5.0]


def test_category_dense_embeddings_start_uniform_in_minus_one_one_and_can_be_frozen():
    torch.manual_seed(0)
    enc = build_encoder(_feature("category"), _meta("category", 300))
    w = enc.embed.weight
    assert w.requires_grad
    w = w.detach()
    assert w.shape == (300, 50)  # Ludwig's embedding_size 50
    assert -1 <= float(w.min()) < -0.9 and 0.9 < float(w.max()) <= 1
    frozen = build_encoder(_feature("category", {"embeddings_trainable": False}), _meta("category", 300))
    assert not frozen.embed.weight.requires_grad


def test_pretrained_embeddings_are_refused_in_one_line():
    with pytest.raises(ValidationError, match="pretrained_embeddings is not supported yet"):
        _feature("category", {"pretrained_embeddings": "glove.txt"})


@pytest.mark.parametrize(
    ("kind", "encoder"), [("number", None), ("binary", {"type": "dense"}), ("number", {"type": "dense"})]
)
def test_number_and_binary_encoders(kind, encoder):
    enc = build_encoder(_feature(kind, encoder), _meta(kind))
    width = 256 if encoder else 1
    assert tuple(enc(torch.ones(4, 1)).shape) == (4, width) and enc.output_size == width


def test_dense_fc_layers_and_initializers_follow_the_section():
    cfg = {
        "type": "dense",
        "fc_layers": [{"output_size": 7}, {"output_size": 3, "activation": "tanh"}],
        "bias_initializer": "ones",
    }
    enc = build_encoder(_feature("number", cfg), _meta("number"))
    assert enc.output_size == 3
    biases = [m.bias for m in enc.modules() if isinstance(m, torch.nn.Linear)]
    assert [tuple(b.shape) for b in biases] == [(7,), (3,)] and all(bool((b == 1).all()) for b in biases)


def test_set_embed_sums_the_present_tokens_embeddings():
    _, enc, x, _ = _encoded("set", {"embedding_size": 4})
    expected = x @ enc.embed.weight
    assert torch.allclose(enc(x), expected)


def test_reduce_last_takes_the_last_non_zero_step_and_max_the_largest():
    _, enc, x, _ = _encoded("sequence", {"type": "passthrough", "reduce_output": "last"})
    last = [row[row != 0][-1] for row in x.float()]
    assert enc(x).squeeze(-1).tolist() == [float(v) for v in last]
    _, enc, x, _ = _encoded("sequence", {"type": "passthrough", "reduce_output": "max"})
    assert enc(x).squeeze(-1).tolist() == x.float().amax(dim=1).tolist()


def test_h3_digits_past_the_resolution_do_not_change_the_encoding():
    _, enc, x, _ = _encoded("h3")
    changed = x.clone()
    res = int(x[0, 2])
    changed[0, 4 + res :] = 3  # the unused digits (7) replaced
    assert torch.allclose(enc(x)[0], enc(changed)[0])
    changed[0, 4] = (int(x[0, 4]) + 1) % 7  # a used digit changes it
    assert not torch.allclose(enc(x)[0], enc(changed)[0])


def test_date_wave_reads_the_periods_of_the_components():
    _, enc, x, _ = _encoded("date", {"type": "wave"})
    later = x.clone()
    later[:, 1] += 12  # a month later by a full period: the same wave
    assert torch.allclose(enc(x)[:, 1], enc(later)[:, 1], atol=1e-5)


def test_attention_reduction_and_unknown_tokenizers_are_refused_as_not_supported_yet():
    with pytest.raises(ValidationError, match="reduce_output: attention is not supported yet"):
        _feature("sequence", {"reduce_output": "attention"})
    with pytest.raises(ValidationError, match="tokenizer 'hf_tokenizer' is not supported yet"):
        _feature("sequence", None, preprocessing={"tokenizer": "hf_tokenizer"})
    with pytest.raises(ValidationError, match="missing_value_strategy 'fill_with_mean' is not supported yet"):
        _feature("set", None, preprocessing={"missing_value_strategy": "fill_with_mean"})


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ({"type": "sequence", "encoder": {"type": "transformer", "num_heads": 3}}, "not a multiple of num_heads 3"),
        (
            {"type": "image", "encoder": {"type": "resnet", "resnet_size": 50}},
            "encoder type '_resnet_legacy' is not supported yet",  # Ludwig reads resnet_size as its old ResNet
        ),
        ({"type": "number", "tied": "other"}, "tied (sharing the encoder of 'other') is not supported yet"),
    ],
)
def test_ludwig_encoders_and_keys_not_built_yet_are_refused_by_name(raw, line):
    with pytest.raises(ValidationError) as err:
        ADAPTER.validate_python({"name": "x", **raw})
    assert line in str(err.value) and len(err.value.errors()) == 1
