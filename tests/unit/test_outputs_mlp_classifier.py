"""Ludwig's ``mlp_classifier`` decoder: the output's fully connected stack, then its own
``num_fc_layers`` layers of ``output_size``, then the projection; ``calibration`` and
``mc_dropout_samples`` are refused in one line."""

from __future__ import annotations

import pytest
import torch
from pydantic import TypeAdapter, ValidationError

from ludwig_hpo.config.outputs import OutputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.outputs import OutputHeads

_ADAPTER: TypeAdapter = TypeAdapter(OutputFeature)


def _heads(decoder: dict, kind: str = "category") -> OutputHeads:
    meta = FeatureMeta("y", kind, vocab=("a", "b", "c")) if kind == "category" else FeatureMeta("y", kind)
    return OutputHeads([_ADAPTER.validate_python({"name": "y", "type": kind, "decoder": decoder})], {"y": meta}, 6)


def _linears(heads: OutputHeads) -> list[tuple[int, int]]:
    return [(m.in_features, m.out_features) for m in heads.modules() if isinstance(m, torch.nn.Linear)]


def test_mlp_classifier_is_the_stack_then_its_layers_then_the_projection():
    # Ludwig's uncertainty example: num_fc_layers 1 builds the output's stack (fc_output_size
    # 256) and one MLP layer of output_size 64 before the 3 logits
    heads = _heads({"type": "mlp_classifier", "num_fc_layers": 1, "output_size": 64, "dropout": 0.1})
    assert _linears(heads) == [(6, 256), (256, 64), (64, 3)]
    assert heads(torch.randn(4, 6))["y"].shape == (4, 3)


def test_mlp_classifier_defaults_to_one_layer_of_256_and_binary_has_one_logit():
    heads = _heads({"type": "mlp_classifier", "fc_output_size": 8}, kind="binary")
    assert _linears(heads) == [(6, 8), (8, 256), (256, 1)]
    assert heads(torch.randn(4, 6))["y"].shape == (4,)


def test_mlp_classifier_with_no_layers_is_the_classifier():
    assert _linears(_heads({"type": "mlp_classifier", "num_fc_layers": 0})) == [(6, 3)]


@pytest.mark.parametrize(("key", "value"), [("calibration", "temperature_scaling"), ("mc_dropout_samples", 10)])
def test_calibration_and_mc_dropout_are_not_supported_yet(key, value):
    with pytest.raises(ValidationError, match=f"{key} is not supported yet"):
        _ADAPTER.validate_python({"name": "y", "type": "binary", "decoder": {"type": "mlp_classifier", key: value}})


def test_mlp_classifier_is_refused_for_a_number_output():
    with pytest.raises(ValidationError, match="a number output's decoder is 'regressor', not 'mlp_classifier'"):
        _ADAPTER.validate_python({"name": "y", "type": "number", "decoder": {"type": "mlp_classifier"}})
