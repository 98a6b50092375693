"""Declarative PyTorch model: encoders per input feature, concat combiner, heads per output."""

from ludwig_hpo.model.build import ECDModel, build_model

__all__ = ["ECDModel", "build_model"]
