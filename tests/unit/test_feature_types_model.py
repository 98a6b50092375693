"""A tiny model with every input type (set, bag, vector, timeseries, date, sequence, h3 with
number, binary and category) and set, vector and number targets: it trains a step, batches
on the device, serves from flat float columns; ``defaults.<type>`` fills every type's
sections; text and audio are refused in one line naming the feature."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ludwig_hpo.config.loader import load_sweep
from ludwig_hpo.data import prepare
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model import build_model
from ludwig_hpo.model.losses import OutputLosses
from ludwig_hpo.model.serving import FlatInputModel, flat_inputs, input_columns, output_columns
from ludwig_hpo.train.data import DeviceData

N = 36

INPUTS = [
    {"name": "rooms", "type": "number"},
    {"name": "pets", "type": "binary"},
    {"name": "city", "type": "category", "encoder": {"embedding_size": 3}},
    {"name": "tags", "type": "set", "encoder": {"embedding_size": 4}},
    {"name": "words", "type": "bag", "encoder": {"embedding_size": 4}},
    {"name": "embedding", "type": "vector", "encoder": {"output_size": 4}},
    {"name": "temps", "type": "timeseries", "encoder": {"num_filters": 4, "fc_layers": [{"output_size": 4}]}},
    {"name": "listed", "type": "date", "encoder": {"embedding_size": 2}},
    {"name": "review", "type": "sequence", "encoder": {"type": "rnn", "state_size": 4, "embedding_size": 4}},
    {"name": "cell", "type": "h3", "encoder": {"embedding_size": 3}},
]
OUTPUTS = [
    {"name": "price", "type": "number"},
    {"name": "amenities", "type": "set"},
    {"name": "profile", "type": "vector"},
]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    tags = ["wifi pool", "wifi", "parking kitchen", "pool parking"]
    return pd.DataFrame(
        {
            "rooms": rng.integers(1, 6, size=N).astype(float),
            "pets": rng.choice(["yes", "no"], size=N),
            "city": rng.choice(["rome", "oslo", "lima"], size=N),
            "tags": [tags[i % 4] for i in range(N)],
            "words": [("quiet " * (1 + i % 3) + "room").strip() for i in range(N)],
            "embedding": [" ".join(f"{v:.2f}" for v in rng.normal(size=3)) for _ in range(N)],
            "temps": [" ".join(f"{v:.1f}" for v in rng.normal(20, 2, size=4 + i % 3)) for i in range(N)],
            "listed": [f"2021-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:15:00" for i in range(N)],
            "review": [["nice flat", "too noisy at night", "great view"][i % 3] for i in range(N)],
            "cell": [622236723497533439 + (i % 4) * (1 << 33) for i in range(N)],
            "price": rng.normal(100, 10, size=N),
            "amenities": [tags[(i + 1) % 4] for i in range(N)],
            "profile": [" ".join(f"{v:.2f}" for v in rng.normal(size=2)) for _ in range(N)],
        }
    )


@pytest.fixture(scope="module")
def prepared(frame):
    from ludwig_hpo.config.schema import SweepConfig
    from tests.unit.conftest import _sweep_dict

    cfg = SweepConfig.model_validate(_sweep_dict(INPUTS, OUTPUTS))
    return cfg, prepare(frame, cfg)


def test_every_type_trains_a_step(prepared):
    cfg, data = prepared
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    device = DeviceData(data, torch.device("cpu"))
    rows = torch.as_tensor(data.splits["train"][:16])
    x, y = device.batch(rows)
    assert {k: tuple(v.shape) for k, v in x.items()} == {k: (16, *data.inputs[k].shape[1:]) for k in data.inputs}
    losses = OutputLosses(cfg.output_features, data.meta)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = model(x)
    assert tuple(out["amenities"].shape) == (16, len(data.meta["amenities"].vocab))
    assert tuple(out["profile"].shape) == (16, 2) and tuple(out["price"].shape) == (16,)
    loss = losses(out, y)
    assert torch.isfinite(loss)
    loss.backward()
    opt.step()
    for name in ("tags", "words", "embedding", "temps", "listed", "review", "cell", "city"):
        moved = [
            n
            for n, p in model.named_parameters()
            if n.startswith(f"encoders.{name}.") and not torch.equal(p, before[n])
        ]
        assert moved, f"no parameter of the {name} encoder changed in a step"
    model.eval()
    with torch.no_grad():
        assert losses(model(x), y) < loss  # one step on the same batch lowers its loss


def test_flat_serving_form_matches_the_model(prepared):
    cfg, data = prepared
    torch.manual_seed(0)
    model = build_model(cfg, data.meta).eval()
    names = [f.name for f in cfg.input_features]
    outs = [f.name for f in cfg.output_features]
    rows = data.splits["test"][:5]
    flat = flat_inputs(data.inputs, rows, names, data.meta)
    assert list(flat.columns) == input_columns(names, data.meta)
    assert (
        "cell[18]" in flat.columns
        and "listed[8]" in flat.columns
        and f"tags[{len(data.meta['tags'].vocab) - 1}]" in flat
    )
    served = FlatInputModel(model, data.meta, outs)
    with torch.no_grad():
        got = served(torch.tensor(flat.to_numpy()))
        direct = model({k: torch.tensor(v[rows]) for k, v in data.inputs.items()})
    cols = output_columns(outs, data.meta)
    assert got.shape == (5, len(cols)) and cols[0] == "price" and cols[-1] == "profile[1]"
    v = len(data.meta["amenities"].vocab)
    assert torch.allclose(got[:, 0], direct["price"], atol=1e-5)
    assert torch.allclose(got[:, 1 : 1 + v], torch.sigmoid(direct["amenities"]), atol=1e-5)
    assert torch.allclose(got[:, 1 + v :], direct["profile"], atol=1e-5)


def _load(tmp_path, text: str):
    (tmp_path / "data.csv").write_text("a,b,y\nx y,1 2,1\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return load_sweep(path, search=False)


BASE = "name: t\ndataset: {{source: data.csv}}\n{body}\noutput_features:\n  - {{name: y, type: number}}\n"


def test_defaults_of_every_type_fill_their_features(tmp_path):
    body = (
        "input_features:\n"
        "  - {name: a, type: sequence}\n"
        "  - {name: b, type: vector, encoder: {output_size: 3}}\n"
        "defaults:\n"
        "  sequence: {encoder: {type: rnn, cell_type: gru}, preprocessing: {max_sequence_length: 5}}\n"
        "  vector: {encoder: {num_layers: 2}, preprocessing: {vector_size: 2}}\n"
        "  number: {loss: {type: huber}}\n"
    )
    cfg = _load(tmp_path, BASE.format(body=body)).config
    seq, vec = cfg.input_features
    assert (seq.encoder.type, seq.encoder.cell_type, seq.preprocessing.max_sequence_length) == ("rnn", "gru", 5)
    assert (vec.encoder.num_layers, vec.encoder.output_size, vec.preprocessing.vector_size) == (2, 3, 2)
    assert cfg.output_features[0].loss.type == "huber"


def test_a_bad_default_is_one_line_at_the_default(tmp_path):
    body = "input_features:\n  - {name: a, type: set}\ndefaults:\n  set: {encoder: {embedding_sise: 3}}\n"
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, BASE.format(body=body))
    text = str(err.value)
    assert "\n" not in text and "defaults.set.encoder" in text and "embedding_sise" in text and "embedding_size" in text


@pytest.mark.parametrize("kind", ["audio"])
def test_audio_is_refused_in_one_line_naming_the_feature_before_other_errors(tmp_path, kind):
    body = (
        f"input_features:\n  - {{name: a, type: sequence}}\n  - {{name: blurb, type: {kind}, encoder: {{nope: 1}}}}\n"
    )
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, BASE.format(body=body))
    text = str(err.value)
    assert (
        "\n" not in text and f"type {kind} is not supported yet (input feature 'blurb')" in text and "nope" not in text
    )


def test_defaults_of_a_type_not_supported_yet_are_refused(tmp_path):
    body = "input_features:\n  - {name: a, type: set}\ndefaults:\n  audio: {encoder: {type: stacked_cnn}}\n"
    with pytest.raises(ConfigError, match=r"defaults\.audio.*not supported yet"):
        _load(tmp_path, BASE.format(body=body))


def test_search_spaces_reach_the_new_types_encoders(tmp_path):
    body = (
        "input_features:\n  - {name: a, type: sequence}\n  - {name: b, type: vector}\n"
        "hyperopt:\n  parameters:\n"
        "    a.encoder.type: {space: choice, categories: [embed, rnn, parallel_cnn]}\n"
        "    b.encoder.output_size: {space: choice, categories: [4, 8]}\n"
        "    defaults.sequence.encoder.embedding_size: {space: choice, categories: [8, 16]}\n"
    )
    (tmp_path / "data.csv").write_text("a,b,y\nx y,1 2,1\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE.format(body=body))
    loaded = load_sweep(path)
    assert set(loaded.config.hyperopt.parameters) == {
        "a.encoder.type",
        "b.encoder.output_size",
        "defaults.sequence.encoder.embedding_size",
    }
