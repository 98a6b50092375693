"""Image pixels as stored (uint8 or float32, (batch, C, H, W)) to the floats an image encoder
takes: divided by the feature's scale, then ImageNet-standardized when the feature asks for it
(``standardize_image: imagenet1k``). Part of the model, so training, evaluation, the batch-size
probe and a served model all scale the same way, on the device, one batch at a time."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

#: Ludwig's ``IMAGENET1K_MEAN`` / ``IMAGENET1K_STD`` (per RGB channel, of pixels in 0..1).
IMAGENET1K_MEAN = (0.485, 0.456, 0.406)
IMAGENET1K_STD = (0.229, 0.224, 0.225)


class PixelScaling(nn.Module):
    """``forward(x)``: (batch, C, H, W) pixels of any dtype -> float32 ``x / scale``, then
    ``(x - mean) / std`` per channel with ImageNet's statistics when ``imagenet1k`` is set.

    Args:
        stats: the feature's ``FeatureMeta.stats``: ``scale`` (> 0) and ``imagenet1k``
            (1.0: standardize; only set for 3-channel images, see
            :func:`~ludwig_hpo.data.images.prepare_images`).

    The statistics are non-persistent buffers: they follow the module to the device and add
    nothing to a state dict. Runs on every rank and in a served model.
    """

    mean: torch.Tensor | None
    std: torch.Tensor | None

    def __init__(self, stats: Mapping[str, float]) -> None:
        super().__init__()
        self.scale = float(stats.get("scale", 1.0)) or 1.0
        imagenet = bool(stats.get("imagenet1k", 0.0))
        self.register_buffer("mean", torch.tensor(IMAGENET1K_MEAN).view(1, 3, 1, 1) if imagenet else None, False)
        self.register_buffer("std", torch.tensor(IMAGENET1K_STD).view(1, 3, 1, 1) if imagenet else None, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float() / self.scale
        if self.mean is not None and self.std is not None:
            x = (x - self.mean) / self.std
        return x
