"""Checks of a ``model_type: llm`` config against its base model, in the driver, before any
trial: ``hpo validate`` (offline) and the sweep's model checks (:mod:`ludwig_hpo.model.checks`).

``base_model`` is resolved offline first (:func:`~ludwig_hpo.data.hf_loader.resolve`): a name
of the wrong form, or a folder without ``config.json``, is one line. A hub id not in the local
Hugging Face cache is, for ``hpo sweep`` / ``hpo train``, asked of the hub (unreachable: one
line saying the hub needs a network); for ``hpo validate`` it is a note saying what was not
checked offline, unless ``HF_HUB_OFFLINE`` forbids the download ``hpo sweep`` would need (one
line then, as the sweep would print). A local model (a folder, or cached) is built on the meta device (no weights
read, nothing allocated) and the config's adapter is injected into it with peft, so every
adapter key is checked by peft itself: ``target_modules`` not in the model is one line listing
the modules it has. A length written in the file longer than the model's context is a note
(rows are cut to the context, as Ludwig cuts them). torch, transformers and peft are imported inside the functions only.
"""

from __future__ import annotations

import warnings
from typing import Any

from ludwig_hpo.data import hf_loader
from ludwig_hpo.errors import ConfigError

#: Where a base-model error points.
BASE_KEY = "base_model"
TARGET_KEY = "adapter.target_modules"


def check_base_model(cfg: Any, source: str, *, network: bool) -> list[str]:
    """Resolve ``cfg.base_model`` and, when it is local, check the adapter and the written
    lengths against it. Driver.

    Args:
        cfg: a validated ``model_type: llm`` config (anything else: nothing to check).
        source: the sweep file, for the errors.
        network: True (``hpo sweep`` / ``hpo train``): a hub id not cached here must be
            reachable on the hub; False (``hpo validate``): it is a note instead, unless
            ``HF_HUB_OFFLINE`` is set (the sweep could never download it: an error).

    Returns:
        the notes ``hpo validate`` prints (what was not checked offline).

    Raises:
        ConfigError: naming ``source``, the key and the fix: a base model that is neither a
            folder nor a hub id, not found, not a causal LM transformers knows; an adapter peft
            refuses for it (``target_modules`` not in the model lists those it has).
    """
    if not getattr(cfg, "is_llm", False):
        return []
    name = cfg.base_model
    try:
        resolved = hf_loader.resolve(name)
    except hf_loader.HFModelError as e:
        raise ConfigError(str(e), source=source, key=BASE_KEY, fix=e.fix) from e
    if not resolved.local:
        if not network and not hf_loader.offline():
            return [
                f"note: base_model: {name!r} is a hub id (its form is valid) not in the local Hugging Face cache; "
                "its tokenizer, adapter target_modules and context length were not checked offline "
                "(hpo sweep downloads it)"
            ]
        reason = hf_loader.hub_reachable(name)
        if reason is not None:
            missing = hf_loader.not_found_message(name, reason)
            raise ConfigError(str(missing), source=source, key=BASE_KEY, fix=missing.fix)
        return []
    try:
        config = hf_loader.read_config_dict(resolved)
    except hf_loader.HFModelError as e:
        raise ConfigError(str(e), source=source, key=BASE_KEY, fix=e.fix) from e
    notes = length_notes(cfg, config or {})
    model = meta_model(str(resolved.path) if resolved.path is not None else resolved.source, source)
    if cfg.adapter is not None:
        check_adapter(model, cfg.adapter, source)
    return notes


def meta_model(folder: str, source: str) -> Any:
    """The causal LM of the local model ``folder``, built on the meta device from its config
    (no weight is read or allocated). Driver.

    Raises:
        ConfigError: at ``base_model``: the folder's config is not a causal LM transformers knows.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config)
    except (ValueError, KeyError, OSError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(
            f"base_model {folder!r} is not a causal language model transformers can build: {first}",
            source=source,
            key=BASE_KEY,
            fix="point base_model at a causal LM (e.g. a Llama, GPT-2 or OPT model saved with save_pretrained)",
        ) from None


def module_names(model: Any) -> list[str]:
    """The last names of the layers of ``model`` an adapter can target (Linear, Embedding,
    GPT-2's Conv1D), sorted. Pure."""
    from torch import nn

    kinds: tuple[type, ...] = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d)
    try:
        from transformers.pytorch_utils import Conv1D

        kinds = (*kinds, Conv1D)
    except ImportError:  # transformers without GPT-2's Conv1D: only torch's layers
        pass
    return sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if n and isinstance(m, kinds)})


def _matches(key: str, names: list[str]) -> bool:
    # peft's rule for a list entry: the module's full name is the key or ends with "." + key
    return any(n == key or n.endswith(f".{key}") for n in names)


