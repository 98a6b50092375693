"""Where a ``pretrained_model_name_or_path`` is, and loading its tokenizer, config and weights.

Resolution is offline-first and never touches the network: a local folder (absolute, ``~``, or
relative to the current folder) holding ``config.json``; else a hub id (its form checked with
``huggingface_hub``'s validator) already in the local Hugging Face cache; else a hub id that
would have to be downloaded. Only :func:`hub_reachable` asks the hub, with a short timeout, and
not at all under ``HF_HUB_OFFLINE``. transformers is imported inside the loading functions only
(it costs seconds), so ``hpo validate`` stays light.

Weights are read once per process: :func:`load_model` keeps the last model's state dict on the
CPU (one model at a time; another model frees it) and builds a NEW module from it on every
call, so trials of a warm worker pool never share parameters or optimizer state. Runs in the
driver (resolution, tokenizers) and on every rank (models).
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Kind = Literal["folder", "cache", "hub"]

#: Seconds :func:`hub_reachable` waits for the hub before it reports it unreachable.
HUB_TIMEOUT_S = 5.0


class HFModelError(ValueError):
    """A ``pretrained_model_name_or_path`` that names no usable model; ``fix`` says what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


@dataclass(frozen=True)
class Resolved:
    """Where a model is.

    Attributes:
        name: as written in the sweep file.
        kind: ``folder`` (a local folder), ``cache`` (a hub id whose ``config.json`` is in the
            local Hugging Face cache), ``hub`` (a hub id not cached here: needs a download).
        path: the folder, or the cached snapshot folder; None for ``hub``.
    """

    name: str
    kind: Kind
    path: Path | None

    @property
    def source(self) -> str:
        """What transformers' ``from_pretrained`` is given: the folder, or the hub id."""
        return str(self.path) if self.kind == "folder" else self.name

    @property
    def local(self) -> bool:
        """True when nothing needs downloading (a folder, or in the cache)."""
        return self.kind != "hub"


def _looks_like_path(name: str) -> bool:
    # a hub id holds a slash too ("owner/model"): only these forms, or an existing file, are paths
    return name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().exists()


def offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or transformers' ``TRANSFORMERS_OFFLINE``) forbids the hub."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def resolve(name: str) -> Resolved:
    """Where ``name`` is (see the module docstring). Reads the file system only. Any process.

    Raises:
        HFModelError: a folder that does not exist or has no ``config.json``; a name that is
            neither a folder nor a well-formed hub id (``owner/model`` or ``model``).
    """
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise HFModelError(
                f"folder {name!r} holds no config.json (not a model saved with save_pretrained)",
                fix="give the folder a model's save_pretrained wrote, or a hub id",
            )
        return Resolved(name, "folder", path.resolve())
    if path.is_file():  # e.g. the folder's config.json or weights file given instead of the folder
        raise HFModelError(
            f"{name!r} is a file, not a model folder", fix=f"give the folder that holds it: {str(path.parent)!r}"
        )
    if _looks_like_path(name) or path.is_absolute():
        raise HFModelError(
            f"model folder {name!r} not found", fix="check the path (relative paths start at the current folder)"
        )
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError as e:
        raise HFModelError(
            f"{name!r} is neither a local folder nor a Hugging Face hub id ({str(e).splitlines()[0]})",
            fix="give a folder saved with save_pretrained, or a hub id such as 'bert-base-uncased' or 'owner/model'",
        ) from e
    cached = _cached_config(name)
    if cached is not None:
        return Resolved(name, "cache", cached.parent)
    return Resolved(name, "hub", None)


def _cached_config(repo_id: str) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json")
    return Path(found) if isinstance(found, str) else None


def hub_reachable(name: str, timeout: float = HUB_TIMEOUT_S) -> str | None:
    """None when the hub can serve model ``name``; else the one-line reason it cannot
    (offline mode, no network, no such model). At most ``timeout`` seconds. Driver only."""
    if offline():
        return "HF_HUB_OFFLINE is set"
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(name, timeout=timeout)
    except GatedRepoError:
        return None  # it exists; the download needs the user's token, which from_pretrained reads
    except RepositoryNotFoundError:
        return "the hub has no such model"
    except Exception as e:  # any network failure: DNS, refused, timeout, proxy
        return f"the hub cannot be reached ({type(e).__name__})"
    return None


def not_found_message(name: str, reason: str) -> HFModelError:
    """The one-line error of a model that is neither local nor downloadable."""
    return HFModelError(
        f"model {name!r} is neither a local folder nor in the local Hugging Face cache, "
        f"and downloading it needs the hub, which needs a network: {reason}",
        fix="save the model with save_pretrained to a folder and give its path, or run where the hub is reachable",
    )


