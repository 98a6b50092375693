"""Preprocessing sections: Ludwig's top-level ``preprocessing`` (the split) and each feature
type's ``preprocessing``. Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, model_validator

from ludwig_hpo.config.base import RuleError, _Base


class NumberPreprocessing(_Base):
    """``normalization``: zscore or minmax (statistics from the training split), or none.
    Missing values are filled with the training split's mean."""

    normalization: Literal["zscore", "minmax", "none"] = "zscore"


class ImagePreprocessing(_Base):
    """How image cells become (height, width) arrays, with Ludwig's key names.

    Pixels are divided by the training split's maximum pixel value (``scale: auto``) or by
    a given number. ``height`` and ``width`` (set both or neither) resize every image, by
    ``resize_method``: ``interpolate`` (bilinear) or ``crop_or_pad`` (centred); unset, every
    image must have the first image's size. Image files are converted to grayscale, so
    ``num_channels`` may only be 1.
    """

    scale: Union[Literal["auto"], float] = "auto"
    height: int | None = Field(default=None, ge=1, le=4096)
    width: int | None = Field(default=None, ge=1, le=4096)
    num_channels: int | None = None
    resize_method: Literal["interpolate", "crop_or_pad"] = "interpolate"

    @model_validator(mode="after")
    def _size_and_channels(self) -> ImagePreprocessing:
        if (self.height is None) != (self.width is None):
            given, other = ("height", "width") if self.height is not None else ("width", "height")
            raise RuleError(f"{given} is set but {other} is not", fix=f"set {other} too (or remove {given})")
        if self.num_channels is not None and self.num_channels != 1:
            raise RuleError(
                f"num_channels {self.num_channels} is not supported: image features are one-channel "
                "(height, width) arrays and image files are converted to grayscale",
                fix="set num_channels: 1 or remove it",
            )
        return self


class LudwigSplitConfig(_Base):
    """Ludwig's ``preprocessing.split``: ``random`` (``probabilities`` train/validation/test),
    ``stratify`` (random, stratified on ``column``) or ``fixed`` (``column`` holds 0 = train,
    1 = validation, 2 = test for each row)."""

    type: Literal["random", "stratify", "fixed"] = "random"
    column: str | None = None
    probabilities: tuple[float, float, float] = (0.7, 0.1, 0.2)

    @model_validator(mode="after")
    def _fits(self) -> LudwigSplitConfig:
        if self.type in ("fixed", "stratify") and not self.column:
            raise RuleError(f"split type {self.type!r} needs column", fix="add column: <the split column's name>")
        if self.type == "random" and self.column:
            raise RuleError("column does not apply to a random split", fix="remove column, or use type: fixed")
        if abs(sum(self.probabilities) - 1) > 1e-6 or min(self.probabilities) <= 0:
            raise RuleError(
                f"probabilities must be three positive fractions summing to 1, got {list(self.probabilities)}",
                fix="use e.g. [0.7, 0.1, 0.2]",
            )
        return self


class GlobalPreprocessing(_Base):
    """Ludwig's top-level ``preprocessing``: only ``split`` is read."""

    split: LudwigSplitConfig = LudwigSplitConfig()
