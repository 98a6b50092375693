"""Ludwig's image ``augmentation``: the operations, their keys and defaults. Typed, frozen; no I/O.

An image input feature's ``augmentation`` is ``false`` (Ludwig's default: none), ``true``
(Ludwig's default list: ``random_horizontal_flip`` then ``random_rotate`` with ``degree: 15``)
or a list of operations applied in the order written. Each operation runs on a training batch
with probability 0.5 and, when it runs, with one random parameter for the whole batch, as
Ludwig does; :mod:`ludwig_hpo.train.augment` applies them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, model_validator

from ludwig_hpo.config.base import RuleError, _Base


class RandomHorizontalFlip(_Base):
    """Mirror the batch left to right."""

    type: Literal["random_horizontal_flip"]


class RandomVerticalFlip(_Base):
    """Mirror the batch top to bottom."""

    type: Literal["random_vertical_flip"]


class RandomRotate(_Base):
    """Rotate the batch counter-clockwise by an angle drawn from ``[-degree, +degree]`` (degrees),
    about the image centre, keeping the size; corners outside the source become 0 (torchvision's
    ``rotate`` with nearest-pixel sampling, which Ludwig calls)."""

    type: Literal["random_rotate"]
    degree: int = Field(default=15, ge=0, le=360)


class RandomBlur(_Base):
    """Blur the batch with a ``kernel_size`` x ``kernel_size`` Gaussian (sigma
    ``0.15 * kernel_size + 0.35``, reflected borders: torchvision's ``gaussian_blur``)."""

    type: Literal["random_blur"]
    kernel_size: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _odd(self) -> RandomBlur:
        if self.kernel_size % 2 == 0:
            raise RuleError(
                f"kernel_size must be odd, got {self.kernel_size}",
                fix=f"use kernel_size: {self.kernel_size + 1}",
            )
        return self


class _FactorRange(_Base):
    """A factor drawn uniformly from ``[min, max]``; Ludwig's docs spell the keys
    ``min_<op>`` / ``max_<op>``, its schema ``min`` / ``max``: both are read."""

    min: float = Field(default=0.5, gt=0)
    max: float = Field(default=2.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _doc_spelling(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        word = str(data.get("type", "")).removeprefix("random_")
        out = dict(data)
        for bound in ("min", "max"):
            long = f"{bound}_{word}"
            if long in out:
                if bound in out:
                    raise RuleError(f"{bound} and {long} are both set", fix=f"keep only {bound}")
                out[bound] = out.pop(long)
        return out

    @model_validator(mode="after")
    def _ordered(self) -> _FactorRange:
        if self.min > self.max:
            raise RuleError(f"min {self.min} is above max {self.max}", fix="swap min and max")
        return self


class RandomBrightness(_FactorRange):
    """Multiply the pixels by a factor from ``[min, max]``, clipped to the pixel range
    (torchvision's ``adjust_brightness``)."""

    type: Literal["random_brightness"]


class RandomContrast(_FactorRange):
    """Blend each image with its mean grey level by a factor from ``[min, max]``, clipped to
    the pixel range (torchvision's ``adjust_contrast``)."""

    type: Literal["random_contrast"]


AugmentationOp = Annotated[
    Union[RandomHorizontalFlip, RandomVerticalFlip, RandomRotate, RandomBlur, RandomBrightness, RandomContrast],
    Field(discriminator="type"),
]

#: ``augmentation: true``: Ludwig's ``AUGMENTATION_DEFAULT_OPERATIONS``.
DEFAULT_OPERATIONS: tuple[AugmentationOp, ...] = (
    RandomHorizontalFlip(type="random_horizontal_flip"),
    RandomRotate(type="random_rotate"),
)


def augmentation_list(value: Any) -> Any:
    """Before-validator of an image feature's ``augmentation``: ``true`` -> Ludwig's default
    list, ``false`` / null -> no operation, a list passes to the operations' union. Pure."""
    if value is True:
        return list(DEFAULT_OPERATIONS)
    if value is False or value is None:
        return []
    if isinstance(value, dict):
        raise RuleError(
            "augmentation must be true, false or a list of operations, got one mapping",
            fix="write it as a list: augmentation: [{type: random_horizontal_flip}]",
        )
    return value


#: An image feature's ``augmentation`` (and ``defaults.image.augmentation``): ``true``,
#: ``false`` or a list, validated as the list of operations.
Augmentation = Annotated[tuple[AugmentationOp, ...], BeforeValidator(augmentation_list)]
