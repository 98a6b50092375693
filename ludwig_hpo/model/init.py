"""Ludwig's parameter initializers, so a Ludwig config trains from Ludwig's starting distribution.

Ludwig initializes each fully connected layer (``FCLayer``, and the output decoders' projection)
with ``weights_initializer`` (default ``xavier_uniform``) and ``bias_initializer`` (default
``zeros``), and each embedding table with ``uniform(-1, 1)``; the linear layers inside its
attention blocks, projectors and TabNet keep torch's own initialization. The functions here draw
from torch's global RNG, in the order they are called: a model built after
``torch.manual_seed(s)`` gets the same parameters on every rank and every resume.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

#: Ludwig's initializers by name (``ludwig/utils/torch_utils.initializer_registry``).
INITIALIZERS: dict[str, Callable[..., torch.Tensor]] = {
    "uniform": nn.init.uniform_,
    "normal": nn.init.normal_,
    "constant": nn.init.constant_,
    "ones": nn.init.ones_,
    "zeros": nn.init.zeros_,
    "eye": nn.init.eye_,
    "dirac": nn.init.dirac_,
    "xavier_uniform": nn.init.xavier_uniform_,
    "xavier_normal": nn.init.xavier_normal_,
    "kaiming_uniform": nn.init.kaiming_uniform_,
    "kaiming_normal": nn.init.kaiming_normal_,
    "orthogonal": nn.init.orthogonal_,
    "sparse": nn.init.sparse_,
    "identity": nn.init.eye_,
}
#: Initializers defined for a matrix only; on a bias (a vector) Ludwig's call fails, here it is refused.
_MATRIX_ONLY = frozenset({"eye", "identity", "dirac", "xavier_uniform", "xavier_normal", "orthogonal", "sparse"})
_MATRIX_ONLY |= {"kaiming_uniform", "kaiming_normal"}


def _spec(initializer: Any) -> tuple[str, dict[str, Any]]:
    """``"name"`` or ``{type: name, **kwargs}`` (a pydantic model of that form too) -> (name, kwargs)."""
    if isinstance(initializer, str):
        return initializer, {}
    raw = initializer if isinstance(initializer, Mapping) else initializer.model_dump()
    kwargs = {k: v for k, v in raw.items() if k != "type"}
    return str(raw["type"]), kwargs


def initialize(tensor: torch.Tensor, initializer: Any) -> None:
    """Fill ``tensor`` in place with Ludwig's initializer ``initializer`` (a name of
    :data:`INITIALIZERS`, or ``{type: name, **torch keyword arguments}``). Draws from torch's
    global RNG. Runs on every rank.

    Raises:
        ValueError: an unknown name, or a matrix-only initializer applied to a vector (the
            config layer refuses both before a model is built).
    """
    name, kwargs = _spec(initializer)
    if name not in INITIALIZERS:
        raise ValueError(f"unknown initializer {name!r}; use one of {sorted(INITIALIZERS)}")
    if tensor.dim() < 2 and name in _MATRIX_ONLY:
        raise ValueError(f"initializer {name!r} needs a matrix, not a vector of {tuple(tensor.shape)}")
    with torch.no_grad():
        INITIALIZERS[name](tensor, **kwargs)


def init_linear(layer: nn.Linear, weights_initializer: Any = "xavier_uniform", bias_initializer: Any = "zeros") -> None:
    """A fully connected layer as Ludwig's ``FCLayer`` initializes it: the weight, then the bias."""
    initialize(layer.weight, weights_initializer)
    if layer.bias is not None:
        initialize(layer.bias, bias_initializer)


def init_embedding(table: nn.Embedding, initializer: Any = None) -> None:
    """An embedding table as Ludwig's ``embedding_matrix`` initializes it: ``initializer`` when
    given, else ``uniform(-1, 1)``."""
    initialize(table.weight, initializer if initializer is not None else {"type": "uniform", "a": -1.0, "b": 1.0})


def ludwig_default_init(module: nn.Module) -> None:
    """Ludwig's default initialization of the fully connected layers and embedding tables of a
    module whose layers do not initialize themselves (the encoders and output heads that are
    built with torch's defaults): every ``nn.Linear`` gets ``xavier_uniform`` weights and zero
    biases, every ``nn.Embedding`` ``uniform(-1, 1)``, in ``module.modules()`` order.

    A submodule with the attribute ``ludwig_initialized = True`` (a combiner, or an encoder that
    applies its own Ludwig initializers) is left as it is, with everything under it.
    """

    def visit(m: nn.Module) -> None:
        if getattr(m, "ludwig_initialized", False):
            return
        if isinstance(m, nn.Linear):
            init_linear(m)
        elif isinstance(m, nn.Embedding):
            init_embedding(m)
        for child in m.children():
            visit(child)

    visit(module)
