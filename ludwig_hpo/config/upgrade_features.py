"""The feature-level half of Ludwig's legacy-config upgrades (:mod:`ludwig_hpo.config.upgrade`):
``numerical``, ``bias``, encoder / decoder options written at the feature level, ``fc_size``,
Ludwig 0.4's sequence preprocessing names, old missing-value strategies and scalar class
weights; and the upgrade's record of warnings and moved keys. Pure: no I/O.
"""

from __future__ import annotations

import copy
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ludwig_hpo.config.base import KeyPath

#: Keys Ludwig's feature schemas hold at the feature level; any other key written there is an
#: encoder option (input features) or a decoder option (output features), moved as Ludwig does.
LUDWIG_INPUT_KEYS = frozenset(
    {"name", "type", "column", "proc_column", "tied", "preprocessing", "encoder", "active", "augmentation"}
)
LUDWIG_OUTPUT_KEYS = frozenset(
    {
        "name",
        "type",
        "column",
        "proc_column",
        "decoder",
        "loss",
        "preprocessing",
        "reduce_input",
        "reduce_dependencies",
        "dependencies",
        "input_size",
        "num_classes",
        "top_k",
        "calibration",
        "threshold",
        "clip",
        "default_validation_metric",
    }
)
#: Decoder options that Ludwig names ``fc_<key>`` once nested; the last three also keep their
#: own name (they set the output projection as well as the fully connected stack).
FC_KEYS = ("fc_layers", "output_size", "norm", "norm_params", "activation", "dropout")
_FC_AND_OWN_KEYS = ("use_bias", "weights_initializer", "bias_initializer")
#: Feature types whose preprocessing Ludwig 0.4 renamed (``word_tokenizer`` -> ``tokenizer``).
SEQUENCE_TYPES = ("sequence", "text", "audio", "timeseries")
_SEQUENCE_RENAMES = {
    "sequence_length_limit": "max_sequence_length",
    "word_most_common": "most_common",
    "word_sequence_length_limit": "max_sequence_length",
    "word_tokenizer": "tokenizer",
    "word_vocab_file": "vocab_file",
    "char_most_common": "most_common",
    "char_sequence_length_limit": "max_sequence_length",
    "char_tokenizer": "tokenizer",
    "char_vocab_file": "vocab_file",
}
_BIAS_RENAMES = {"bias": "use_bias", "conv_bias": "conv_use_bias", "default_bias": "default_use_bias"}
_MISSING_STRATEGIES = {"backfill": "bfill", "pad": "ffill"}
#: Ludwig's TensorFlow-era initializer names and the torch names of the same distributions.
_OLD_INITIALIZERS = {
    "glorot_uniform": "xavier_uniform",
    "glorot_normal": "xavier_normal",
    "he_uniform": "kaiming_uniform",
    "he_normal": "kaiming_normal",
}
#: Preprocessing options Ludwig 0.2 read at the feature level (now under ``preprocessing:``).
PREPROCESSING_KEYS = frozenset({"missing_value_strategy", "fill_value", "computed_fill_value", "normalization"})
#: Ludwig 0.4's per-layer regularizers; current Ludwig has trainer.regularization_type / _lambda.
_OLD_REGULARIZERS = ("weight_regularization", "bias_regularization", "activity_regularization")
#: Encoder options renamed since, per (feature type, encoder type): ``{(feature, encoder): {old: new}}``.
_ENCODER_RENAMES = {("vector", "dense"): {"layers": "fc_layers"}, ("h3", "rnn"): {"state_size": "hidden_size"}}


@dataclass
class UpgradeState:
    """The upgrade in progress: warnings as ``(old key path, line)``, and ``(old, new)`` key
    paths of every moved key, in the order applied."""

    notes: list[tuple[KeyPath, str]] = field(default_factory=list)
    moves: list[tuple[KeyPath, KeyPath]] = field(default_factory=list)

    def note(self, at: KeyPath, line: str) -> None:
        """One warning line about the key written at ``at`` (a raw key path of the file)."""
        self.notes.append((at, line))

    def move(self, old: KeyPath, new: KeyPath) -> None:
        """The key written at ``old`` now lives at ``new`` (errors there point at ``old``)."""
        self.moves.append((old, new))


def dotted(path: KeyPath) -> str:
    """``path`` as a warning shows it: ``input_features[0].encoder``."""
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


def rename(d: dict[str, Any], old: str, new: str, at: KeyPath, st: UpgradeState, why: str = "") -> None:
    """``d[old]`` moved to ``d[new]``; when both are written the new one is kept (Ludwig's rule)."""
    if old not in d:
        return
    value = d.pop(old)
    where_old, where_new = dotted((*at, old)), dotted((*at, new))
    if new in d:
        st.note((*at, old), f"{where_old}: is Ludwig's old name for {where_new}:, which is also set; {old} is ignored")
        return
    d[new] = value
    st.move((*at, old), (*at, new))
    st.note((*at, old), f"{where_old}: is Ludwig's old name for {where_new}:{why}; read as {where_new}:")


