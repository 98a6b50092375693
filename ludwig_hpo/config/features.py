"""Input features of the sweep file, one model per feature type, and their tagged union.
Typed and frozen (pydantic); no I/O.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator

from ludwig_hpo.config.base import default_type
from ludwig_hpo.config.encoders import DenseEncoder, EmbedEncoder, PassthroughEncoder, StackedCNNEncoder
from ludwig_hpo.config.feature_base import _Feature
from ludwig_hpo.config.preprocessing import ImagePreprocessing, NumberPreprocessing


class NumberInputFeature(_Feature):
    """A numeric column, fed as (batch, 1) floats after ``preprocessing``."""

    type: Literal["number"]
    encoder: Annotated[Union[PassthroughEncoder, DenseEncoder], Field(discriminator="type")] = PassthroughEncoder()
    preprocessing: NumberPreprocessing = NumberPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("passthrough"))


class BinaryInputFeature(_Feature):
    """A column of two distinct values, fed as (batch, 1) floats of 0 and 1."""

    type: Literal["binary"]
    encoder: PassthroughEncoder = PassthroughEncoder()


class CategoryInputFeature(_Feature):
    """A column of classes, fed as (batch,) ids (0 for a class unseen in the training split)."""

    type: Literal["category"]
    encoder: EmbedEncoder = EmbedEncoder()
    _fill = field_validator("encoder", mode="before")(default_type("dense"))


class ImageInputFeature(_Feature):
    """A column of image files or arrays, fed as (batch, height, width) floats after ``preprocessing``."""

    type: Literal["image"]
    encoder: StackedCNNEncoder = StackedCNNEncoder()
    preprocessing: ImagePreprocessing = ImagePreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("stacked_cnn"))


InputFeature = Annotated[
    Union[NumberInputFeature, BinaryInputFeature, CategoryInputFeature, ImageInputFeature],
    Field(discriminator="type"),
]
