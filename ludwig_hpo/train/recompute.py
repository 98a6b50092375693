"""Gradient checkpointing (Ludwig's ``trainer.enable_gradient_checkpointing``): each transformer
block keeps only its input from the forward pass and recomputes its activations in the backward
pass, so activation memory grows with the number of blocks' inputs, not with everything inside
them (a larger batch or a longer sequence fits, each step costs about one more forward).

Runs on every rank, on the freshly built model, before it is wrapped for DDP or FSDP. Both
mechanisms keep the parameter names (checkpoints and exported models are unchanged), leave the
model picklable, and run the FSDP hooks outside the recomputation (a sharded block is gathered
for its forward and, once, for its backward).
"""

from __future__ import annotations

import functools
from typing import Any, cast

import torch
from torch.utils.checkpoint import checkpoint

from ludwig_hpo.errors import ConfigError

#: The trainer key, Ludwig's spelling.
KEY = "trainer.enable_gradient_checkpointing"


def _recomputed_forward(block: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """``block``'s forward, checkpointed while training with gradients: its activations are
    dropped and recomputed in the backward pass (non-reentrant; the RNG state is replayed, so
    dropout draws the same masks). Its class's ``forward`` is called directly, so module hooks
    (FSDP's gather and reshard) run once around it, never again in the recomputation."""
    forward = type(block).forward
    if block.training and torch.is_grad_enabled():
        return checkpoint(forward, block, *args, use_reentrant=False, **kwargs)
    return forward(block, *args, **kwargs)


def _recompute(block: torch.nn.Module) -> None:
    # an instance attribute (a partial of a module-level function): the model still pickles,
    # deep-copies and saves its state dict under the same names
    block.forward = functools.partial(_recomputed_forward, block)


def _trainable(m: torch.nn.Module) -> bool:
    return any(p.requires_grad for p in m.parameters())


def _hf_models(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The outermost Hugging Face models inside ``model`` that support gradient checkpointing."""
    found: list[torch.nn.Module] = []
    inside: set[int] = set()
    for m in model.modules():
        if id(m) in inside:
            continue
        if getattr(m, "supports_gradient_checkpointing", False) and hasattr(m, "activation_checkpointing_enable"):
            found.append(m)
            inside.update(id(sub) for sub in m.modules())
    return found


def _recomputed_layers(m: torch.nn.Module) -> int:
    """Layers of the Hugging Face model(s) in ``m`` whose checkpointing is on."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return sum(1 for sub in m.modules() if isinstance(sub, GradientCheckpointingLayer) and sub.gradient_checkpointing)


def enable_gradient_checkpointing(model: torch.nn.Module) -> int:
    """Recompute every trainable transformer block of ``model`` in the backward pass; returns
    how many blocks are recomputed.

    An encoder module that knows how (one with an ``enable_gradient_checkpointing()`` method
    returning whether it turned it on: the pretrained text encoders, which leave a frozen
    transformer alone) is asked first. Any other Hugging Face model inside ``model`` with
    trainable weights gets its own ``activation_checkpointing_enable`` (transformers 5's name
    for ``gradient_checkpointing_enable``; non-reentrant; it checkpoints each layer's
    ``forward``, active only while training with gradients). Every other trainable transformer
    block (:func:`~ludwig_hpo.train.strategy.transformer_blocks`: the layers of a
    ``TransformerStack`` in the ``transformer`` sequence encoder and combiners, the blocks an
    encoder names in ``_no_split_modules``) has its forward run under ``torch.utils.checkpoint``
    the same way (:func:`_recomputed_forward`). Evaluation under ``torch.no_grad`` recomputes nothing. Dropout inside
    a block draws the same mask again when recomputed (the RNG state is replayed). A frozen
    block has no gradients to make and is left as it is.

    Raises:
        ConfigError: ``model`` has no trainable transformer block to recompute (naming the key
            and the fix), rather than a setting that silently changes nothing.
    """
    from ludwig_hpo.train.strategy import transformer_blocks

    count = 0
    done: set[int] = set()  # modules inside an encoder or a Hugging Face model already handled
    for m in model.modules():
        method = getattr(m, "enable_gradient_checkpointing", None)
        if m is model or id(m) in done or not callable(method):
            continue
        if method():
            count += _recomputed_layers(m)
        done.update(id(sub) for sub in m.modules())
    for m in _hf_models(model):
        if id(m) in done:
            continue
        if _trainable(m):
            cast(Any, m).activation_checkpointing_enable({"use_reentrant": False})
            count += _recomputed_layers(m)
        done.update(id(sub) for sub in m.modules())
    for m in transformer_blocks(model):
        if id(m) not in done and _trainable(m):
            _recompute(m)
            count += 1
    if count == 0:
        raise ConfigError(
            "gradient checkpointing recomputes trainable transformer blocks, and this model has none (no "
            "transformer encoder or combiner, no trainable pretrained encoder)",
            key=KEY,
            fix="remove it, or use a transformer encoder or combiner (or a pretrained encoder with trainable: true)",
        )
    return count
