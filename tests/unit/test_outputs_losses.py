"""Each ``loss`` option of an output feature changes the loss value as Ludwig defines it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pydantic import TypeAdapter, ValidationError

from ludwig_hpo.config.outputs import OutputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model.losses import OutputLoss, OutputLosses, check_losses

OUT = TypeAdapter(OutputFeature)
CLASSES = ("a", "b", "c")


def feature(**kw):
    return OUT.validate_python({"name": "y", **kw})


def category(**loss):
    return OutputLoss(feature(type="category", loss=loss), FeatureMeta("y", "category", vocab=CLASSES))


@pytest.fixture
def cat_batch():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 3, generator=g), torch.randint(0, 3, (16,), generator=g)


@pytest.fixture
def reg_batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, generator=g), torch.rand(16, generator=g) + 0.5


def test_defaults_are_ludwigs():
    assert feature(type="number").loss.type == "mean_squared_error"
    assert feature(type="binary").loss.type == "binary_weighted_cross_entropy"
    assert feature(type="category").loss.type == "softmax_cross_entropy"
    assert feature(type="set").loss.type == "sigmoid_cross_entropy"
    assert feature(type="vector").loss.type == "mean_squared_error"
    assert feature(type="number", loss={"weight": 2}).loss.type == "mean_squared_error"


@pytest.mark.parametrize(
    ("loss", "reference"),
    [
        ("mean_squared_error", lambda p, t: F.mse_loss(p, t)),
        ("mean_absolute_error", lambda p, t: F.l1_loss(p, t)),
        ("root_mean_squared_error", lambda p, t: F.mse_loss(p, t).sqrt()),
        ("root_mean_squared_percentage_error", lambda p, t: (((t - p) / t) ** 2).mean().sqrt()),
        ("mean_absolute_percentage_error", lambda p, t: ((p - t).abs() / t.abs()).mean()),
        ("huber", lambda p, t: F.huber_loss(p, t, delta=1.0)),
    ],
)
def test_number_losses(reg_batch, loss, reference):
    p, t = reg_batch
    value = OutputLoss(feature(type="number", loss={"type": loss}), None)(p, t)
    assert value.item() == pytest.approx(reference(p, t).item(), rel=1e-6)


def test_huber_delta_changes_the_value(reg_batch):
    p, t = reg_batch
    value = OutputLoss(feature(type="number", loss={"type": "huber", "delta": 0.3}), None)(p, t)
    assert value.item() == pytest.approx(F.huber_loss(p, t, delta=0.3).item(), rel=1e-6)
    assert value.item() != pytest.approx(F.huber_loss(p, t, delta=1.0).item(), rel=1e-3)


def test_class_weights_list_and_mapping_are_torchs_weighted_mean(cat_batch):
    z, y = cat_batch
    w = torch.tensor([1.0, 3.0, 0.5])
    expect = F.cross_entropy(z, y, weight=w).item()
    assert category(class_weights=[1.0, 3.0, 0.5])(z, y).item() == pytest.approx(expect, rel=1e-6)
    assert category(class_weights={"c": 0.5, "a": 1.0, "b": 3.0})(z, y).item() == pytest.approx(expect, rel=1e-6)
    # Ludwig's list starts with the <UNK> class, which these outputs do not predict
    assert category(class_weights=[9.0, 1.0, 3.0, 0.5])(z, y).item() == pytest.approx(expect, rel=1e-6)
    assert category(class_weights={"<UNK>": 9, "a": 1, "b": 3, "c": 0.5})(z, y).item() == pytest.approx(
        expect, rel=1e-6
    )
    assert expect != pytest.approx(F.cross_entropy(z, y).item(), rel=1e-3)


def test_robust_lambda_mixes_in_a_uniform_loss(cat_batch):
    z, y = cat_batch
    ce = F.cross_entropy(z, y).item()
    assert category(robust_lambda=0.2)(z, y).item() == pytest.approx(0.8 * ce + 0.2 / 3, rel=1e-6)


def test_confidence_penalty_penalizes_low_entropy(cat_batch):
    z, y = cat_batch
    p = torch.softmax(z, -1)
    entropy = -(p * p.log()).sum(-1)
    penalty = ((math.log(3) - entropy) / math.log(3)).mean().item()
    value = category(confidence_penalty=0.5)(z, y).item()
    assert value == pytest.approx(F.cross_entropy(z, y).item() + 0.5 * penalty, rel=1e-5)
    uniform = torch.zeros(4, 3)
    assert category(confidence_penalty=0.5)(uniform, y[:4]).item() == pytest.approx(math.log(3), rel=1e-6)


def test_class_similarities_soften_the_target(cat_batch):
    z, y = cat_batch
    sims = [[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]]
    s = np.asarray(sims)
    rows = np.exp((s - s.max(1, keepdims=True)) / 0.5)
    rows /= rows.sum(1, keepdims=True)
    q = torch.tensor(rows, dtype=torch.float32)[y]
    expect = -(q * torch.log_softmax(z, -1)).sum(-1).mean().item()
    value = category(class_similarities=sims, class_similarities_temperature=0.5)(z, y).item()
    assert value == pytest.approx(expect, rel=1e-5)
    # a temperature of 0 leaves the one-hot target (Ludwig uses the matrix only above 0)
    plain = category(class_similarities=sims, class_similarities_temperature=0)(z, y).item()
    assert plain == pytest.approx(F.cross_entropy(z, y).item(), rel=1e-6)


def test_binary_positive_class_weight_robust_lambda_and_penalty():
    g = torch.Generator().manual_seed(2)
    z, t = torch.randn(32, generator=g), (torch.rand(32, generator=g) > 0.5).float()
    f = feature(type="binary", loss={"positive_class_weight": 4.0})
    expect = F.binary_cross_entropy_with_logits(z, t, pos_weight=torch.tensor([4.0])).item()
    assert OutputLoss(f, None)(z, t).item() == pytest.approx(expect, rel=1e-6)
    base = F.binary_cross_entropy_with_logits(z, t).item()
    robust = OutputLoss(feature(type="binary", loss={"robust_lambda": 0.4}), None)(z, t).item()
    assert robust == pytest.approx(0.6 * base + 0.4 / 2, rel=1e-6)
    p = torch.sigmoid(z)
    entropy = -(p * p.log() + (1 - p) * (1 - p).log())
    penalty = ((math.log(2) - entropy) / math.log(2)).mean().item()
    penalized = OutputLoss(feature(type="binary", loss={"confidence_penalty": 2.0}), None)(z, t).item()
    assert penalized == pytest.approx(base + 2.0 * penalty, rel=1e-5)


def test_set_sigmoid_cross_entropy_class_weights_weight_the_positives():
    g = torch.Generator().manual_seed(3)
    z, t = torch.randn(8, 3, generator=g), (torch.rand(8, 3, generator=g) > 0.5).float()
    meta = FeatureMeta("y", "set", vocab=CLASSES)
    plain = OutputLoss(feature(type="set"), meta)(z, t).item()
    assert plain == pytest.approx(F.binary_cross_entropy_with_logits(z, t).item(), rel=1e-6)
    weighted = OutputLoss(feature(type="set", loss={"class_weights": {"a": 2, "b": 1, "c": 5}}), meta)(z, t)
    expect = F.binary_cross_entropy_with_logits(z, t, pos_weight=torch.tensor([2.0, 1.0, 5.0]))
    assert weighted.item() == pytest.approx(expect.item(), rel=1e-6)


def test_vector_losses():
    g = torch.Generator().manual_seed(4)
    z, t = torch.randn(8, 4, generator=g), torch.softmax(torch.randn(8, 4, generator=g), -1)
    meta = FeatureMeta("y", "vector", shape=(4,))
    assert OutputLoss(feature(type="vector"), meta)(z, t).item() == pytest.approx(F.mse_loss(z, t).item(), rel=1e-6)
    mae = OutputLoss(feature(type="vector", loss={"type": "mean_absolute_error"}), meta)(z, t).item()
    assert mae == pytest.approx(F.l1_loss(z, t).item(), rel=1e-6)
    ce = OutputLoss(feature(type="vector", loss={"type": "softmax_cross_entropy"}), meta)(z, t).item()
    assert ce == pytest.approx(F.cross_entropy(z, t).item(), rel=1e-6)


def test_weight_and_its_short_spelling_scale_the_combined_loss(cat_batch):
    z, y = cat_batch
    for spelled in ({"loss": {"weight": 0.25}}, {"loss_weight": 0.25}):
        f = feature(type="category", **spelled)
        assert f.loss.weight == 0.25 and f.loss_weight == 0.25
        total = OutputLosses([f], {"y": FeatureMeta("y", "category", vocab=CLASSES)})({"y": z}, {"y": y})
        assert total.item() == pytest.approx(0.25 * F.cross_entropy(z, y).item(), rel=1e-6)
    with pytest.raises(ValidationError, match="set twice"):
        feature(type="category", loss_weight=0.5, loss={"weight": 0.25})


def test_a_split_loss_from_shard_sums_is_the_whole_splits():
    g = torch.Generator().manual_seed(5)
    p, t = torch.randn(20, generator=g), torch.randn(20, generator=g)
    loss = OutputLoss(feature(type="number", loss={"type": "root_mean_squared_error"}), None)
    total = loss.sums(p[:7], t[:7]).double() + loss.sums(p[7:], t[7:]).double()
    assert loss.finish(*total.tolist(), 20) == pytest.approx(F.mse_loss(p, t).sqrt().item(), rel=1e-6)


@pytest.mark.parametrize(
    ("loss", "message"),
    [
        ({"class_weights": [1, 2]}, "class_weights has 2 values but the output has 3 classes"),
        ({"class_weights": {"a": 1, "b": 2}}, "misses ['c']"),
        ({"class_weights": {"a": 1, "b": 2, "c": 1, "d": 1}}, "names ['d']"),
        ({"class_similarities": [[1, 0], [0, 1]], "class_similarities_temperature": 1}, "is 2 x 2"),
    ],
)
def test_data_dependent_loss_options_that_do_not_fit_are_one_line(loss, message):
    f = feature(type="category", loss=loss)
    with pytest.raises(ConfigError) as e:
        check_losses([f], {"y": FeatureMeta("y", "category", vocab=CLASSES)}, "sweep.yaml")
    line = str(e.value)
    assert "\n" not in line and message in line
    assert line.startswith("sweep.yaml: output_features[y].loss.")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"type": "category", "loss": {"type": "focal_loss"}},
            "loss type 'focal_loss' of a category output is not supported yet",
        ),
        ({"type": "number", "loss": {"type": "softmax_cross_entropy"}}, "does not match any of the expected tags"),
        ({"type": "category", "loss": {"class_similarities_temperature": 1}}, "no class_similarities are given"),
        ({"type": "number", "calibration": True}, "Extra inputs are not permitted"),
        ({"type": "category", "decoder": {"type": "regressor"}}, "decoder is 'classifier', not 'regressor'"),
    ],
)
def test_loss_and_decoder_keys_that_cannot_be_honoured_are_refused(raw, message):
    with pytest.raises(ValidationError) as e:
        feature(**raw)
    assert message in str(e.value)