def check_adapter(model: Any, adapter: Any, source: str) -> None:
    """``adapter`` fits ``model`` (a meta-device causal LM): every listed ``target_modules``
    entry names one of its modules (peft itself only needs one of them to), and peft builds
    the adapter into it (so peft's own rules on every adapter key, and its default target
    modules for the architecture when ``target_modules`` is null, are checked). Driver.

    Raises:
        ConfigError: at ``adapter.target_modules`` (listing the modules the model has) or
            ``adapter`` (peft's message).
    """
    import peft

    names = [n for n, _ in model.named_modules() if n]
    have = ", ".join(module_names(model))
    targets = adapter.target_modules
    if isinstance(targets, list):
        missing = [t for t in targets if not _matches(t, names)]
        if missing:
            raise ConfigError(
                f"{missing} {'is' if len(missing) == 1 else 'are'} not a module of the base model",
                source=source,
                key=TARGET_KEY,
                fix=f"name some of the modules it has: {have}",
            )
    cls = getattr(peft, adapter.peft_class_name, None)
    if cls is None:
        raise ConfigError(
            f"adapter type {adapter.type!r} needs peft's {adapter.peft_class_name}, which peft {peft.__version__} lacks",
            source=source,
            key="adapter.type",
            fix="use adapter type lora, or install a peft that has it",
        )
    try:
        with warnings.catch_warnings():  # transformers' deprecation notes on peft's calls are not the user's
            warnings.simplefilter("ignore", FutureWarning)
            kwargs = adapter.peft_kwargs()
            if kwargs.get("init_lora_weights") not in (None, True, False, "gaussian"):
                # pissa / olora / orthogonal decompose the base weights, which a meta model lacks;
                # the modules targeted do not depend on the initialization
                kwargs["init_lora_weights"] = True
            peft.get_peft_model(model, cls(**kwargs))
    except (ValueError, TypeError, KeyError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        key = (
            "adapter.feedforward_modules"
            if "feedforward" in first
            else TARGET_KEY
            if "target" in first.lower()
            else "adapter"
        )
        names_fix = f"set adapter.target_modules to some of the modules it has: {have}"
        if isinstance(adapter.target_modules, str):  # peft full-matches a string against each module's dotted name
            names_fix = (
                "a string is one regular expression matched against whole dotted module names "
                f"(e.g. '.*\\.{module_names(model)[-1]}'); to name modules write a list, e.g. [{', '.join(module_names(model)[-2:])}]"
            )
        fix = names_fix if key == TARGET_KEY else "change the adapter's keys as the message says"
        raise ConfigError(
            f"peft cannot build the {adapter.type} adapter: {first}", source=source, key=key, fix=fix
        ) from None


def length_notes(cfg: Any, config: dict[str, Any]) -> list[str]:
    """What the lengths written in the file become against the model's context length:
    ``preprocessing.global_max_sequence_length``, or the input's plus the output's
    ``max_sequence_length`` (a row is prompt + target + EOS), longer than the context is one
    note each, since every row is cut to the context (Ludwig's rule: its
    ``global_max_sequence_length`` is at most the model's context length, whatever is written).
    Pure; driver.

    Returns:
        the note lines (none when the lengths fit or the context length is unknown).
    """
    context = hf_loader.context_length(config)
    if context is None:
        return []
    glob = getattr(getattr(cfg, "preprocessing", None), "global_max_sequence_length", None)
    if glob is not None and glob > context:
        return [
            f"note: preprocessing.global_max_sequence_length {glob} is longer than base_model's context of "
            f"{context} tokens: rows are cut to {context} (as Ludwig does)"
        ]
    feat, out = cfg.input_features[0], cfg.output_features[0]
    prompt, target = feat.preprocessing.max_sequence_length, out.preprocessing.max_sequence_length
    if glob is None and prompt is not None and target is not None and prompt + target + 1 > context:
        return [
            f"note: a row of max_sequence_length {prompt} (prompt) + {target} (target) + EOS is longer than "
            f"base_model's context of {context} tokens: rows are cut to {context}, the end of each "
            "row first (as Ludwig does)"
        ]
    return []


def check_base_model_reachable(cfg: Any, source: str) -> None:
    """``hpo sweep`` / ``hpo train`` before the rows are read: ``cfg.base_model`` is a folder
    holding ``config.json``, in the local Hugging Face cache, or a hub id the hub serves now, so
    a model that cannot be had is the sweep file's line at ``base_model`` rather than the
    dataset's (its tokenizer prepares the rows). Nothing for an ecd config. Driver; may ask the
    hub (at most :data:`~ludwig_hpo.data.hf_loader.HUB_TIMEOUT_S` seconds).

    Raises:
        ConfigError: at ``base_model`` of ``source``: a name of neither form, a folder without
            ``config.json``, a hub id not cached that the hub cannot serve (``HF_HUB_OFFLINE``,
            no network, no such model).
    """
    if not getattr(cfg, "is_llm", False):
        return
    try:
        resolved = hf_loader.resolve(cfg.base_model)
    except hf_loader.HFModelError as e:
        raise ConfigError(str(e), source=source, key=BASE_KEY, fix=e.fix) from e
    if not resolved.local and (reason := hf_loader.hub_reachable(cfg.base_model)) is not None:
        missing = hf_loader.not_found_message(cfg.base_model, reason)
        raise ConfigError(str(missing), source=source, key=BASE_KEY, fix=missing.fix)
