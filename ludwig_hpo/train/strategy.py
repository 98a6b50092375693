"""How a trial's model is spread over its workers: DDP replicas or FSDP shards, and mixed precision.

Runs on every rank. Needs only ``torch.distributed`` (initialized when the world size is
above 1), so it works the same under Ray Train and under plain torch processes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, cast

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

#: autocast dtype per ``trainer.precision`` (None: no autocast).
AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def effective_learning_rate(learning_rate: float, scaling: str, world_size: int) -> float:
    """The learning rate the optimizer uses: ``learning_rate`` x 1 (``constant``), x
    ``world_size`` (``linear``) or x sqrt(``world_size``) (``sqrt``). Pure."""
    factor = {"constant": 1.0, "linear": float(world_size), "sqrt": math.sqrt(world_size)}[scaling]
    return learning_rate * factor


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """Autocast context for the forward pass and loss (a no-op for ``fp32``)."""
    dtype = AUTOCAST_DTYPES[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """A gradient scaler, active only for ``fp16`` (fp16 gradients underflow without it)."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def wrap(model: torch.nn.Module, strategy: str, device: torch.device, world_size: int) -> torch.nn.Module:
    """``model`` ready for distributed training: DDP, or FSDP2 (``fully_shard`` on each unit
    of :func:`fsdp_units`, then on the root). Unchanged for one worker.

    Every rank must call this with an identically initialized model.
    """
    if world_size == 1:
        return model
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for unit in fsdp_units(model):
            fully_shard(unit)
        fully_shard(model)
        if callable(getattr(model, "generate", None)):
            # an LLM's generate is no forward: registered, it gathers the root's own weights
            # (embeddings, head) as a forward does, whatever ran before it
            from torch.distributed.fsdp import register_fsdp_forward_method

            register_fsdp_forward_method(model, "generate")
        return model
    shared = getattr(model, "shared_names", None)
    if callable(shared):
        # an llm's frozen base weights are the process cache's storage, the same on every rank:
        # DDP's start-up broadcast would write them in place (a private copy of each page)
        DDP._set_params_and_buffers_to_ignore_for_model(model, list(shared()))
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


def transformer_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks inside ``model``, outermost first in module order: our
    :class:`~ludwig_hpo.model.combiners.transformer.TransformerBlock` (the layers of every
    ``TransformerStack``) and, in a Hugging Face model, each module whose class its model
    names in ``_no_split_modules`` (``BertLayer``, ``ViTLayer``, ``BertEmbeddings``...: the
    parts that model says must stay whole). A block inside another block is not listed. Pure."""
    from ludwig_hpo.model.combiners.transformer import TransformerBlock

    whole: set[str] = set()
    for m in model.modules():
        whole.update(getattr(m, "_no_split_modules", None) or ())
    blocks: list[torch.nn.Module] = []
    inside: set[int] = set()  # ids of modules under a listed block
    for m in model.modules():
        if id(m) in inside or m is model:
            continue
        if isinstance(m, TransformerBlock) or type(m).__name__ in whole:
            blocks.append(m)
            inside.update(id(sub) for sub in m.modules())
    return blocks


def fsdp_units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules FSDP shards one by one, children before the modules that hold them: each
    transformer block (:func:`transformer_blocks`) as one unit, and every other module that
    owns parameters directly (a Linear, Conv, Embedding or norm outside any block). Only one
    unit's whole parameters exist on a rank at a time; a block is gathered in one all-gather
    rather than one per layer inside it. The root is not listed (``wrap`` shards it last). Pure."""
    blocks = transformer_blocks(model)
    inside = {id(sub) for b in blocks for sub in b.modules()}
    leaves = [
        m for m in model.modules() if m is not model and id(m) not in inside and any(True for _ in m.parameters(False))
    ]
    # fully_shard must reach a child before its parent (a parent manages every parameter no
    # child unit holds yet): the reverse of the model's pre-order puts children first
    order = {id(m): i for i, m in enumerate(model.modules())}
    return sorted(blocks + leaves, key=lambda m: -order[id(m)])


def is_fsdp(model: torch.nn.Module) -> bool:
    """Whether ``model`` was sharded by :func:`wrap`."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside DDP (FSDP2 modules are their own module)."""
    return model.module if isinstance(model, DDP) else model


@contextlib.contextmanager
def no_grad_sync(model: torch.nn.Module, sync: bool) -> Iterator[None]:
    """Skip the gradient all-reduce / reduce-scatter of this backward when not ``sync``
    (an accumulation step); gradients accumulate locally until the synchronizing step."""
    if sync:
        yield
    elif isinstance(model, DDP):
        with model.no_sync():
            yield
    elif is_fsdp(model):
        sharded = cast(Any, model)  # an FSDP2 module (fully_shard's class is made at runtime)
        sharded.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            sharded.set_requires_gradient_sync(True)
    else:
        yield


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's parameters and buffers on the CPU, on every rank.

    For FSDP this all-gathers the shards: a collective, so every rank must call it.
    """
    if is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=False))
        return {k: cast(torch.Tensor, v).detach().cpu() for k, v in sd.items()}
    return {k: v.detach().cpu() for k, v in unwrapped(model).state_dict().items()}


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) without an initialized process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's whole state (moments, step counts, param groups), as saved in a
    resumable checkpoint.

    For FSDP this gathers the sharded state on every rank (a collective: every rank must
    call it); otherwise it is ``optimizer.state_dict()`` of this rank, identical on all ranks.
    """
    if is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(
            model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
    return optimizer.state_dict()


def load_training_state(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    model_state: dict,
    optim_state: dict | None,
    *,
    strict: bool = True,
) -> None:
    """Load a checkpoint's whole-model ``model_state`` (and ``optim_state`` when given) into
    this rank's (possibly sharded) ``model`` and ``optimizer``. Every rank calls it with the
    same checkpoint; for FSDP each keeps its own shard. ``strict=False``: ``model_state`` holds
    part of the model (an adapter's trainable parameters); the rest keeps its values.

    Raises:
        RuntimeError, KeyError, ValueError: the checkpoint does not fit this model or optimizer.
    """
    if is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        opts = StateDictOptions(full_state_dict=True, strict=strict)
        set_model_state_dict(model, model_state, options=opts)
        if optim_state is not None:
            set_optimizer_state_dict(model, optimizer, optim_state, options=opts)
        return
    unwrapped(model).load_state_dict(model_state, strict=strict)
    if optim_state is not None:
        optimizer.load_state_dict(optim_state)
