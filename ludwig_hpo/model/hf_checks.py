"""Checks of the Hugging Face models a sweep file names, in the driver, before any trial.

Every ``pretrained_model_name_or_path`` (a text encoder's, a vision encoder's, a text feature's
``hf_tokenizer``, and every value a sweep parameter may give such a key) is resolved
(:func:`~ludwig_hpo.data.hf_loader.resolve`): a folder or a hub id of the wrong form is one line.
A hub id not in the local cache is, for ``hpo sweep`` / ``hpo train``, asked of the hub (a few
seconds at most): unreachable is one line before any trial; for ``hpo validate``, which needs no
network, it is a note. A model that is local has its ``config.json`` checked against the
encoder section and the prepared text: the architecture keys written in the file, the
tokenizer's ids against the embedding table, the padded length against the position
embeddings. Reads JSON only: neither torch nor transformers is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ludwig_hpo.config import encoders_hf as cfgs
from ludwig_hpo.data import hf_loader
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.errors import ConfigError

#: Models whose position ids start after the padding id (RoBERTa's offset of 2).
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")


def _pretrained_name(section: Any) -> str | None:
    if section is None or getattr(section, "use_pretrained", True) is False:
        return None
    name = getattr(section, "pretrained_model_name_or_path", None) or getattr(section, "pretrained_model", None)
    return name if isinstance(name, str) and name else None


def named_models(cfg: Any) -> list[tuple[str, str]]:
    """(key path, model name) of every Hugging Face model the sweep may load: pretrained encoders
    (text and vision; a text encoder's tokenizer even without its weights), ``hf_tokenizer``
    preprocessing, and the string values of sweep parameters ending in
    ``pretrained_model_name_or_path``. Pure."""
    out: list[tuple[str, str]] = []
    for feat in cfg.input_features:
        enc = getattr(feat, "encoder", None)
        key = f"input_features[{feat.name}].encoder.pretrained_model_name_or_path"
        if isinstance(enc, cfgs.HFTextEncoder):
            out.append((key, enc.pretrained_model_name_or_path))  # its tokenizer is read either way
        elif (name := _pretrained_name(enc)) is not None:
            out.append((key, name))
        prep = getattr(feat, "preprocessing", None)
        tok = getattr(prep, "pretrained_model_name_or_path", None)
        if getattr(prep, "tokenizer", None) == "hf_tokenizer" and isinstance(tok, str) and tok:
            out.append((f"input_features[{feat.name}].preprocessing.pretrained_model_name_or_path", tok))
    hyperopt = getattr(cfg, "hyperopt", None)
    for path, space in (getattr(hyperopt, "parameters", None) or {}).items():
        if str(path).endswith("pretrained_model_name_or_path"):
            for value in _space_values(space):
                out.append((f"hyperopt.parameters.{path}", value))
    return list(dict.fromkeys(out))


def _space_values(space: Any) -> list[str]:
    values = getattr(space, "categories", None) or getattr(space, "values", None)  # choice, grid_search
    if not isinstance(values, list) and isinstance(space, Mapping):
        values = space.get("categories") or space.get("values")
    return [v for v in (values or []) if isinstance(v, str)]


def check_models_available(cfg: Any, source: str, *, network: bool) -> list[str]:
    """Resolve every model of :func:`named_models`; returns the notes ``hpo validate`` prints.

    Args:
        cfg: the validated sweep config; source: the sweep file, for the errors.
        network: True (``hpo sweep`` / ``hpo train``): a hub id not cached here must be reachable
            on the hub; False (``hpo validate``): it is a note instead. Driver.

    Raises:
        ConfigError: a name that is neither a folder nor a hub id, a folder without
            ``config.json``, or (``network``) a hub id that can be neither found locally nor
            downloaded.
    """
    notes: list[str] = []
    asked: dict[str, str | None] = {}
    for key, name in named_models(cfg):
        try:
            resolved = hf_loader.resolve(name)
        except hf_loader.HFModelError as e:
            raise ConfigError(str(e), source=source, key=key, fix=e.fix) from e
        if resolved.local:
            continue
        if not network:
            notes.append(
                f"note: {key}: {name!r} is a hub id (its form is valid) not in the local Hugging Face cache; "
                "its config and tokenizer were not checked offline"
            )
            continue
        if name not in asked:
            asked[name] = hf_loader.hub_reachable(name)
        if asked[name] is not None:
            missing = hf_loader.not_found_message(name, str(asked[name]))
            raise ConfigError(str(missing), source=source, key=key, fix=missing.fix)
    return notes


def pretrained_mismatches(cfg: cfgs.HFTextEncoder, config: Mapping[str, Any]) -> list[str]:
    """One line per architecture key written in the file that pretrained weights cannot honour:
    a non-float key whose value is not the pretrained config's (a float key, a dropout or an
    epsilon, overrides it). Pure."""
    out = []
    for k, v in cfg.architecture_overrides().items():
        if isinstance(v, float) or k not in config or config[k] == v:
            continue
        out.append(
            f"encoder {k} is {v!r} but the pretrained model {cfg.pretrained_model_name_or_path!r} has {config[k]!r}: "
            f"remove {k}, or set use_pretrained: false to build a new model"
        )
    return out


def encoder_problems(enc: cfgs.HFTextEncoder, config: Mapping[str, Any], vocab_size: int, length: int) -> list[str]:
    """What keeps a pretrained text encoder from reading the prepared text, one line each:
    :func:`pretrained_mismatches`, a tokenizer with more ids than the pretrained embedding table
    (the aliases do not resize it; ``auto_transformer`` does), rows longer than the position
    embeddings. ``config`` is the model's ``config.json``. Pure."""
    if not enc.use_pretrained and enc.model_type is not None:
        return []  # a new model of the alias's own architecture, sized for this tokenizer
    out = pretrained_mismatches(enc, config) if enc.use_pretrained else []
    table = config.get("vocab_size")
    if not isinstance(enc, cfgs.AutoTransformerEncoder) and isinstance(table, int) and vocab_size > table:
        out.append(
            f"the tokenizer has {vocab_size} ids but the model's embedding table holds {table}: "
            "use the tokenizer saved with this model"
        )
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int):
        usable = positions - 2 if config.get("model_type") in _OFFSET_POSITIONS else positions
        read = min(length, enc.max_sequence_length or length)
        if read > usable:
            out.append(
                f"rows of {read} tokens are longer than the model's {usable} positions: "
                f"set preprocessing.max_sequence_length (or encoder max_sequence_length) to at most {usable}"
            )
    return out


