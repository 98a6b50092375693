"""Ludwig's image ``mlp_mixer`` encoder (``MLPMixerEncoder``; MLP-Mixer, Tolstikhin et al. 2021),
with Ludwig's module layout: a patch convolution, mixer blocks (a token-mixing MLP across
patches and a channel-mixing MLP, each after a layer norm, each with a residual), a final
layer norm and the mean over patches.

Runs on every rank; torch's default initialization, as Ludwig's (its layers do not apply
Ludwig's fully connected initializers).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ludwig_hpo.config.encoders_image import MLPMixerEncoder as MLPMixerConfig


def patch_problem(patch_size: int, height: int, width: int) -> str | None:
    """Why ``patch_size`` patches cannot tile (height, width) images, as ``"what; fix"``, or None."""
    if height % patch_size or width % patch_size:
        return (
            f"mlp_mixer patch_size {patch_size} does not divide the {height}x{width} images; "
            f"use a patch_size that divides both, or resize the images (preprocessing height, width)"
        )
    return None


class MLP(nn.Module):
    """Linear -> GELU -> dropout -> Linear -> dropout over the last axis: (..., width) -> (..., width)."""

    def __init__(self, width: int, hidden_size: int, dropout: float) -> None:
        super().__init__()
        self.linear1 = nn.Linear(width, hidden_size)
        self.linear2 = nn.Linear(hidden_size, width)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout2(self.linear2(self.dropout1(F.gelu(self.linear1(x)))))


class MixerBlock(nn.Module):
    """(batch, patches, embed) -> same: token mixing (the MLP over patches, ``token_dim``
    hidden), then channel mixing (over the embedding, ``channel_dim`` hidden)."""

    def __init__(self, embed_size: int, n_patches: int, token_dim: int, channel_dim: int, dropout: float) -> None:
        super().__init__()
        self.mlp1 = MLP(n_patches, token_dim, dropout)
        self.mlp2 = MLP(embed_size, channel_dim, dropout)
        self.layernorm1 = nn.LayerNorm(embed_size)
        self.layernorm2 = nn.LayerNorm(embed_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mid = self.mlp1(self.layernorm1(x).transpose(1, 2)).transpose(1, 2) + x
        return self.mlp2(self.layernorm2(mid)) + mid


class MLPMixerEncoder(nn.Module):
    """(batch, C, H, W) (or (batch, H, W)) floats -> (batch, embed_size) with ``avg_pool``, else
    (batch, H*W / patch_size**2, embed_size) with ``sequence = True`` (the combiner reduces it).

    Raises:
        ValueError: ``patch_size`` does not divide the image height and width.
    """

    ludwig_initialized = True

    def __init__(self, cfg: MLPMixerConfig, shape: tuple[int, int, int]) -> None:
        super().__init__()
        channels, h, w = shape
        p = cfg.patch_size
        problem = patch_problem(p, h, w)
        if problem:
            raise ValueError(problem)
        n_patches = (h // p) * (w // p)
        self.patch_conv = nn.Conv2d(channels, cfg.embed_size, kernel_size=p, stride=p)
        self.mixer_blocks = nn.ModuleList(
            MixerBlock(cfg.embed_size, n_patches, cfg.token_size, cfg.channel_dim, cfg.dropout)
            for _ in range(cfg.num_layers)
        )
        self.layer_norm = nn.LayerNorm(cfg.embed_size)
        self.avg_pool = cfg.avg_pool
        self.sequence = not cfg.avg_pool
        self.output_size = cfg.embed_size
        self.length = n_patches

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:
            x = x.unsqueeze(1)
        hidden = self.patch_conv(x).flatten(2).transpose(1, 2)
        for block in self.mixer_blocks:
            hidden = block(hidden)
        hidden = self.layer_norm(hidden)
        return hidden.mean(dim=1) if self.avg_pool else hidden
