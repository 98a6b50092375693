"""The declarative model: one encoder per input type, concat combiner, one head per output
type. Forward shapes and gradients reaching every parameter, on a tiny synthetic frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ludwig_hpo.data import prepare
from ludwig_hpo.model import build_model
from ludwig_hpo.model.outputs import loss as loss_fn
from ludwig_hpo.model.outputs import metric_sums, roc_auc

N = 48
BATCH = 16


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "num": rng.normal(size=N),
            "flag": rng.choice(["yes", "no"], size=N),
            "color": rng.choice(["red", "green", "blue", "cyan"], size=N),
            "img": [rng.random((8, 8), dtype=np.float32) for _ in range(N)],
            "img_odd": [rng.random((7, 5), dtype=np.float32) for _ in range(N)],
            "klass": ["a", "b", "c"] * (N // 3),
            "bin": [0, 1] * (N // 2),
            "value": rng.normal(size=N),
        }
    )


INPUTS = {
    "number-passthrough": ({"name": "num", "type": "number"}, 1),
    "number-dense": (
        {"name": "num", "type": "number", "encoder": {"type": "dense", "num_layers": 2, "output_size": 5}},
        5,
    ),
    "binary": ({"name": "flag", "type": "binary"}, 1),
    "category": ({"name": "color", "type": "category", "encoder": {"embedding_size": 3}}, 3),
    "image-1-layer": (
        {
            "name": "img",
            "type": "image",
            "encoder": {"num_layers": 1, "channels": 2, "padding": "same", "output_size": 6},
        },
        6,
    ),
    "image-2-layers": (
        {
            "name": "img",
            "type": "image",
            "encoder": {"num_layers": 2, "channels": 2, "padding": "same", "output_size": 6},
        },
        6,
    ),
    "image-3-layers": (
        {
            "name": "img",
            "type": "image",
            "encoder": {"num_layers": 3, "channels": 2, "padding": "same", "output_size": 6},
        },
        6,
    ),
    "image-odd-shape-5x5-kernel": (
        {
            "name": "img_odd",
            "type": "image",
            "encoder": {"num_layers": 2, "channels": 2, "kernel_size": 5, "padding": "same", "output_size": 4},
        },
        4,
    ),
}
OUTPUTS = {
    "category": ({"name": "klass", "type": "category", "decoder": {"num_fc_layers": 1, "output_size": 4}}, (BATCH, 3)),
    "binary": ({"name": "bin", "type": "binary"}, (BATCH,)),
    "number": ({"name": "value", "type": "number"}, (BATCH,)),
}


def _batch(data, rows):
    idx = torch.as_tensor(rows)
    return (
        {k: torch.tensor(v)[idx] for k, v in data.inputs.items()},
        {k: torch.tensor(v)[idx] for k, v in data.targets.items()},
    )


@pytest.mark.parametrize("num_fc_layers", [0, 1])
@pytest.mark.parametrize("out_id", list(OUTPUTS))
@pytest.mark.parametrize("in_id", list(INPUTS))
def test_forward_shapes_and_gradients(frame, make_config, in_id, out_id, num_fc_layers):
    in_feat, width = INPUTS[in_id]
    out_feat, shape = OUTPUTS[out_id]
    cfg = make_config([in_feat], [out_feat], combiner={"num_fc_layers": num_fc_layers, "output_size": 7})
    data = prepare(frame, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    assert model.widths[in_feat["name"]] == width
    x, y = _batch(data, data.splits["train"][:BATCH])
    out = model(x)
    assert set(out) == {out_feat["name"]}
    logits = out[out_feat["name"]]
    assert logits.shape == shape
    assert logits.dtype == torch.float32
    loss = loss_fn(out_feat["type"], logits, y[out_feat["name"]])
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} gets no gradient"
        assert torch.isfinite(p.grad).all(), name
    # Single parameters may get an all-zero gradient behind a dead ReLU; the model as a whole may not.
    assert sum(p.grad.abs().sum() for p in model.parameters()) > 0


def test_several_inputs_and_outputs(frame, make_config):
    cfg = make_config([f for f, _ in INPUTS.values() if f["name"] != "img_odd"][1:5], [f for f, _ in OUTPUTS.values()])
    data = prepare(frame, cfg)
    model = build_model(cfg, data.meta)
    x, y = _batch(data, np.arange(BATCH))
    out = model(x)
    assert {k: tuple(v.shape) for k, v in out.items()} == {"klass": (BATCH, 3), "bin": (BATCH,), "value": (BATCH,)}
    total = sum(loss_fn(f["type"], out[f["name"]], y[f["name"]]) for f, _ in OUTPUTS.values())
    total.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_same_seed_same_init(frame, make_config):
    cfg = make_config([INPUTS["image-2-layers"][0]], [OUTPUTS["category"][0]])
    data = prepare(frame, cfg)
    torch.manual_seed(3)
    a = build_model(cfg, data.meta).state_dict()
    torch.manual_seed(3)
    b = build_model(cfg, data.meta).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_passthrough_features_add_no_module_and_models_pickled_with_them_still_run(frame, make_config):
    import copy
    import pickle

    from ludwig_hpo.model.encoders import PassthroughEncoder

    cfg = make_config(
        [INPUTS["number-passthrough"][0], INPUTS["category"][0], INPUTS["binary"][0]], [OUTPUTS["binary"][0]]
    )
    data = prepare(frame, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta).eval()
    assert model.passthrough == {"num", "flag"} and set(model.encoders) == {"color"}
    assert model.widths == {"num": 1, "color": 3, "flag": 1}
    x, _ = _batch(data, np.arange(BATCH))
    expected = model(x)["bin"]
    # pickled without the passthrough attributes (MLflow's PyTorch flavour): every encoder a submodule
    old = copy.deepcopy(model)
    old.encoders.update({"num": PassthroughEncoder(), "flag": PassthroughEncoder()})
    del old.__dict__["passthrough"], old.__dict__["widths"]
    restored = pickle.loads(pickle.dumps(old))
    assert torch.equal(restored(x)["bin"], expected)
    assert set(restored.state_dict()) == set(model.state_dict())


@pytest.mark.parametrize(
    ("kind", "logits", "target", "expect"),
    [
        ("category", [[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]], [0, 1, 1], {"accuracy": 2.0}),
        ("binary", [3.0, -3.0, 3.0], [1.0, 0.0, 0.0], {"accuracy": 2.0}),
        ("number", [1.0, 2.0, 4.0], [1.0, 3.0, 2.0], {"loss": 5.0, "mae": 3.0}),
    ],
)
def test_metric_sums(kind, logits, target, expect):
    logits_t = torch.tensor(logits)
    target_t = torch.tensor(target)
    sums = metric_sums(kind, logits_t, target_t)
    for k, v in expect.items():
        assert sums[k].item() == pytest.approx(v)
    assert sums["loss"].dtype == torch.float64
    assert sums["loss"].item() == pytest.approx(3 * loss_fn(kind, logits_t, target_t).item(), rel=1e-5)


@pytest.mark.parametrize("n", [2, 7, 40, 300])
def test_roc_auc_matches_scikit_learn_with_ties(n):
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(n)
    for _ in range(50):
        labels = rng.integers(0, 2, n).astype(np.float32)
        if len(np.unique(labels)) < 2:
            continue
        scores = np.round(rng.normal(size=n), 1).astype(np.float32)  # rounding makes ties
        assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_roc_auc_is_nan_for_one_class_or_non_finite_scores():
    assert np.isnan(roc_auc(np.array([0.1, 0.2]), np.array([1.0, 1.0])))
    assert np.isnan(roc_auc(np.array([0.1, np.nan]), np.array([0.0, 1.0])))
    assert roc_auc(np.array([0.1, 0.9]), np.array([0.0, 1.0])) == 1.0


def test_a_batch_of_single_columns_gives_the_model_its_gathered_table(frame, make_config):
    from ludwig_hpo.train.data import Columns, DeviceData

    cfg = make_config([INPUTS["number-passthrough"][0], INPUTS["binary"][0]], [OUTPUTS["category"][0]])
    data = prepare(frame, cfg)
    model = build_model(cfg, data.meta).eval()
    x, _ = DeviceData(data, torch.device("cpu")).batch(torch.arange(BATCH))
    assert isinstance(x, Columns) and x.names == ("num", "flag")
    assert torch.equal(x.table, torch.cat([x["num"], x["flag"]], dim=-1))
    assert torch.equal(model(x)["klass"], model(dict(x))["klass"])  # the same as joining the views
    mixed = make_config([INPUTS["number-passthrough"][0], INPUTS["category"][0]], [OUTPUTS["category"][0]])
    x, _ = DeviceData(prepare(frame, mixed), torch.device("cpu")).batch(torch.arange(BATCH))
    assert not isinstance(x, Columns)  # an id column is not a model input column