def read_config_dict(resolved: Resolved) -> dict[str, Any] | None:
    """The model's ``config.json`` as a mapping, without transformers; None when it is not local.

    Raises:
        HFModelError: the file is not JSON.
    """
    if resolved.path is None:
        return None
    try:
        data = json.loads((resolved.path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HFModelError(f"config.json of {resolved.name!r} cannot be read ({e})", fix="save the model again") from e
    return data if isinstance(data, dict) else None


def context_length(config: dict[str, Any] | None) -> int | None:
    """The model's context length in tokens from its ``config.json`` mapping (Ludwig's
    ``get_context_len``: ``max_sequence_length``, ``max_position_embeddings``, ``n_positions``,
    the first positive int); None when unknown or ``config`` is None. Pure; any process."""
    if not config:
        return None
    for key in ("max_sequence_length", "max_position_embeddings", "n_positions"):
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _local_only(resolved: Resolved) -> dict[str, Any]:
    # a cached hub model is read from the cache without asking the hub for a newer revision
    return {"local_files_only": True} if resolved.local else {}


def load_tokenizer(name: str) -> Any:
    """The ``AutoTokenizer`` of ``name`` (a folder, a cached or a downloadable hub id). Any process.

    Raises:
        HFModelError: as :func:`resolve`, or a hub id not cached that the hub cannot serve;
            OSError / ValueError as transformers raises them.
    """
    from transformers import AutoTokenizer

    resolved = resolve(name)
    _downloadable(resolved)
    return AutoTokenizer.from_pretrained(resolved.source, **_local_only(resolved))


def _downloadable(resolved: Resolved) -> None:
    # ask the hub once with a short timeout rather than let transformers retry a dead network
    if not resolved.local and (reason := hub_reachable(resolved.name)) is not None:
        raise not_found_message(resolved.name, reason)


def load_config(name: str, **overrides: Any) -> Any:
    """The ``AutoConfig`` of ``name`` with ``overrides`` set on it. Any process.

    Raises:
        HFModelError: as :func:`resolve`; OSError / ValueError as transformers raises them.
    """
    from transformers import AutoConfig

    resolved = resolve(name)
    return AutoConfig.from_pretrained(resolved.source, **_local_only(resolved), **overrides)


def new_config(model_type: str, **fields: Any) -> Any:
    """A fresh transformers config of ``model_type`` (``bert``, ...) from ``fields`` alone,
    the config of a model built without pretrained weights. Any process."""
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **fields)


@dataclass
class _Weights:
    key: tuple[str, str]
    config: Any
    state: dict[str, Any]
    model_kwargs: dict[str, Any]


#: The last pretrained model this process read: at most one (a different model replaces it).
_CACHE: list[_Weights] = []
#: How many times this process read weights from disk or the hub (tests read it).
READS: list[str] = []


def _read(resolved: Resolved, pretrained_kwargs: dict[str, Any], model_kwargs: dict[str, Any]) -> _Weights:
    key = (resolved.source, json.dumps({**pretrained_kwargs, **model_kwargs}, sort_keys=True, default=str))
    for hit in _CACHE:
        if hit.key == key:
            return hit
    _CACHE.clear()  # free the previous model before reading the next one
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per rank and trial on the sweep's console says nothing

    model = AutoModel.from_pretrained(resolved.source, **_local_only(resolved), **pretrained_kwargs, **model_kwargs)
    READS.append(resolved.source)
    state = {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}
    weights = _Weights(key, copy.deepcopy(model.config), state, dict(model_kwargs))
    del model
    _CACHE.append(weights)
    return weights


def load_model(
    name: str,
    use_pretrained: bool = True,
    overrides: dict[str, Any] | None = None,
    pretrained_kwargs: dict[str, Any] | None = None,
    config: Any = None,
    model_kwargs: dict[str, Any] | None = None,
) -> Any:
    """A new ``AutoModel`` module of ``name``: its pretrained weights (read once per process and
    copied into every new module), or random weights of ``config`` when ``use_pretrained`` is
    false (``config`` None: the model's own config). ``overrides`` are set on the config
    (dropouts; they must not change a weight's shape), ``pretrained_kwargs`` go to
    ``from_pretrained``, ``model_kwargs`` to the model's constructor (``add_pooling_layer``).
    Runs on every rank.

    Raises:
        HFModelError: as :func:`resolve`; OSError / ValueError / RuntimeError as transformers and
            ``load_state_dict`` raise them (an override that changes a shape is a RuntimeError).
    """
    from transformers import AutoModel

    overrides, model_kwargs = dict(overrides or {}), dict(model_kwargs or {})
    if not use_pretrained:
        cfg = config if config is not None else load_config(name)
        for k, v in overrides.items():
            setattr(cfg, k, v)
        return AutoModel.from_config(cfg, **model_kwargs)
    weights = _read(resolve(name), dict(pretrained_kwargs or {}), model_kwargs)
    cfg = copy.deepcopy(weights.config)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    model = AutoModel.from_config(cfg, **weights.model_kwargs)
    # float32 parameters whatever the checkpoint's dtype: the trainer's precision decides the rest
    model.load_state_dict(weights.state)
    return model


def clear_cache() -> None:
    """Forget the weights this process holds (tests; a pool freeing memory)."""
    _CACHE.clear()
