"""The image ``stacked_cnn`` encoder is Ludwig's ``Stacked2DCNN``: its defaults, its keys, the
MNIST example's network, and this platform's own spellings (``num_layers``, ``channels``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.encoders import StackedCNNEncoder
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model.encoders_image import Stacked2DCNN, check_image_encoders

# Ludwig's examples/mnist/config.yaml, verbatim (its 0.4-era keys are read as today's)
MNIST = """\
input_features:
    -
        name: image_path
        type: image
        preprocessing:
            num_processes: 4
        encoder: stacked_cnn
        conv_layers:
            -
                num_filters: 32
                filter_size: 3
                pool_size: 2
                pool_stride: 2
            -
                num_filters: 64
                filter_size: 3
                pool_size: 2
                pool_stride: 2
                dropout: 0.4
        fc_layers:
            -
                fc_size: 128
                dropout: 0.4

output_features:
    -
        name: label
        type: category

training:
    epochs: 5
"""


def _kinds(model: Stacked2DCNN) -> list[list[str]]:
    return [[type(m).__name__ for m in layer.layers] for layer in model.conv]


def test_ludwig_defaults_build_ludwigs_network():
    model = Stacked2DCNN(StackedCNNEncoder(), (28, 28))
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (1, 32, (3, 3), "valid"),
        (32, 64, (3, 3), "valid"),
    ]
    assert _kinds(model) == [["Conv2d", "ReLU", "MaxPool2d"]] * 2
    # 28 -> conv 26 -> pool 13 -> conv 11 -> pool 5: 64 x 5 x 5 into one fc layer of 128
    (fc,) = model.fc.layers
    assert (fc.linear.in_features, fc.linear.out_features, model.output_size) == (1600, 128, 128)
    assert model(torch.rand(3, 28, 28)).shape == (3, 128)


def test_the_mnist_example_builds_its_network(tmp_path):
    (tmp_path / "config.yaml").write_text(MNIST)
    enc = load_sweep(tmp_path / "config.yaml", dataset=tmp_path / "data.csv", search=False).config.input_features[0]
    model = Stacked2DCNN(enc.encoder, (28, 28))
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [32, 64]
    assert _kinds(model) == [["Conv2d", "ReLU", "MaxPool2d"], ["Conv2d", "ReLU", "Dropout", "MaxPool2d"]]
    (fc,) = model.fc.layers
    assert fc.linear.out_features == 128 and fc.dropout is not None and fc.dropout.p == 0.4


def test_encoder_keys_fill_every_layer_and_a_layer_key_wins():
    cfg = StackedCNNEncoder.model_validate(
        {
            "num_conv_layers": 3,
            "out_channels": 8,
            "kernel_size": [3, 5],
            "padding": "same",
            "conv_norm": "batch",
            "conv_activation": "tanh",
            "pool_function": "avg",
            "pool_kernel_size": 2,
            "num_fc_layers": 2,
            "output_size": 20,
            "fc_dropout": 0.25,
        }
    )
    model = Stacked2DCNN(cfg, (16, 12))
    assert _kinds(model) == [["Conv2d", "BatchNorm2d", "Tanh", "AvgPool2d"]] * 3
    assert all(c.kernel_size == (3, 5) for c in model.modules() if isinstance(c, nn.Conv2d))
    assert model.conv[-1].output_shape == (8, 2, 1)  # 16x12 halved three times
    assert [layer.linear.out_features for layer in model.fc.layers] == [20, 20]
    assert model(torch.rand(2, 16, 12)).shape == (2, 20)

    cfg = StackedCNNEncoder.model_validate(
        {"conv_layers": [{"out_channels": 4, "stride": 2, "pool_kernel_size": None}, {}], "conv_norm": "layer"}
    )
    model = Stacked2DCNN(cfg, (17, 17))
    assert model.conv[0].output_shape == (4, 8, 8)  # stride 2, no pool; LayerNorm over the 8x8 map
    assert isinstance(model.conv[0].layers[1], nn.LayerNorm) and model.conv[0].layers[1].normalized_shape == (8, 8)
    assert model.conv[1].output_shape == (32, 3, 3)  # the encoder's out_channels, conv 6 -> pool 3


def test_own_spellings_are_num_conv_layers_out_channels_conv_dropout():
    cfg = StackedCNNEncoder.model_validate({"num_layers": 3, "channels": 16, "dropout": 0.1, "padding": "same"})
    model = Stacked2DCNN(cfg, (8, 8))
    assert [m.out_channels for m in model.modules() if isinstance(m, nn.Conv2d)] == [16, 16, 16]
    assert all(any(isinstance(m, nn.Dropout) and m.p == 0.1 for m in layer.layers) for layer in model.conv)
    with pytest.raises(ValueError, match="num_layers and num_conv_layers are one key"):
        StackedCNNEncoder.model_validate({"num_layers": 2, "num_conv_layers": 2})


def test_use_pretrained_false_is_accepted_true_is_refused():
    assert StackedCNNEncoder.model_validate({"use_pretrained": False}).use_pretrained is False
    with pytest.raises(ValueError, match="no pretrained weights"):
        StackedCNNEncoder.model_validate({"use_pretrained": True})


def test_an_image_too_small_for_the_stack_is_one_line_before_training():
    from types import SimpleNamespace

    from ludwig_hpo.config.features import ImageInputFeature

    feat = ImageInputFeature.model_validate({"name": "img", "type": "image"})
    meta = {"img": SimpleNamespace(shape=(8, 8))}  # Ludwig's defaults: 8 -> 6 -> 3 -> 1 -> 0
    with pytest.raises(ConfigError) as info:
        check_image_encoders([feat], meta, "sweep.yaml")  # type: ignore[arg-type]  # a stand-in meta
    assert info.value.key == "input_features[img].encoder" and "padding: same" in (info.value.fix or "")


@pytest.mark.parametrize("where", [{"conv_layers": [{"dropout": True}]}, {"conv_dropout": True}, {"dropout": False}])
def test_a_dropout_switch_is_refused_not_read_as_a_rate_of_one(where):
    with pytest.raises(ValueError, match="Ludwig 0.2's switch for training.dropout_rate"):
        StackedCNNEncoder.model_validate(where)