def _model_fields(tp: Any) -> set[str]:
    """Every field name of a pydantic model, or of each model of a (tagged) union of them."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return set(tp.model_fields)
    return {f for arg in typing.get_args(tp) for f in _model_fields(arg)}


def feature_keys(section: str) -> frozenset[str]:
    """Keys that stay at the feature level: Ludwig's, and those this schema reads there."""
    from ludwig_hpo.config.features import InputFeature
    from ludwig_hpo.config.outputs import OutputFeature

    if section == "input_features":
        return LUDWIG_INPUT_KEYS | _model_fields(InputFeature)
    return LUDWIG_OUTPUT_KEYS | _model_fields(OutputFeature)


# ---------------------------------------------------------------------------- features
def upgrade_fc_size(block: dict[str, Any], at: KeyPath, st: UpgradeState, new_size: str = "output_size") -> None:
    """``fc_size`` -> ``output_size`` in a section and in each entry of its ``fc_layers``."""
    rename(block, "fc_size", new_size, at, st)
    layers = block.get("fc_layers")
    if isinstance(layers, list):
        for i, layer in enumerate(layers):
            if isinstance(layer, dict):
                rename(layer, "fc_size", "output_size", (*at, "fc_layers", i), st)


def upgrade_sequence_preprocessing(prep: Any, at: KeyPath, st: UpgradeState) -> None:
    """Ludwig 0.4's ``word_*`` / ``char_*`` / ``sequence_length_limit`` names in a sequence-type
    ``preprocessing`` section (``prep``, at ``at``), renamed in place."""
    if isinstance(prep, dict):
        for old, new in _SEQUENCE_RENAMES.items():
            rename(prep, old, new, at, st)


def upgrade_missing_strategy(prep: Any, at: KeyPath, st: UpgradeState) -> None:
    """``missing_value_strategy: backfill`` / ``pad`` -> ``bfill`` / ``ffill`` in place."""
    if isinstance(prep, dict) and prep.get("missing_value_strategy") in _MISSING_STRATEGIES:
        old = prep["missing_value_strategy"]
        prep["missing_value_strategy"] = _MISSING_STRATEGIES[old]
        st.note(
            (*at, "missing_value_strategy"),
            f"{dotted((*at, 'missing_value_strategy'))}: {old} is Ludwig's old name for "
            f"{_MISSING_STRATEGIES[old]}; read as {_MISSING_STRATEGIES[old]}",
        )


def upgrade_initializers(node: Any, at: KeyPath, st: UpgradeState) -> None:
    """TensorFlow-era initializer names (``glorot_uniform``, ...) -> Ludwig's torch names, in
    every ``*initializer`` key under ``node`` (a name or a ``{type: name}`` mapping), in place."""
    if isinstance(node, list):
        for i, v in enumerate(node):
            upgrade_initializers(v, (*at, i), st)
    if not isinstance(node, dict):
        return
    for k, v in node.items():
        if not (isinstance(k, str) and k.endswith("initializer")):
            upgrade_initializers(v, (*at, k), st)
            continue
        holder, key, where = (v, "type", (*at, k, "type")) if isinstance(v, dict) else (node, k, (*at, k))
        old = holder.get(key)
        if isinstance(old, str) and old in _OLD_INITIALIZERS:
            holder[key] = new = _OLD_INITIALIZERS[old]
            st.note(where, f"{dotted(where)}: {old} is Ludwig's old (TensorFlow) name for {new}; read as {new}")


def upgrade_regularizers(node: Any, at: KeyPath, st: UpgradeState) -> None:
    """Ludwig 0.4's per-layer ``weight_regularization`` (and bias / activity) written ``null``
    in ``node`` (a feature, encoder, decoder or combiner): removed, as it regularizes nothing. A
    value is left for validation to refuse (trainer.regularization_type is the current key)."""
    if isinstance(node, dict):
        for k in _OLD_REGULARIZERS:
            if k in node and node[k] is None:
                del node[k]
                st.note((*at, k), f"{dotted((*at, k))}: null is Ludwig 0.4's per-layer regularizer, off; removed")


def _category_representation(enc: dict[str, Any], at: KeyPath, st: UpgradeState) -> None:
    """A category encoder's ``representation: dense | sparse`` (Ludwig 0.3) -> encoder type
    ``dense`` / ``sparse`` (a fixed one-hot embedding), as Ludwig split it."""
    rep = enc.get("representation")
    if rep not in ("dense", "sparse") or enc.get("type", "dense") != "dense":
        return
    del enc["representation"]
    enc["type"] = rep
    st.move((*at, "representation"), (*at, "type"))
    st.note(
        (*at, "representation"),
        f"{dotted((*at, 'representation'))}: {rep} is Ludwig's old form of {dotted(at)}.type: {rep}; read as type: {rep}",
    )


