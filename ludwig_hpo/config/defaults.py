"""Ludwig's ``defaults``: per feature type, sections merged under every feature of that type.
Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, field_validator

from ludwig_hpo.config.base import _Base, default_type
from ludwig_hpo.config.encoders import DenseEncoder, EmbedEncoder, PassthroughEncoder, StackedCNNEncoder
from ludwig_hpo.config.outputs import Decoder
from ludwig_hpo.config.paths import RawMapping, deep_merge
from ludwig_hpo.config.preprocessing import ImagePreprocessing, NumberPreprocessing


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
