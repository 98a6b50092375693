"""When and how a search trial writes its checkpoints (rank 0 of the trial).

:class:`CheckpointBudget` decides at which epochs; :func:`pack` makes the trainer state cheap
to save; :class:`CheckpointFolder` is the folder the files are written into before they are
reported: one folder per run, whose files (``model.pt``, ``trainer_state.pt``) are rewritten
in place at every write and removed when the run ends. Creating and removing a file and a
folder is slow on a file system that frees blocks eagerly (ext4 with online discard): once
per epoch it can take longer than an epoch of a small model, once per run it does not count.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import shutil
import tempfile
import weakref
from typing import Any

import torch

from ludwig_hpo.model.saved_weights import saved_state_dict
from ludwig_hpo.train.job import CHECKPOINT_BUDGET
from ludwig_hpo.train.report_keys import MODEL_FILE

#: Before a run's first write, its cost is estimated: a fixed part (serializing and creating
#: two files, set for a write inside the training loop, where the serialization code runs cold
#: after the epoch's steps and costs more than it does in a tight loop) plus the
#: weights and two optimizer moments' bytes at a local disk's pace.
FIRST_WRITE_FIXED_S, WRITE_BYTES_PER_S = 3e-3, 200e6


class _Slot(int):
    """Where a tensor was in a packed object: its index among the object's tensors."""


