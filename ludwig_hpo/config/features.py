"""Features of the sweep file: input and output features, their encoders, preprocessing and
decoder, and Ludwig's ``defaults`` (per feature type) merged into them. Typed and frozen
(pydantic); no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base, default_type
from ludwig_hpo.config.paths import RawMapping, deep_merge
from ludwig_hpo.tracking.names import MAX_KEY_LENGTH, mlflow_key

#: Names a feature may not take: top-level keys (a parameter path starts with a section or a
#: feature name) and ``combined``, the objective's name for all outputs together.
RESERVED_NAMES = frozenset(
    {
        "trainer",
        "combiner",
        "backend",
        "hyperopt",
        "dataset",
        "defaults",
        "kfold",
        "tracking",
        "report",
        "input_features",
        "output_features",
        "combined",
        "name",
        "output_dir",
    }
)


# ---------------------------------------------------------------------------- encoders
class PassthroughEncoder(_Base):
    """Feeds the (batch, 1) value to the combiner unchanged."""

    type: Literal["passthrough"] = "passthrough"


class DenseEncoder(_Base):
    """``num_layers`` fully connected layers of ``output_size`` units: (batch, 1) -> (batch, output_size)."""

    type: Literal["dense"] = "dense"
    num_layers: int = Field(default=1, ge=1, le=8)
    output_size: int = Field(default=16, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)


class EmbedEncoder(_Base):
    """Learned embedding of each category: (batch,) ids -> (batch, embedding_size)."""

    type: Literal["dense"] = "dense"
    embedding_size: int = Field(default=16, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)


class StackedCNNEncoder(_Base):
    """``num_layers`` conv blocks (conv 3x3 -> ReLU -> max-pool when the map is >= 4 px) then a
    fully connected layer: (batch, height, width) -> (batch, output_size)."""

    type: Literal["stacked_cnn"] = "stacked_cnn"
    num_layers: int = Field(default=2, ge=1, le=6)
    channels: int = Field(default=16, ge=1, le=1024)
    kernel_size: int = Field(default=3, ge=1, le=7)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    output_size: int = Field(default=64, ge=1, le=4096)


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


#: The longest MLflow key of a feature's name: room is left for the split, the metric and the
#: parameter fields around it (``best.<name>.encoder.embedding_size``, ``validation/<name>/roc_auc``).
MAX_FEATURE_KEY_LENGTH = MAX_KEY_LENGTH - 50


def _renamed(name: str) -> str:
    """A name suggestion for a feature whose name cannot stay: letters, digits and ``_``."""
    return re.sub(r"\W+", "_", name).strip("_") or "feature"


class _Feature(_Base):
    name: str = Field(min_length=1)
    column: str | None = None

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if v in RESERVED_NAMES:
            raise ValueError(f"feature name {v!r} is reserved (it names a config section); rename the feature")
        head = v.split(".", 1)[0]
        if "." in v and head in RESERVED_NAMES:
            raise RuleError(
                f"feature name {v!r} starts with {head + '.'!r}, which parameter paths read as the {head} section",
                fix=f"rename the feature and keep its column, e.g. {{name: {_renamed(v)}, column: {v!r}}}",
            )
        if len(mlflow_key(v)) > MAX_FEATURE_KEY_LENGTH:
            raise RuleError(
                f"feature name {v[:40]!r}... is {len(mlflow_key(v))} characters as an MLflow key; its metric and "
                f"parameter keys (at most {MAX_KEY_LENGTH} characters) need it at most {MAX_FEATURE_KEY_LENGTH}",
                fix=f"give the feature a shorter name and keep its column, e.g. {{name: {_renamed(v[:20])}, "
                "column: <the column's name>}",
            )
        return v

    @property
    def source_column(self) -> str:
        """The dataset column read for this feature (``column``, else ``name``)."""
        return self.column or self.name


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


class Decoder(_Base):
    """Fully connected layers between the combiner and the output projection."""

    num_fc_layers: int = Field(default=0, ge=0, le=8)
    output_size: int = Field(default=32, ge=1, le=4096)
    dropout: float = Field(default=0.0, ge=0, lt=1)


class OutputFeature(_Feature):
    """A prediction target: ``category`` (cross-entropy), ``binary`` (BCE) or ``number`` (MSE)."""

    type: Literal["category", "binary", "number"]
    decoder: Decoder = Decoder()
    loss_weight: float = Field(default=1.0, gt=0)


# ---------------------------------------------------------------------------- defaults
class NumberDefaults(_Base):
    """``defaults.number``: sections applied to every number feature (feature values win)."""

    preprocessing: NumberPreprocessing | None = None
    encoder: Annotated[Union[PassthroughEncoder, DenseEncoder], Field(discriminator="type")] | None = None
    decoder: Decoder | None = None
    _fill = field_validator("encoder", mode="before")(default_type("passthrough"))


class BinaryDefaults(_Base):
    """``defaults.binary``: sections applied to every binary feature (feature values win)."""

    encoder: PassthroughEncoder | None = None
    decoder: Decoder | None = None


class CategoryDefaults(_Base):
    """``defaults.category``: sections applied to every category feature (feature values win)."""

    encoder: EmbedEncoder | None = None
    decoder: Decoder | None = None
    _fill = field_validator("encoder", mode="before")(default_type("dense"))


class ImageDefaults(_Base):
    """``defaults.image``: sections applied to every image feature (feature values win)."""

    preprocessing: ImagePreprocessing | None = None
    encoder: StackedCNNEncoder | None = None
    _fill = field_validator("encoder", mode="before")(default_type("stacked_cnn"))


class DefaultsConfig(_Base):
    """Ludwig's ``defaults``: per feature type, ``preprocessing`` / ``encoder`` (input
    features) and ``decoder`` (output features) merged under each feature's own values."""

    number: NumberDefaults | None = None
    binary: BinaryDefaults | None = None
    category: CategoryDefaults | None = None
    image: ImageDefaults | None = None


#: Feature sections that ``defaults`` fill, for input and output features.
_DEFAULT_SECTIONS = {"input_features": ("preprocessing", "encoder"), "output_features": ("decoder",)}


def apply_feature_defaults(data: RawMapping) -> RawMapping:
    """``data`` (a raw sweep mapping) with ``defaults.<type>.<section>`` merged into every
    feature of that type; a feature's own values win, and an encoder of another ``type``
    than the default's keeps none of the default's fields (Ludwig's rule). Pure.

    Args:
        data: a raw sweep mapping whose ``defaults`` is a mapping.
    """
    defaults = data["defaults"]
    out = dict(data)
    for section, names in _DEFAULT_SECTIONS.items():
        feats = data.get(section)
        if not isinstance(feats, list):
            continue
        merged: list[Any] = []
        for feat in feats:
            d = defaults.get(feat.get("type")) if isinstance(feat, dict) else None
            if not isinstance(d, dict):
                merged.append(feat)
                continue
            feat = dict(feat)
            for name in names:
                dv, fv = d.get(name), feat.get(name)
                if not isinstance(dv, dict):
                    continue
                if isinstance(fv, dict) and "type" in fv and "type" in dv and fv["type"] != dv["type"]:
                    continue
                feat[name] = deep_merge(dv, fv) if fv is not None else dv
            merged.append(feat)
        out[section] = merged
    return out
