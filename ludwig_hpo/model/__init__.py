"""Declarative PyTorch model: encoders per input feature, concat combiner, heads per output.

``build_model`` and ``ECDModel`` are imported on first use (PEP 562), so the model's torch-free
modules (``ludwig_hpo.model.hf_checks``) load without torch: ``hpo validate`` reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ludwig_hpo.model.build import ECDModel, build_model

__all__ = ["ECDModel", "build_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ludwig_hpo.model import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
