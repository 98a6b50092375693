"""The combiner inside the model: Ludwig's default concat (the heads read the concatenation),
each combiner type end to end with its loss, TabNet's sparsity loss in the training loss, the
all-passthrough fast path, Ludwig's initializers, and models saved with the old concat layers."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from ludwig_hpo.data import prepare
from ludwig_hpo.model import build_model
from ludwig_hpo.model.build import AUX_LOSS
from ludwig_hpo.train.data import DeviceData
from ludwig_hpo.train.step import combined_loss

N = 40
INPUTS = [
    {"name": "x1", "type": "number"},
    {"name": "x2", "type": "number"},
    {"name": "color", "type": "category", "encoder": {"embedding_size": 3}},
]
TARGET = [{"name": "y", "type": "binary"}]
SMALL = {"hidden_size": 4, "num_heads": 2, "transformer_output_size": 4}


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "x1": rng.normal(size=N),
            "x2": rng.normal(size=N),
            "color": rng.choice(["red", "green", "blue"], size=N),
            "y": [0, 1] * (N // 2),
        }
    )


def _model(frame, make_config, combiner, inputs=INPUTS, seed=0):
    cfg = make_config(inputs, TARGET, combiner=combiner)
    data = prepare(frame, cfg)
    torch.manual_seed(seed)
    return cfg, data, build_model(cfg, data.meta)


def _batch(data, n=16):
    return DeviceData(data, torch.device("cpu")).batch(torch.as_tensor(data.splits["train"][:n]))


def test_ludwig_default_concat_hands_the_concatenation_to_the_heads(frame, make_config):
    _, data, model = _model(frame, make_config, {"type": "concat"})
    assert model.combiner.output_size == 1 + 1 + 3
    assert not [k for k in model.state_dict() if k.startswith("combiner.")]  # no layer of its own
    head = [m for m in model.heads.modules() if isinstance(m, nn.Linear)]
    assert [m.in_features for m in head][:1] == [5]


@pytest.mark.parametrize(
    "combiner",
    [
        {"num_fc_layers": 2, "output_size": 8, "norm": "layer"},
        {"type": "tabnet", "size": 4, "output_size": 4, "num_steps": 2, "bn_virtual_bs": 8},
        {"type": "transformer", **SMALL},
        {"type": "tabtransformer", **SMALL, "embed_input_feature_name": "add"},
        {"type": "ft_transformer", **SMALL},
        {"type": "comparator", "entity_1": ["x1", "color"], "entity_2": ["x2"], "output_size": 4},
    ],
    ids=lambda c: c.get("type", "concat"),
)
def test_every_combiner_runs_in_the_model_with_its_loss(frame, make_config, combiner):
    cfg, data, model = _model(frame, make_config, combiner)
    x, y = _batch(data)
    out = model.train()(x)
    assert out["y"].shape == (16,)
    loss = combined_loss(cfg, out, y)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    assert set(model.eval()(x)) == {"y"}  # no auxiliary loss outside training


def test_tabnet_sparsity_loss_is_part_of_the_training_loss(frame, make_config):
    combiner = {"type": "tabnet", "size": 4, "output_size": 4, "num_steps": 2, "sparsity": 0.5}
    cfg, data, model = _model(frame, make_config, combiner)
    x, y = _batch(data)
    out = model.train()(x)
    assert out[AUX_LOSS].dim() == 0 and out[AUX_LOSS] > 0
    without = combined_loss(cfg, {"y": out["y"]}, y)
    assert torch.allclose(combined_loss(cfg, out, y), without + out[AUX_LOSS])


def test_the_fast_path_of_a_passthrough_table_is_the_same_model(frame, make_config):
    numbers = INPUTS[:2]
    _, data, model = _model(frame, make_config, {"num_fc_layers": 1, "output_size": 4}, inputs=numbers)
    x, _ = _batch(data)
    assert getattr(x, "table", None) is not None
    model.eval()
    assert torch.equal(model(x)["y"], model(dict(x))["y"])


def test_fc_layers_start_from_ludwig_initializers(frame, make_config):
    _, _, model = _model(frame, make_config, {"num_fc_layers": 1, "output_size": 64})
    linear = model.combiner.fc.layers[0].linear
    bound = (6 / (5 + 64)) ** 0.5  # xavier_uniform: fan_in 5, fan_out 64
    assert linear.weight.abs().max() <= bound and torch.equal(linear.bias, torch.zeros(64))
    embed = next(m for m in model.encoders.modules() if isinstance(m, nn.Embedding))
    assert embed.weight.abs().max() <= 1.0 and embed.weight.abs().max() > 0.5  # Ludwig's uniform(-1, 1)


def test_same_seed_same_parameters_for_every_combiner(frame, make_config):
    for combiner in ({"type": "tabnet", "size": 4, "output_size": 4}, {"type": "ft_transformer", **SMALL}):
        a = _model(frame, make_config, combiner, seed=5)[2].state_dict()
        b = _model(frame, make_config, combiner, seed=5)[2].state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_models_saved_with_the_old_concat_layers_still_load(frame, make_config):
    _, data, model = _model(frame, make_config, {"num_fc_layers": 2, "output_size": 4})
    model.eval()
    x, _ = _batch(data)
    expected = model(x)["y"]
    state = model.state_dict()
    # the old layout: combiner.<3 i> was the i-th Linear of (Linear, ReLU, Dropout) blocks
    old = {
        k.replace("combiner.fc.layers.0.linear.", "combiner.0.").replace(
            "combiner.fc.layers.1.linear.", "combiner.3."
        ): v
        for k, v in state.items()
    }
    assert "combiner.3.weight" in old
    fresh = _model(frame, make_config, {"num_fc_layers": 2, "output_size": 4}, seed=9)[2].eval()
    fresh.load_state_dict(old)
    assert torch.equal(fresh(x)["y"], expected)
    # a whole model pickled with the Sequential combiner (MLflow's PyTorch flavour) runs unchanged
    pickled = copy.deepcopy(model)
    layers = model.combiner.fc.layers
    pickled._modules["combiner"] = nn.Sequential(
        layers[0].linear, nn.ReLU(), nn.Dropout(0.0), layers[1].linear, nn.ReLU()
    )
    restored = pickle.loads(pickle.dumps(pickled))
    assert torch.equal(restored(x)["y"], expected)


FIXTURES = sorted(
    p
    for p in (Path(__file__).resolve().parents[1] / "fixtures" / "ludwig").glob("*.yaml")
    if "combiner:" in p.read_text() and not p.name.startswith("refused_")
)


@pytest.mark.parametrize("config", FIXTURES, ids=lambda p: p.stem)
def test_ludwig_configs_with_a_combiner_build_and_train_a_step(config):
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.data.sources import dataset_folder

    from .test_ludwig_fixtures import dataset_of

    loaded = load_sweep(config, dataset_of(config), search=False)
    cfg = loaded.config
    source = cfg.dataset.source
    data = prepare(load_dataframe(source, loaded.base_dir), cfg, dataset_folder(source, loaded.base_dir))
    torch.manual_seed(0)
    model = build_model(cfg, data.meta).train()
    x, y = _batch(data)
    loss = combined_loss(cfg, model(x), y)
    assert torch.isfinite(loss)
    loss.backward()
