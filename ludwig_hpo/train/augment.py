"""Ludwig's image ``augmentation`` on the training batches of one rank, seeded.

Each operation of a feature's list runs on a batch with probability 0.5 and draws one
parameter for the whole batch when it runs (Ludwig's ``ImageAugmentation`` pipeline). The
operations are torchvision's functional ones re-written in torch (no torchvision here), on the
pixels as stored: uint8 0..255, or float32 up to the feature's scale (deeper grayscale).

The draws come from a generator seeded by (trial seed, epoch, rank, batch index): a rerun, or a
run resumed at an epoch, augments the same rows the same way, and the ranks of a DDP job
augment differently. Evaluation batches are never augmented (only the training loop calls it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ludwig_hpo.config import augmentation as aug
from ludwig_hpo.config.features import ImageInputFeature, InputFeature
from ludwig_hpo.data.preprocess import FeatureMeta

#: torchvision's ``rgb_to_grayscale`` weights, which ``adjust_contrast`` takes the mean of.
_GRAY = (0.2989, 0.587, 0.114)


def _bound(x: torch.Tensor, scale: float) -> float:
    return 255.0 if x.dtype == torch.uint8 else scale


def _as(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    # torchvision casts a blended integer image back by truncation (``Tensor.to``)
    return x if x.dtype == like.dtype else x.to(like.dtype)


def hflip(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) mirrored left to right."""
    return x.flip(-1)


def vflip(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) mirrored top to bottom."""
    return x.flip(-2)


def rotate(x: torch.Tensor, degrees: float) -> torch.Tensor:
    """(B, C, H, W) rotated counter-clockwise by ``degrees`` about the centre, same size,
    nearest pixel, 0 outside the source: torchvision's ``rotate(img, angle)`` defaults."""
    b, _, h, w = x.shape
    theta = math.radians(degrees)
    cos, sin = math.cos(theta), math.sin(theta)
    # pixel-centre coordinates about the image centre, as torchvision's _gen_affine_grid
    xs = torch.linspace(-w * 0.5 + 0.5, w * 0.5 - 0.5, steps=w, device=x.device)
    ys = torch.linspace(-h * 0.5 + 0.5, h * 0.5 - 0.5, steps=h, device=x.device)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    src_x = (cos * gx - sin * gy) / (0.5 * w)
    src_y = (sin * gx + cos * gy) / (0.5 * h)
    grid = torch.stack([src_x, src_y], dim=-1).expand(b, h, w, 2)
    out = F.grid_sample(x.float(), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return torch.round(out).to(x.dtype) if x.dtype == torch.uint8 else out.to(x.dtype)


def gaussian_kernel(kernel_size: int) -> torch.Tensor:
    """(k, k) float32 Gaussian weights summing to 1, sigma ``0.15 * k + 0.35`` (torchvision's
    default for ``gaussian_blur`` without a sigma)."""
    sigma = 0.15 * kernel_size + 0.35
    half = (kernel_size - 1) * 0.5
    t = torch.linspace(-half, half, steps=kernel_size)
    k1 = torch.exp(-0.5 * (t / sigma).pow(2))
    k1 = k1 / k1.sum()
    return torch.outer(k1, k1)


def blur(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """(B, C, H, W) blurred per channel by :func:`gaussian_kernel`, borders reflected; uint8
    rounded back (torchvision's ``gaussian_blur``)."""
    c = x.shape[1]
    kernel = gaussian_kernel(kernel_size).to(x.device).expand(c, 1, kernel_size, kernel_size)
    p = kernel_size // 2
    out = F.conv2d(F.pad(x.float(), [p, p, p, p], mode="reflect"), kernel, groups=c)
    return torch.round(out).to(x.dtype) if x.dtype == torch.uint8 else out.to(x.dtype)


def brightness(x: torch.Tensor, factor: float, scale: float = 255.0) -> torch.Tensor:
    """(B, C, H, W) times ``factor``, clipped to 0..the pixel range (torchvision's
    ``adjust_brightness``: a blend with black). ``scale``: the range of float pixels."""
    return _as((factor * x.float()).clamp(0, _bound(x, scale)), x)


def contrast(x: torch.Tensor, factor: float, scale: float = 255.0) -> torch.Tensor:
    """(B, C, H, W) blended with each image's mean grey level by ``factor`` (``factor * x +
    (1 - factor) * mean``), clipped to the pixel range (torchvision's ``adjust_contrast``: the
    mean of the grayscale image for 3 channels, cast to the pixel dtype first)."""
    if x.shape[1] == 3:
        r, g, b = x.float().unbind(1)
        gray = _as(_GRAY[0] * r + _GRAY[1] * g + _GRAY[2] * b, x).float()
        mean = gray.mean(dim=(-2, -1)).view(-1, 1, 1, 1)
    else:
        mean = x.float().mean(dim=(-3, -2, -1), keepdim=True)
    return _as((factor * x.float() + (1.0 - factor) * mean).clamp(0, _bound(x, scale)), x)


def apply_ops(
    x: torch.Tensor, ops: Sequence[aug.AugmentationOp], rng: np.random.Generator, scale: float = 255.0
) -> torch.Tensor:
    """One batch through ``ops`` in order: each runs with probability 0.5, with one parameter
    drawn from ``rng`` for the whole batch when it runs (Ludwig's pipeline)."""
    for op in ops:
        if rng.random() >= 0.5:
            continue
        if isinstance(op, aug.RandomHorizontalFlip):
            x = hflip(x)
        elif isinstance(op, aug.RandomVerticalFlip):
            x = vflip(x)
        elif isinstance(op, aug.RandomRotate):
            x = rotate(x, rng.random() * 2 * op.degree - op.degree)
        elif isinstance(op, aug.RandomBlur):
            x = blur(x, op.kernel_size)
        elif isinstance(op, aug.RandomBrightness):
            x = brightness(x, rng.random() * (op.max - op.min) + op.min, scale)
        else:
            x = contrast(x, rng.random() * (op.max - op.min) + op.min, scale)
    return x


class Augmentation:
    """The training-batch hook: ``augment(inputs, epoch, batch)`` returns ``inputs`` with each
    image feature that has an ``augmentation`` list passed through it (other inputs, and every
    input of a model without augmentation, unchanged and uncopied).

    Args:
        features: the sweep's input features.
        meta: ``PreparedData.meta`` (an image feature's ``scale`` bounds float pixels).
        seed: the trial's seed (``trainer.seed`` + the job's offset).
        rank: this process's rank in the DDP job (0 for one process).

    Runs on every rank, on the training batches only.
    """

    def __init__(self, features: Sequence[InputFeature], meta: Mapping[str, FeatureMeta], *, seed: int, rank: int):
        self.pipelines = [
            (f.name, tuple(f.augmentation), float(meta[f.name].stats.get("scale", 255.0)))
            for f in features
            if isinstance(f, ImageInputFeature) and f.augmentation
        ]
        self.seed, self.rank = int(seed) % 2**63, int(rank)

    def __bool__(self) -> bool:
        return bool(self.pipelines)

    def __call__(self, inputs: dict[str, torch.Tensor], epoch: int, batch: int) -> dict[str, torch.Tensor]:
        if not self.pipelines:
            return inputs
        rng = np.random.default_rng((self.seed, int(epoch), self.rank, int(batch)))
        for name, ops, scale in self.pipelines:
            inputs[name] = apply_ops(inputs[name], ops, rng, scale)
        return inputs
