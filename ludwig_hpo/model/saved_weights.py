"""Which weights a trained model's files hold (a search trial's checkpoints, its best weights,
``best_model/model.pt``, a k-fold retrained model): the whole state dict of a model, or for a
model with a parameter-efficient adapter on a frozen base (an LLM with ``adapter``) the adapter's
trainable parameters only: the base weights are the base model's own, loaded again from
``base_model`` when the model is rebuilt, and a checkpoint of a 7B base model with a LoRA adapter
is megabytes instead of gigabytes. A fully fine-tuned LLM (no adapter) saves the whole model.

The names are the unwrapped module's own state-dict keys (the same under DDP, under FSDP's
gathered full state dict, and in the driver's rebuilt model), so a checkpoint written by one
strategy loads into another. Pure functions of the module; any process.
"""

from __future__ import annotations

import sys

import torch


def adapter_only(module: torch.nn.Module) -> bool:
    """Whether ``module``'s saved weights are its trainable parameters only: it holds a peft
    adapter model (``peft.PeftModel``) with some parameters frozen. Peft is not imported here:
    a process that never imported it holds no adapter."""
    peft = sys.modules.get("peft")
    if peft is None:
        return False
    kinds = tuple(k for k in (getattr(peft, "PeftModel", None), getattr(peft, "PeftMixedModel", None)) if k)
    if not any(isinstance(m, kinds) for m in module.modules()):
        return False
    flags = [p.requires_grad for p in module.parameters()]
    return any(flags) and not all(flags)


def trainable_names(module: torch.nn.Module) -> list[str]:
    """The state-dict keys of ``module``'s trainable parameters, in state-dict order."""
    names = {n for n, p in module.named_parameters() if p.requires_grad}
    return [k for k in module.state_dict(keep_vars=True) if k in names]


def select_saved(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The part of ``state`` (a whole-model state dict of ``module``, e.g. FSDP's gathered one)
    that ``module``'s files hold: all of it, or the trainable parameters of an adapter model.

    Raises:
        KeyError: ``state`` lacks a trainable parameter of ``module``.
    """
    if not adapter_only(module):
        return state
    return {k: state[k] for k in trainable_names(module)}


def saved_state_dict(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What ``module``'s files hold (see the module docstring), as detached views of its own
    tensors (``module.state_dict()``'s: an in-place update of the parameters shows through)."""
    return select_saved(module, module.state_dict())


def saved_bytes(module: torch.nn.Module) -> int:
    """The bytes of the parameters ``module``'s files hold (all, or an adapter's trainable ones)."""
    whole = not adapter_only(module)
    return sum(p.numel() * p.element_size() for p in module.parameters() if whole or p.requires_grad)


def check_saved_keys(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Refuse ``state`` for an adapter model ``module`` unless it holds every trainable
    parameter and nothing that is not ``module``'s (a whole model's state dict is checked by
    ``load_state_dict`` itself).

    Raises:
        RuntimeError: a trainable parameter is missing, or a key is not ``module``'s.
    """
    missing = [k for k in trainable_names(module) if k not in state]
    if missing:
        raise RuntimeError(
            f"the saved weights lack {len(missing)} trainable parameters of this adapter model, e.g. {missing[0]!r}"
        )
    own = set(module.state_dict(keep_vars=True))
    unexpected = [k for k in state if k not in own]
    if unexpected:
        raise RuntimeError(
            f"the saved weights hold {len(unexpected)} keys this adapter model has not, e.g. {unexpected[0]!r}"
        )


def load_saved_state_dict(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load ``state`` (what :func:`saved_state_dict` gave for a model of the same configuration)
    into ``module``: the whole model strictly, or an adapter model's trainable parameters over
    its freshly loaded base weights.

    Raises:
        RuntimeError: a key of ``state`` is not ``module``'s, a trainable parameter is missing
            from it, or a shape differs (the file is of another model or configuration).
    """
    if not adapter_only(module):
        module.load_state_dict(state)
        return
    check_saved_keys(module, state)
    module.load_state_dict(state, strict=False)
