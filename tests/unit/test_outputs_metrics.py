"""Every output type's metrics, with Ludwig's names, equal scikit-learn's over the whole split,
also when the split is scored in shards whose sums are added (as DDP ranks all-reduce them)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pydantic import TypeAdapter
from sklearn import metrics as skm

from ludwig_hpo.config.metrics import METRICS
from ludwig_hpo.config.outputs import OutputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.losses import OutputLoss
from ludwig_hpo.model.metrics import OutputMetrics

OUT = TypeAdapter(OutputFeature)


def scorer(meta: FeatureMeta | None = None, **raw) -> OutputMetrics:
    f = OUT.validate_python({"name": "y", **raw})
    return OutputMetrics(f, meta, OutputLoss(f, meta))


def score(m: OutputMetrics, z: torch.Tensor, t: torch.Tensor, shards: int = 3) -> dict[str, float]:
    """The metrics of (z, t) scored in ``shards`` pieces, their sums added."""
    parts = np.array_split(np.arange(len(z)), shards)
    total = sum(m.sums(z[p], t[p]) for p in parts)
    scores = (m.scores(z).numpy(), t.numpy()) if m.gathers else None
    out = m.finish(total.tolist(), float(len(z)), scores)
    assert set(out) == set(METRICS[m.kind])
    return out


def test_number_metrics_are_sklearns():
    g = torch.Generator().manual_seed(0)
    t = torch.rand(50, generator=g) * 3 + 0.5
    z = t + torch.randn(50, generator=g) * 0.4
    out = score(scorer(type="number"), z, t)
    y, p = t.double().numpy(), z.double().numpy()
    assert out["mean_squared_error"] == pytest.approx(skm.mean_squared_error(y, p), rel=1e-9)
    assert out["mean_absolute_error"] == out["mae"] == pytest.approx(skm.mean_absolute_error(y, p), rel=1e-9)
    assert out["root_mean_squared_error"] == pytest.approx(math.sqrt(skm.mean_squared_error(y, p)), rel=1e-9)
    assert out["mean_absolute_percentage_error"] == pytest.approx(skm.mean_absolute_percentage_error(y, p), rel=1e-9)
    assert out["root_mean_squared_percentage_error"] == pytest.approx(np.sqrt(np.mean(((y - p) / y) ** 2)), rel=1e-9)
    assert out["r2"] == pytest.approx(skm.r2_score(y, p), rel=1e-9)
    assert out["loss"] == pytest.approx(out["mean_squared_error"], rel=1e-6)


def test_number_clip_bounds_what_the_metrics_score():
    t = torch.tensor([0.0, 1.0, 2.0, 3.0])
    z = torch.tensor([-5.0, 1.0, 2.0, 9.0])
    out = score(scorer(type="number", clip=[0, 3]), z, t, shards=2)
    assert out["mean_absolute_error"] == 0.0
    assert out["loss"] == pytest.approx(float(((z - t) ** 2).mean()))  # the loss sees the raw output


@pytest.mark.parametrize("threshold", [0.5, 0.3, 0.8])
def test_binary_metrics_are_sklearns_at_the_threshold(threshold):
    g = torch.Generator().manual_seed(1)
    t = (torch.rand(60, generator=g) > 0.4).float()
    z = (t - 0.5) * 1.5 + torch.randn(60, generator=g)
    out = score(scorer(type="binary", threshold=threshold), z, t)
    y = t.numpy().astype(int)
    pred = (torch.sigmoid(z) >= threshold).numpy().astype(int)
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(y, pred), rel=1e-12)
    assert out["precision"] == pytest.approx(skm.precision_score(y, pred, zero_division=0), rel=1e-12)
    assert out["recall"] == pytest.approx(skm.recall_score(y, pred, zero_division=0), rel=1e-12)
    assert out["specificity"] == pytest.approx(skm.recall_score(1 - y, 1 - pred, zero_division=0), rel=1e-12)
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(y, z.numpy()), abs=1e-12)


def test_the_binary_threshold_changes_accuracy():
    t = torch.tensor([1.0, 1.0, 0.0, 0.0])
    z = torch.logit(torch.tensor([0.9, 0.4, 0.35, 0.1]))
    assert score(scorer(type="binary"), z, t, 2)["accuracy"] == 0.75
    assert score(scorer(type="binary", threshold=0.38), z, t, 2)["accuracy"] == 1.0


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_category_metrics_are_sklearns(top_k):
    g = torch.Generator().manual_seed(2)
    meta = FeatureMeta("y", "category", vocab=("a", "b", "c", "d"))
    t = torch.arange(40) % 4
    z = torch.nn.functional.one_hot(t, 4).float() + torch.randn(40, 4, generator=g) * 1.2
    out = score(scorer(meta, type="category", top_k=top_k), z, t)
    y = t.numpy()
    probs = torch.softmax(z, -1).numpy()
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(y, z.argmax(-1).numpy()), rel=1e-12)
    assert out["hits_at_k"] == pytest.approx(skm.top_k_accuracy_score(y, probs, k=top_k, labels=range(4)), rel=1e-12)
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(y, probs, multi_class="ovr", average="macro"), abs=1e-9)
    expect_loss = torch.nn.functional.cross_entropy(z, t).item()
    assert out["loss"] == pytest.approx(expect_loss, rel=1e-6)


def test_set_jaccard_is_sklearns_samples_average():
    g = torch.Generator().manual_seed(3)
    meta = FeatureMeta("y", "set", vocab=("a", "b", "c", "d", "e"))
    t = (torch.rand(30, 5, generator=g) > 0.6).float()
    t[0] = 0  # an empty set
    z = (t - 0.5) * 2 + torch.randn(30, 5, generator=g)
    z[0] = -9  # predicted empty too: a perfect match
    for threshold in (0.5, 0.3):
        out = score(scorer(meta, type="set", threshold=threshold), z, t)
        pred = (torch.sigmoid(z) >= threshold).numpy().astype(int)
        expect = skm.jaccard_score(t.numpy().astype(int), pred, average="samples", zero_division=1.0)
        assert out["jaccard"] == pytest.approx(expect, rel=1e-12)
    expect_loss = torch.nn.functional.binary_cross_entropy_with_logits(z, t).item()
    assert out["loss"] == pytest.approx(expect_loss, rel=1e-6)


@pytest.mark.parametrize("softmax", [False, True])
def test_vector_metrics_are_sklearns(softmax):
    g = torch.Generator().manual_seed(4)
    meta = FeatureMeta("y", "vector", shape=(3,))
    t = torch.rand(25, 3, generator=g)
    z = t + torch.randn(25, 3, generator=g) * 0.3
    out = score(scorer(meta, type="vector", softmax=softmax), z, t)
    p = (torch.softmax(z, -1) if softmax else z).double().numpy()
    y = t.double().numpy()
    assert out["mean_squared_error"] == pytest.approx(skm.mean_squared_error(y, p), rel=1e-9)
    assert out["mean_absolute_error"] == pytest.approx(skm.mean_absolute_error(y, p), rel=1e-9)
    assert out["r2"] == pytest.approx(skm.r2_score(y, p), rel=1e-9)


def test_evaluate_reports_every_metric_of_the_table(make_config):
    import pandas as pd

    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    rng = np.random.default_rng(0)
    x1 = rng.normal(size=90)
    frame = pd.DataFrame({"x1": x1, "bin": (x1 + rng.normal(size=90) > 0).astype(int), "value": 2 * x1})
    outputs = [{"name": "bin", "type": "binary", "threshold": 0.4}, {"name": "value", "type": "number"}]
    cfg = make_config([{"name": "x1", "type": "number"}], outputs)
    data = prepare(frame, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    rows = data.splits["validation"]
    got = evaluate(model, cfg, DeviceData(data, torch.device("cpu")), rows, "validation", 7)
    expect = {f"validation/{o['name']}/{m}" for o in outputs for m in METRICS[o["type"]]}
    assert set(got) == expect | {"validation/combined/loss"}
    with torch.no_grad():
        x = {k: torch.tensor(v[rows]) for k, v in data.inputs.items()}
        z = model(x)["bin"].numpy()
    y = data.targets["bin"][rows]
    pred = (1 / (1 + np.exp(-z)) >= 0.4).astype(int)
    assert got["validation/bin/recall"] == pytest.approx(skm.recall_score(y, pred, zero_division=0), rel=1e-9)
    assert got["validation/bin/roc_auc"] == pytest.approx(skm.roc_auc_score(y, z), abs=1e-9)


def test_the_report_knows_every_metrics_range():
    from dashboards._format import METRIC_DOMAINS

    names = {m for ms in METRICS.values() for m in ms}
    assert names <= set(METRIC_DOMAINS)
    assert METRIC_DOMAINS["r2"] == (-math.inf, 1.0) and METRIC_DOMAINS["jaccard"] == (0.0, 1.0)
