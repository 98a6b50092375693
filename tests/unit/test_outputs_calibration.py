"""``calibration: true``: temperature scaling fitted on the validation split after training
(Ludwig's), dividing the logits of the probabilities the test scores and the served model use."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from pydantic import TypeAdapter

from ludwig_hpo.config.outputs import OutputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.calibration import expected_calibration_error, fit_temperature
from ludwig_hpo.model.losses import OutputLoss
from ludwig_hpo.model.metrics import OutputMetrics
from ludwig_hpo.model.outputs import predicted_values


def _overconfident(n: int = 2000, classes: int = 4, scale: float = 4.0):
    g = torch.Generator().manual_seed(0)
    true_logits = torch.randn(n, classes, generator=g)
    labels = torch.multinomial(torch.softmax(true_logits, -1), 1, generator=g).squeeze(-1)
    return true_logits * scale, labels


def test_the_fitted_temperature_undoes_overconfidence():
    logits, labels = _overconfident()
    t = fit_temperature(logits, labels, binary=False)
    assert 3.0 < t < 5.5  # the logits were 4 times the true ones
    assert F.cross_entropy(logits / t, labels) < F.cross_entropy(logits, labels)
    assert expected_calibration_error(logits / t, labels) < expected_calibration_error(logits, labels)


def test_a_binary_temperature_is_fitted_on_the_two_class_logits():
    g = torch.Generator().manual_seed(1)
    true = torch.randn(2000, generator=g) * 2
    labels = (torch.rand(2000, generator=g) < torch.sigmoid(true)).float()
    t = fit_temperature(true * 3, labels, binary=True)
    assert 2.2 < t < 4.0


def test_the_temperature_moves_a_binarys_thresholded_predictions_and_the_served_probability():
    f = TypeAdapter(OutputFeature).validate_python({"name": "y", "type": "binary", "threshold": 0.3})
    m = OutputMetrics(f, None, OutputLoss(f, None))
    z, t = torch.tensor([-1.5, -0.5, 0.5, 2.0]), torch.tensor([1.0, 0.0, 1.0, 1.0])
    before = m.finish(m.sums(z, t).tolist(), 4.0, (m.scores(z).numpy(), t.numpy()))
    m.temperature = 3.0
    after = m.finish(m.sums(z, t).tolist(), 4.0, (m.scores(z).numpy(), t.numpy()))
    assert before["accuracy"] == 0.5 and after["accuracy"] == 0.75  # sigmoid(-1.5 / 3) = 0.38 >= 0.3
    assert after["loss"] == before["loss"] and after["roc_auc"] == before["roc_auc"]  # Ludwig's loss sees the logits

    heads = torch.nn.Module()
    heads.output_metrics = {"y": m}
    assert torch.allclose(predicted_values(heads, "y", z), z / 3.0)


@pytest.mark.parametrize("calibration", [True, False])
def test_calibrate_sets_the_fitted_temperature_of_calibrated_outputs(make_config, calibration):
    from ludwig_hpo.data import prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.train.calibrate import calibrate

    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    frame = pd.DataFrame({"x": x, "k": np.where(x + rng.normal(size=300) > 0, "hi", "lo"), "b": (x > 0).astype(int)})
    outs = [{"name": "k", "type": "category", "calibration": calibration}, {"name": "b", "type": "binary"}]
    cfg = make_config([{"name": "x", "type": "number"}], outs)
    data = prepare(frame, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    with torch.no_grad():
        model.heads["k"].projection.weight.mul_(40.0)  # an overconfident head
    fitted = calibrate(model, cfg, data)
    assert model.heads.output_metrics["b"].temperature == 1.0
    if calibration:
        assert set(fitted) == {"k"} and fitted["k"] > 1.0
        assert model.heads.output_metrics["k"].temperature == fitted["k"]
    else:
        assert fitted == {} and model.heads.output_metrics["k"].temperature == 1.0
    # fitted: the target's fill value and last training label (what a served model applies)
    meta = FeatureMeta(
        "k", "category", vocab=("hi", "lo"), fitted={"fill": None, "last": data.meta["k"].fitted["last"]}
    )
    assert data.meta["k"] == meta