def _bias_keys(node: Any, at: KeyPath, st: UpgradeState) -> None:
    if isinstance(node, dict):
        for k in list(node):
            _bias_keys(node[k], (*at, k), st)
        for old, new in _BIAS_RENAMES.items():
            rename(node, old, new, at, st)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _bias_keys(v, (*at, i), st)


def _nest_module(feat: dict[str, Any], at: KeyPath, section: str, st: UpgradeState) -> None:
    """Feature-level encoder (decoder) options into ``encoder:`` (``decoder:``), Ludwig 0.6's move."""
    module = "encoder" if section == "input_features" else "decoder"
    if isinstance(feat.get(module), str):
        kind = feat[module]
        feat[module] = {"type": kind}
        st.move((*at, module), (*at, module, "type"))
        st.note((*at, module), f"{dotted((*at, module))}: {kind} is Ludwig's old form of {module}: {{type: {kind}}}")
    keep = feature_keys(section)
    prep_keys = [k for k in feat if k in PREPROCESSING_KEYS and k not in keep]
    if prep_keys:
        prep = feat.get("preprocessing")
        prep = prep if isinstance(prep, dict) else {}
        for k in prep_keys:
            value = feat.pop(k)
            if k not in prep:
                prep[k] = value
                st.move((*at, k), (*at, "preprocessing", k))
        feat["preprocessing"] = prep
        st.note(
            (*at, prep_keys[0]),
            f"{dotted(at)}: {', '.join(prep_keys)}: written at the feature level, which is Ludwig's old form of "
            "preprocessing options; read under preprocessing:",
        )
    loose = [k for k in feat if isinstance(k, str) and k not in keep]
    if not loose:
        return
    given = feat.get(module)
    block: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    shown = []
    for k in loose:
        value = feat.pop(k)
        names = [k]
        if module == "decoder" and k in FC_KEYS:
            names = [f"fc_{k}" if k != "fc_layers" else k]
        elif module == "decoder" and k in _FC_AND_OWN_KEYS:
            names = [k, f"fc_{k}"]
        elif module == "decoder" and k == "fc_size":
            names = ["fc_output_size"]
        elif module == "encoder" and k == "fc_size":
            names = ["output_size"]
        for name in names:
            if name not in block:
                block[name] = copy.deepcopy(value)
                st.move((*at, k), (*at, module, name))
        shown.append(f"{k} -> {module}.{' and '.join(names)}" if names != [k] else k)
    feat[module] = block
    st.note(
        (*at, loose[0]),
        f"{dotted(at)}: {', '.join(shown)}: written at the feature level, which is Ludwig's old form of "
        f"{module} options; read under {module}:",
    )


def upgrade_feature(feat: dict[str, Any], at: KeyPath, section: str, st: UpgradeState) -> None:
    """Every feature-level upgrade of one feature of ``section`` (``input_features`` or
    ``output_features``), in Ludwig's order, in place; ``at`` is the feature's key path."""
    if feat.get("type") == "numerical":
        feat["type"] = "number"
        st.note((*at, "type"), f"{dotted((*at, 'type'))}: numerical is Ludwig's old name for number; read as number")
    _bias_keys(feat, at, st)
    if feat.get("type") in SEQUENCE_TYPES:
        upgrade_sequence_preprocessing(feat.get("preprocessing"), (*at, "preprocessing"), st)
    _nest_module(feat, at, section, st)
    module = "encoder" if section == "input_features" else "decoder"
    if isinstance(feat.get(module), dict):
        upgrade_fc_size(feat[module], (*at, module), st, "output_size" if module == "encoder" else "fc_output_size")
        upgrade_regularizers(feat[module], (*at, module), st)
        if module == "encoder" and feat.get("type") == "category":
            _category_representation(feat[module], (*at, module), st)
        if module == "encoder":
            for old, new in _ENCODER_RENAMES.get((str(feat.get("type")), str(feat[module].get("type"))), {}).items():
                rename(feat[module], old, new, (*at, module), st)
    upgrade_initializers(feat, at, st)
    upgrade_missing_strategy(feat.get("preprocessing"), (*at, "preprocessing"), st)
    loss = feat.get("loss")
    if isinstance(loss, dict) and "class_weights" in loss and not isinstance(loss["class_weights"], (list, dict)):
        value = loss.pop("class_weights")
        st.note(
            (*at, "loss", "class_weights"),
            f"{dotted((*at, 'loss', 'class_weights'))}: {value!r} is Ludwig's old spelling of no class weights; "
            "removed (every class weighs 1)",
        )
