"""Ludwig's image ``vit`` encoder: torchvision's VisionTransformer (Dosovitskiy et al. 2020),
written in torch with torchvision's module names (``conv_proj``, ``class_token``,
``encoder.layers.encoder_layer_<i>``, ``encoder.ln``), so a torchvision state dict
(``vit_b_16-c867db91.pth``, ...) loads into it unchanged.

Runs on every rank; parameters come from torch's global RNG in construction order, initialized
as torchvision initializes them. Each ``EncoderBlock`` is one transformer block for FSDP's
per-block wrapping (``_no_split_modules``).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import nn

from ludwig_hpo.config.encoders_image import ViTEncoder as ViTConfig
from ludwig_hpo.model.encoders_image_resnet import TorchvisionBackbone, loads_pretrained

#: Each variant's (patch size, layers, heads, hidden size, MLP size), torchvision's ``vit_*``.
VARIANTS: dict[str, tuple[int, int, int, int, int]] = {
    "b_16": (16, 12, 12, 768, 3072),
    "b_32": (32, 12, 12, 768, 3072),
    "l_16": (16, 24, 16, 1024, 4096),
    "l_32": (32, 24, 16, 1024, 4096),
    "h_14": (14, 32, 16, 1280, 5120),
}
#: The image side torchvision's default weights of each variant were trained at.
PRETRAINED_SIZE = {"b_16": 224, "b_32": 224, "l_16": 224, "l_32": 224, "h_14": 518}


class MLPBlock(nn.Sequential):
    """torchvision's ``MLPBlock``: Linear -> GELU -> Dropout -> Linear -> Dropout (keys ``0`` and ``3``)."""

    def __init__(self, width: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(nn.Linear(width, mlp_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(mlp_dim, width))
        self.append(nn.Dropout(dropout))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.normal_(m.bias, std=1e-6)


class EncoderBlock(nn.Module):
    """torchvision's ``EncoderBlock``: pre-norm self-attention and MLP, each with a residual:
    (batch, tokens, hidden) -> same."""

    def __init__(self, heads: int, hidden: int, mlp_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden, heads, dropout=0.0, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-6)
        self.mlp = MLPBlock(hidden, mlp_dim, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        h, _ = self.self_attention(h, h, h, need_weights=False)
        x = self.dropout(h) + x
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """torchvision's ``Encoder``: learned position embeddings, the blocks, a final layer norm."""

    def __init__(self, seq_length: int, layers: int, heads: int, hidden: int, mlp_dim: int) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden).normal_(std=0.02))
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.Sequential(
            OrderedDict((f"encoder_layer_{i}", EncoderBlock(heads, hidden, mlp_dim)) for i in range(layers))
        )
        self.ln = nn.LayerNorm(hidden, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.layers(self.dropout(x + self.pos_embedding)))


class VisionTransformer(nn.Module):
    """torchvision's ``VisionTransformer`` without its head: (batch, C, S, S) -> (batch, hidden),
    the class token's encoding. ``image_size`` is fixed at construction (the position embeddings)."""

    _no_split_modules = ["EncoderBlock"]

    def __init__(self, variant: str, image_size: int, in_channels: int = 3) -> None:
        super().__init__()
        patch, layers, heads, hidden, mlp_dim = VARIANTS[variant]
        self.image_size, self.patch_size, self.hidden_dim = image_size, patch, hidden
        self.conv_proj = nn.Conv2d(in_channels, hidden, kernel_size=patch, stride=patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.encoder = Encoder((image_size // patch) ** 2 + 1, layers, heads, hidden, mlp_dim)
        fan_in = in_channels * patch * patch
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        if self.conv_proj.bias is not None:  # a Conv2d built with bias=True always has one
            nn.init.zeros_(self.conv_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.hidden_dim, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        return self.encoder(x)[:, 0]


def image_problem(cfg: ViTConfig, shape: tuple[int, int, int]) -> str | None:
    """Why (C, H, W) images cannot go through this ``vit``, as ``"what; fix"``, or None: not
    square, not a whole number of patches, or (pretrained) not the weights' size or 3 channels."""
    c, h, w = shape
    patch = VARIANTS[cfg.model_variant][0]
    if loads_pretrained(cfg):
        size = PRETRAINED_SIZE[cfg.model_variant]
        if (h, w) != (size, size):
            return (
                f"torchvision's vit_{cfg.model_variant} weights take {size}x{size} images, not {h}x{w}; "
                f"set the feature's preprocessing height: {size}, width: {size}, or use_pretrained: false"
            )
        if c != 3:
            return (
                f"torchvision's vit_{cfg.model_variant} weights take 3-channel images, not {c}; "
                f"set the feature's preprocessing num_channels: 3, or use_pretrained: false"
            )
    if h != w or h % patch:
        return (
            f"vit_{cfg.model_variant} takes square images of a whole number of {patch}-pixel patches, not {h}x{w}; "
            f"set the feature's preprocessing height and width to one multiple of {patch}"
        )
    return None


class ViTEncoder(TorchvisionBackbone):
    """Ludwig's ``vit``: (batch, C, S, S) (or (batch, S, S)) float pixels in [0, 1] ->
    (batch, hidden). Three-channel images are standardized with ImageNet's mean and std first,
    as Ludwig's torchvision transforms do (unless ``standardized``); ``trainable: false``
    freezes every parameter. The network is ``self.model`` (torchvision's keys under ``model.``).

    Raises:
        ValueError: images this variant cannot take (see :func:`image_problem`).
        FileNotFoundError: ``use_pretrained`` and the weights file is not in torch.hub's folder.
    """

    ludwig_initialized = True

    def __init__(self, cfg: ViTConfig, shape: tuple[int, int, int], standardized: bool = False) -> None:
        super().__init__()
        problem = image_problem(cfg, shape)
        if problem:
            raise ValueError(problem)
        model = VisionTransformer(cfg.model_variant, shape[1], shape[0])
        self._setup(model, cfg, shape[0], standardized, head_prefix="heads.")
        self.output_size = model.hidden_dim
