"""Old Ludwig keys: TensorFlow initializer names, feature-level preprocessing options, a
category's ``representation``, vector dense ``layers``, h3 rnn ``state_size`` and a null
``weight_regularization`` are upgraded with one warning each; retired keys current Ludwig
refuses (tabnet ``bn_virtual_divider``, a set ``weight_regularization``) get one line naming
what replaced them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.upgrade import upgrade
from ludwig_hpo.errors import ConfigError


def _cfg(inputs: list[dict], output: dict | None = None, **top: object) -> dict:
    return {
        "input_features": inputs,
        "output_features": [output or {"name": "y", "type": "binary"}],
        **top,
    }


def test_tensorflow_initializer_names_become_torch_names():
    raw = _cfg(
        [{"name": "d", "type": "date", "encoder": {"type": "embed", "weights_initializer": "glorot_uniform"}}],
        combiner={"type": "concat", "weights_initializer": {"type": "he_normal"}},
    )
    out, warnings = upgrade(raw)
    assert out["input_features"][0]["encoder"]["weights_initializer"] == "xavier_uniform"
    assert out["combiner"]["weights_initializer"] == {"type": "kaiming_normal"}
    assert any("glorot_uniform is Ludwig's old (TensorFlow) name for xavier_uniform" in w for w in warnings)
    assert len(warnings) == 2


def test_feature_level_preprocessing_options_move_into_preprocessing():
    raw = _cfg([{"name": "age", "type": "number", "missing_value_strategy": "fill_with_mean", "fill_value": 3}])
    out, warnings = upgrade(raw)
    feat = out["input_features"][0]
    assert feat["preprocessing"] == {"missing_value_strategy": "fill_with_mean", "fill_value": 3}
    assert "encoder" not in feat or "missing_value_strategy" not in feat["encoder"]
    assert warnings == [
        "input_features[0]: missing_value_strategy, fill_value: written at the feature level, which is Ludwig's old "
        "form of preprocessing options; read under preprocessing:"
    ]


def test_category_representation_sparse_is_the_sparse_encoder():
    out, _ = upgrade(_cfg([{"name": "c", "type": "category", "representation": "sparse"}]))
    assert out["input_features"][0]["encoder"] == {"type": "sparse"}


@pytest.mark.parametrize(
    ("feature", "new_key"),
    [
        ({"name": "v", "type": "vector", "encoder": {"type": "dense", "layers": [{"output_size": 4}]}}, "fc_layers"),
        ({"name": "h", "type": "h3", "encoder": {"type": "rnn", "state_size": 12}}, "hidden_size"),
    ],
)
def test_renamed_encoder_options(feature, new_key):
    out, warnings = upgrade(_cfg([feature]))
    enc = out["input_features"][0]["encoder"]
    assert new_key in enc and len(warnings) == 1


def test_null_weight_regularization_is_removed_with_a_warning():
    out, warnings = upgrade(
        _cfg([{"name": "x", "type": "number"}], {"name": "y", "type": "binary", "weight_regularization": None})
    )
    assert "weight_regularization" not in out["output_features"][0].get("decoder", {})
    assert any("null is Ludwig 0.4's per-layer regularizer, off; removed" in w for w in warnings)


BASE = """\
name: tiny
dataset:
  source: sklearn:digits
input_features:
  - {name: size, type: number}
output_features:
  - {name: label, type: category}
"""


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        (
            "combiner:\n  type: tabnet\n  bn_virtual_divider: 32\n",
            "combiner.bn_virtual_divider: bn_virtual_divider is an old Ludwig tabnet key (batch size / divider); "
            "current Ludwig has no such key; fix: remove it, or set bn_virtual_bs",
        ),
        (
            "combiner:\n  type: concat\n  weight_regularization: l2\n",
            "combiner.weight_regularization: weight_regularization is Ludwig 0.4's per-layer regularizer; current "
            "Ludwig regularizes in the trainer; fix: remove it and set trainer.regularization_type",
        ),
    ],
)
def test_retired_keys_name_what_replaced_them(tmp_path: Path, extra, expect):
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + extra)
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert expect in str(info.value)