def check_text_encoders(features: Iterable[Any], meta: Mapping[str, FeatureMeta], source: str) -> None:
    """:func:`encoder_problems` of every pretrained text encoder whose model is local (a hub id
    not cached is checked by the trial that downloads it). Driver.

    Raises:
        ConfigError: the first problem, at the feature's encoder key.
    """
    for feat in features:
        enc = getattr(feat, "encoder", None)
        if not isinstance(enc, cfgs.HFTextEncoder) or feat.name not in meta:
            continue
        try:
            resolved = hf_loader.resolve(enc.pretrained_model_name_or_path)
            config = hf_loader.read_config_dict(resolved)
        except hf_loader.HFModelError as e:
            raise ConfigError(
                str(e),
                source=source,
                key=f"input_features[{feat.name}].encoder.pretrained_model_name_or_path",
                fix=e.fix,
            ) from e
        if config is None:
            continue
        m = meta[feat.name]
        problems = encoder_problems(enc, config, len(m.vocab), int(m.shape[0]) if m.shape else 0)
        if problems:
            message, _, fix = problems[0].partition(": ")
            raise ConfigError(message, source=source, key=f"input_features[{feat.name}].encoder", fix=fix or None)


def offline_view(cfg: Any) -> tuple[Any, list[str]]:
    """``cfg`` without the text inputs whose Hugging Face tokenizer is a hub id not in the local
    cache (``hpo validate`` reads no network, so it cannot tokenise them), and a note for each.
    Names of the wrong form are left in: the data step reports them. Driver.

    Returns:
        (the config to prepare the data with, the notes); ``cfg`` itself when nothing is left out.
    """
    kept, notes = [], []
    for feat in cfg.input_features:
        name = _tokenizer_name(feat)
        if name is not None and _is_remote(name):
            notes.append(
                f"note: input feature {feat.name!r} was not preprocessed: its tokenizer {name!r} is a hub id "
                "not in the local Hugging Face cache (not checked offline; hpo sweep downloads it)"
            )
            continue
        kept.append(feat)
    if not notes:
        return cfg, []
    return cfg.model_copy(update={"input_features": kept}), notes


def _tokenizer_name(feat: Any) -> str | None:
    enc = getattr(feat, "encoder", None)
    if isinstance(enc, cfgs.HFTextEncoder):
        return enc.pretrained_model_name_or_path
    prep = getattr(feat, "preprocessing", None)
    name = getattr(prep, "pretrained_model_name_or_path", None)
    return name if getattr(prep, "tokenizer", None) == "hf_tokenizer" and isinstance(name, str) else None


def _is_remote(name: str) -> bool:
    try:
        return not hf_loader.resolve(name).local
    except hf_loader.HFModelError:
        return False