def pack(obj: Any) -> dict:
    """``obj`` (nested dicts, read back as plain dicts, lists and tuples of tensors and plain
    values, e.g. an optimizer's state dict) as ``{"skeleton": bytes, "layout": [(buffer,
    offset, shape)], "buffers": [1-D tensors]}``: the tensors' values copied to the CPU into
    one buffer per dtype, the rest pickled. ``torch.save`` of it costs less than ``torch.save(obj)``
    (torch pickles each tensor through Python, so an optimizer's many small tensors cost more
    than their bytes), and it is a snapshot: later changes to ``obj``'s tensors do not reach it.
    Inverse: :func:`unpack`.
    """
    tensors: list[torch.Tensor] = []

    def strip(o):
        if isinstance(o, torch.Tensor):
            tensors.append(o.detach())
            return _Slot(len(tensors) - 1)
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items()}
        if isinstance(o, tuple) and hasattr(o, "_fields"):  # a named tuple
            return type(o)(*(strip(v) for v in o))
        if isinstance(o, (list, tuple)):
            return type(o)(strip(v) for v in o)
        return o

    skeleton = strip(obj)
    groups: dict[torch.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    layout: list[tuple[int, int, tuple[int, ...]]] = [(0, 0, ())] * len(tensors)
    buffers = []
    for b, (dtype, idx) in enumerate(groups.items()):
        # one CPU buffer per dtype, each tensor copied into its slice: tensors of one dtype may
        # sit on different devices (Adam's step counts stay on the CPU beside CUDA moments),
        # and nothing is allocated on an accelerator
        buffer = torch.empty(sum(tensors[i].numel() for i in idx), dtype=dtype)
        offset = 0
        for i in idx:
            t = tensors[i]
            layout[i] = (b, offset, tuple(t.shape))
            buffer[offset : offset + t.numel()].copy_(t.reshape(-1))
            offset += t.numel()
        buffers.append(buffer)
    return {"skeleton": pickle.dumps(skeleton, protocol=pickle.HIGHEST_PROTOCOL), "layout": layout, "buffers": buffers}


def unpack(packed: dict) -> Any:
    """The object :func:`pack` packed, its tensors views of the loaded buffers (each at offset
    0 of its own storage where torch requires it: see below)."""
    tensors = [
        packed["buffers"][b][offset : offset + math.prod(shape)].view(shape) for b, offset, shape in packed["layout"]
    ]
    # A uint8 view at a non-zero offset of its storage breaks torch.set_rng_state (the CPU
    # generator reads its state from the storage offset scaled by the state's size): uint8
    # tensors (random states, masks) come back as their own copies.
    tensors = [t.clone() if t.dtype == torch.uint8 else t for t in tensors]

    def fill(o):
        if isinstance(o, _Slot):
            return tensors[o]
        if isinstance(o, dict):
            return {k: fill(v) for k, v in o.items()}
        if isinstance(o, tuple) and hasattr(o, "_fields"):
            return type(o)(*(fill(v) for v in o))
        if isinstance(o, (list, tuple)):
            return type(o)(fill(v) for v in o)
        return o

    return fill(pickle.loads(packed["skeleton"]))


class CheckpointBudget:
    """Whether a search trial writes a checkpoint at this epoch. Runs on every rank; under
    FSDP rank 0's answer is broadcast (the write gathers the shards).

    A write is allowed when the seconds spent on checkpoints (earlier writes, the copies of
    better epochs' weights kept for the next write) plus the expected cost of this write (the
    last one's, or :func:`first_write_estimate`) stay within ``fraction`` of the seconds spent
    training (the epoch loop, evaluation included). A trial whose write costs ``w`` seconds
    thus writes about every ``w / fraction`` seconds of training: at every epoch of a model
    whose epoch is long against its write, every ``w / (fraction * e)`` epochs of a tiny one
    whose epochs take ``e`` seconds each. What a crash loses is bounded the same way: the
    training since the last write, about ``w / fraction`` seconds. ``fraction=math.inf``
    allows every epoch, ``0`` none; the caller adds the writes it needs (the last epoch, PBT's
    epochs).
    """

    def __init__(self, fraction: float = CHECKPOINT_BUDGET, first_write_s: float = FIRST_WRITE_FIXED_S) -> None:
        self.fraction = fraction
        self.spent_s = 0.0
        self.write_s = first_write_s

    def allows(self, train_s: float) -> bool:
        """True when a write now keeps what checkpoints cost within ``fraction`` of ``train_s``
        (seconds of training so far in this run)."""
        return math.isinf(self.fraction) or self.spent_s + self.write_s <= self.fraction * train_s

    def charge(self, seconds: float, *, wrote: bool) -> None:
        """Count ``seconds`` spent on checkpoints at this epoch; ``wrote``: they include a write
        (its cost is the next write's expected cost)."""
        self.spent_s += seconds
        if wrote:
            self.write_s = seconds


class WeightsCopy:
    """A CPU copy of a module's weights (a search trial's best epoch's, kept for the
    checkpoints written until a better epoch), refreshed in place. Rank 0 of the trial.

    The first :meth:`refresh` allocates the copy and notes the module's own tensors (its state
    dict, or an adapter model's trainable parameters: :func:`~ludwig_hpo.model.saved_weights.saved_state_dict`;
    views of the parameters and buffers, which optimizers, ``load_state_dict`` and
    batch-norm statistics update in place); later refreshes copy them into the same CPU
    tensors with one ``torch._foreach_copy_``: a new state dict per copy costs an allocation
    and a copy call per tensor, which for a small model outweigh the bytes copied.
    A module whose tensors are replaced after the first refresh (not in place) must not be
    refreshed through the same object.

    Args:
        weights: ``{name: tensor}`` to start from (a resumed trial's best weights), or None.
    """

    def __init__(self, weights: dict[str, torch.Tensor] | None = None) -> None:
        self.weights = weights
        self._sources: list[torch.Tensor] | None = None
        self._targets: list[torch.Tensor] = []

    def refresh(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Copy ``module``'s weights now into :attr:`weights` (CPU) and return it."""
        if self._sources is None:
            state = saved_state_dict(module)
            if (
                self.weights is None
                or list(self.weights) != list(state)
                or any(
                    self.weights[k].shape != v.shape or self.weights[k].dtype != v.dtype or self.weights[k].is_cuda
                    for k, v in state.items()
                )
            ):
                self.weights = {k: torch.empty_like(v, device="cpu") for k, v in state.items()}
            self._sources = [v.detach() for v in state.values()]
            self._targets = [self.weights[k] for k in state]
        if all(t.device.type == "cpu" for t in self._sources):
            torch._foreach_copy_(self._targets, self._sources)
        else:  # a device-to-host copy per tensor
            for target, source in zip(self._targets, self._sources, strict=True):
                target.copy_(source)
        assert self.weights is not None  # set above on the first refresh
        return self.weights

    def set(self, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Hold ``weights`` (already a copy, e.g. FSDP's gathered state dict) as they are."""
        self.weights, self._sources = weights, None
        return weights


def first_write_estimate(weight_bytes: int) -> float:
    """Expected seconds of a run's first checkpoint write, for a model of ``weight_bytes``
    bytes of weights (written with two optimizer moments' worth of state)."""
    return FIRST_WRITE_FIXED_S + 3 * weight_bytes / WRITE_BYTES_PER_S


def serialized(obj: Any) -> bytes:
    """What ``torch.save(obj, path)`` would write, as bytes (for a file written more than once)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


class CheckpointFolder:
    """A temporary folder holding a checkpoint's files. Runs on the rank that saves.

    Between two :meth:`write` calls the reporter must have persisted (copied) the folder:
    each write replaces the file's content. The folder is removed when the run ends
    (:meth:`close`, or when the object is garbage-collected after the run raised), not when
    the process exits: a Ray Train worker is killed at the end of its trial without running
    exit handlers, and its last checkpoint's files (the weights and the optimizer's moments)
    would stay in the temporary folder, one per trial.
    """

    def __init__(self, prefix: str = "hpo-ckpt-") -> None:
        self._prefix = prefix
        self.path: str | None = None
        self._finalizer: weakref.finalize | None = None

    def _open(self) -> str:
        self.path = tempfile.mkdtemp(prefix=self._prefix)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)
        return self.path

    def write(self, obj: Any, name: str = MODEL_FILE) -> str:
        """``torch.save(obj)`` into ``<folder>/<name>`` (``model.pt`` by default), or ``obj``
        itself when it is ``bytes`` (from :func:`serialized`); returns the folder.

        The bytes are serialized in memory and written over the previous file without
        truncating it first (a checkpoint of the same model has the same size), so no blocks
        are freed and allocated again.

        Raises:
            OSError: the folder or file cannot be written.
        """
        if self.path is None:
            path = self._open()
        else:
            path = self.path
            os.makedirs(path, exist_ok=True)  # a reporter may have moved it away
        data = memoryview(obj if isinstance(obj, bytes) else serialized(obj))
        fd = os.open(os.path.join(path, name), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], written)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        return path

    def close(self) -> None:
        """Remove the folder (nothing happens if nothing was written)."""
        if self._finalizer is not None:
            self._finalizer()
