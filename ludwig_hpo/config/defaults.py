"""Ludwig's ``defaults``: per feature type, sections merged under every feature of that type.
Typed, frozen; no I/O.

``defaults.<type>`` holds the sections the features of that type have: ``preprocessing``,
``encoder`` (and an image's ``augmentation``, taken whole) of the input feature model, ``decoder`` and ``loss`` of the output feature model
(:data:`~ludwig_hpo.config.features.INPUT_MODELS`, :data:`~ludwig_hpo.config.outputs.AnyOutput`).
Each section is validated by the same model as the feature's own section, read from the
feature models' fields, so a section a feature model gains is a section of its defaults too.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base, default_type
from ludwig_hpo.config.features import INPUT_MODELS, UNSUPPORTED_TYPES
from ludwig_hpo.config.outputs import AnyOutput
from ludwig_hpo.config.paths import RawMapping, deep_merge

#: The sections ``defaults`` fill, of input and of output features.
INPUT_SECTIONS = ("preprocessing", "encoder", "augmentation")
OUTPUT_SECTIONS = ("decoder", "loss", "preprocessing")


def _output_models() -> dict[str, type[BaseModel]]:
    models = typing.get_args(AnyOutput) or (AnyOutput,)
    out: dict[str, type[BaseModel]] = {}
    for m in models:
        for tag in typing.get_args(m.model_fields["type"].annotation):
            out[str(tag)] = m
    return out


#: Each output feature model, by its ``type``.
OUTPUT_MODELS = _output_models()


def _sections(kind: str) -> dict[str, tuple[str, type[BaseModel]]]:
    """Section name -> (``input_features`` / ``output_features``, the model declaring it) of a type."""
    out: dict[str, tuple[str, type[BaseModel]]] = {}
    for where, model, names in (
        ("output_features", OUTPUT_MODELS.get(kind), OUTPUT_SECTIONS),
        ("input_features", INPUT_MODELS.get(kind), INPUT_SECTIONS),
    ):
        for name in names:
            if model is not None and name in model.model_fields:
                out[name] = (where, model)  # input last: an input feature's preprocessing wins
    return out


def _defaults_model(kind: str) -> type[BaseModel]:
    """``defaults.<kind>``: each section optional, validated as the feature's own section; a
    tagged section written without ``type`` takes the feature's default type."""
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    for name, (_, model) in _sections(kind).items():
        f = model.model_fields[name]
        extra = [*f.metadata, *([Field(discriminator=f.discriminator)] if f.discriminator else [])]
        inner: Any = f.annotation
        for meta in extra:  # nested Annotated flattens: Annotated[X, *extra]
            inner = Annotated[inner, meta]
        fields[name] = (inner | None, None)
        tag = getattr(f.default, "type", None)
        if isinstance(tag, str):
            validators[f"_fill_{name}"] = field_validator(name, mode="before")(default_type(tag))
    doc = f"``defaults.{kind}``: sections applied to every {kind} feature (the feature's own values win)."
    name = f"{kind.capitalize()}Defaults"
    model = create_model(name, __base__=_Base, __doc__=doc, __validators__=validators, __module__=__name__, **fields)
    globals()[name] = model  # found by name when a config is pickled to a Ray worker
    return model


class UnsupportedDefaults(_Base):
    """``defaults`` of a feature type not trained yet: refused with one line."""

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        raise RuleError("defaults of this feature type are not supported yet", fix="remove it")


#: The feature types ``defaults`` may name.
DEFAULT_TYPES = tuple(dict.fromkeys([*INPUT_MODELS, *OUTPUT_MODELS]))

if TYPE_CHECKING:

    class DefaultsConfig(_Base):
        """Ludwig's ``defaults`` (see the module docstring)."""

        def __getattr__(self, kind: str) -> Any: ...

else:
    DefaultsConfig = create_model(
        "DefaultsConfig",
        __base__=_Base,
        __doc__="Ludwig's ``defaults``: per feature type, ``preprocessing`` / ``encoder`` (input features) "
        "and ``decoder`` / ``loss`` (output features) merged under each feature's own values.",
        **{k: (_defaults_model(k) | None, None) for k in DEFAULT_TYPES},
        **{k: (UnsupportedDefaults | None, None) for k in UNSUPPORTED_TYPES},
    )


def apply_feature_defaults(data: RawMapping) -> RawMapping:
    """``data`` (a raw sweep mapping) with ``defaults.<type>.<section>`` merged into every
    feature of that type that has the section; a feature's own values win, and a tagged
    section (an encoder, a loss) of another ``type`` than the default's keeps none of the
    default's fields (Ludwig's rule). Pure.

    Args:
        data: a raw sweep mapping whose ``defaults`` is a mapping.
    """
    defaults = data["defaults"]
    out = dict(data)
    for where, models, names in (
        ("input_features", INPUT_MODELS, INPUT_SECTIONS),
        ("output_features", OUTPUT_MODELS, OUTPUT_SECTIONS),
    ):
        feats = data.get(where)
        if not isinstance(feats, list):
            continue
        merged: list[Any] = []
        for feat in feats:
            kind = feat.get("type") if isinstance(feat, dict) else None
            d = defaults.get(kind) if isinstance(kind, str) else None
            model = models.get(kind) if isinstance(kind, str) else None
            if not isinstance(d, dict) or model is None:
                merged.append(feat)
                continue
            feat = dict(feat)
            for name in names:
                dv, fv = d.get(name), feat.get(name)
                if name not in model.model_fields or dv is None:
                    continue
                if not isinstance(dv, dict):  # image augmentation: true, false or a list, taken whole
                    feat[name] = dv if fv is None else fv
                    continue
                if isinstance(fv, dict) and "type" in fv and "type" in dv and fv["type"] != dv["type"]:
                    continue
                feat[name] = deep_merge(dv, fv) if fv is not None else dv
            merged.append(feat)
        out[where] = merged
    return out
