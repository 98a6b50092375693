"""Ludwig's image ``stacked_cnn`` encoder (``Stacked2DCNN``): 2-d convolutions, flattened, then
the fully connected stack, over (batch, channels, height, width) images (grayscale or RGB).

Runs on every rank; parameters come from torch's global RNG in construction order (the
convolutions keep torch's default initialization, as Ludwig's do; the fully connected layers
take Ludwig's initializers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from ludwig_hpo.config import encoders as cfgs
from ludwig_hpo.config.features import InputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model.combiners.fc import FCStack, activation, layer_specs
from ludwig_hpo.model.encoders_image_build import CHECKED_CONFIGS, image_encoder_problem


def _pair(value: Any) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _out_size(size: int, kernel: int, stride: int, padding: int | str, dilation: int) -> int:
    """One side of a convolution's or pool's output (torch's formula; ``same`` keeps the size)."""
    if padding == "same":
        return size
    pad = 0 if padding == "valid" else int(padding)
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _side(value: Any, axis: int) -> Any:
    return value if isinstance(value, str) else _pair(value)[axis]


class Conv2DLayer(nn.Module):
    """Ludwig's ``Conv2DLayer``: (batch, in_channels, h, w) -> (batch, out_channels, h', w'):
    Conv2d -> norm (``batch``: BatchNorm2d over channels; ``layer``: LayerNorm over the
    convolved map's (h, w)) -> activation -> dropout (when > 0) -> max or average pool (when
    ``pool_kernel_size`` is set; its stride defaults to its size).

    Raises:
        ValueError: the map would shrink below one pixel (kernel, stride, padding or pooling
            too large for the image).
    """

    def __init__(self, in_channels: int, shape: tuple[int, int], spec: dict[str, Any]) -> None:
        super().__init__()
        kernel, stride, dilation = _pair(spec["kernel_size"]), _pair(spec["stride"]), _pair(spec["dilation"])
        padding = spec["padding"] if isinstance(spec["padding"], str) else _pair(spec["padding"])
        layers: list[nn.Module] = [
            nn.Conv2d(
                in_channels,
                spec["out_channels"],
                kernel,
                stride=stride,
                padding=padding,
                dilation=dilation,
                groups=spec["groups"],
                bias=spec["use_bias"],
                padding_mode=spec["padding_mode"],
            )
        ]
        h, w = (_out_size(shape[i], kernel[i], stride[i], _side(spec["padding"], i), dilation[i]) for i in (0, 1))
        params = dict(spec["norm_params"] or {})
        if spec["norm"] == "batch":
            layers.append(nn.BatchNorm2d(spec["out_channels"], **params))
        elif spec["norm"] == "layer":
            layers.append(nn.LayerNorm((h, w), **params))
        layers.append(activation(spec["activation"]))
        if spec["dropout"] > 0:
            layers.append(nn.Dropout(spec["dropout"]))
        if spec["pool_kernel_size"] is not None:
            pk = _pair(spec["pool_kernel_size"])
            ps = _pair(spec["pool_stride"] or spec["pool_kernel_size"])
            pp = _pair(spec["pool_padding"])
            if spec["pool_function"] == "max":
                pd = _pair(spec["pool_dilation"])
                layers.append(nn.MaxPool2d(pk, stride=ps, padding=pp, dilation=pd))
            else:  # torch's average pool has no dilation
                pd = (1, 1)
                layers.append(nn.AvgPool2d(pk, stride=ps, padding=pp))
            h, w = (_out_size((h, w)[i], pk[i], ps[i], pp[i], pd[i]) for i in (0, 1))
        if h < 1 or w < 1:
            raise ValueError(
                f"a {shape[0]}x{shape[1]} map shrinks below one pixel (kernel_size {spec['kernel_size']}, "
                f"padding {spec['padding']}, pool_kernel_size {spec['pool_kernel_size']}); use padding: same, "
                f"a smaller kernel_size or pool_kernel_size, or fewer conv layers"
            )
        self.layers = nn.Sequential(*layers)
        self.output_shape = (int(spec["out_channels"]), h, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Stacked2DCNN(nn.Module):
    """(batch, C, H, W) (or one-channel (batch, H, W)) float images -> (batch, output_size): Ludwig's ``Conv2DStack``
    (see :meth:`~ludwig_hpo.config.encoders.StackedCNNEncoder.conv_specs`), flattened, then the
    ``FCStack`` of ``fc_layers`` / ``num_fc_layers`` with the ``fc_*`` defaults.

    Raises:
        ValueError: the convolutions shrink the image below one pixel.
    """

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.StackedCNNEncoder, shape: tuple[int, ...]) -> None:
        super().__init__()
        # (channels, H, W) as images are prepared; (H, W): one channel
        channels, h, w = (int(v) for v in (shape if len(shape) == 3 else (1, *shape)))
        stack: list[nn.Module] = []
        specs = cfg.conv_specs()
        for i, spec in enumerate(specs):
            try:
                layer = Conv2DLayer(channels, (h, w), spec)
            except ValueError as e:
                raise ValueError(f"stacked_cnn conv layer {i + 1} of {len(specs)}: {e}") from None
            stack.append(layer)
            channels, h, w = layer.output_shape
        self.conv = nn.Sequential(*stack)
        defaults = {
            "output_size": cfg.output_size,
            "use_bias": cfg.fc_use_bias,
            "weights_initializer": cfg.fc_weights_initializer,
            "bias_initializer": cfg.fc_bias_initializer,
            "norm": cfg.fc_norm,
            "norm_params": cfg.fc_norm_params,
            "activation": cfg.fc_activation,
            "dropout": cfg.fc_dropout,
        }
        self.fc = FCStack(channels * h * w, layer_specs(cfg.fc_layers, cfg.num_fc_layers, defaults))
        self.output_size = int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.conv(x.unsqueeze(1) if x.dim() == 3 else x), 1))


def check_image_encoders(features: Sequence[InputFeature], meta: Mapping[str, FeatureMeta], source: str) -> None:
    """Refuse, before any trial starts, an image ``stacked_cnn`` whose convolutions shrink the
    prepared images (``meta[name].shape``, (C, H, W)) below one pixel, and any other image
    encoder that cannot take them (see
    :func:`~ludwig_hpo.model.encoders_image_build.image_encoder_problem`). Driver.

    Raises:
        ConfigError: naming the feature's encoder and the fix.
    """
    for feat in features:
        if isinstance(feat.encoder, CHECKED_CONFIGS) and feat.name in meta:
            problem = image_encoder_problem(feat.encoder, meta[feat.name])
            if problem:
                message, _, fix = problem.partition("; ")
                raise ConfigError(message, source=source, key=f"input_features[{feat.name}].encoder", fix=fix or None)
        if isinstance(feat.encoder, cfgs.StackedCNNEncoder) and feat.name in meta:
            shape = meta[feat.name].shape
            try:
                Stacked2DCNN(feat.encoder, tuple(int(v) for v in shape))
            except ValueError as e:
                message, _, fix = str(e).partition("; ")
                raise ConfigError(message, source=source, key=f"input_features[{feat.name}].encoder", fix=fix) from None
