"""Image encoders that are transformers models: Ludwig's ``_vit_legacy`` (``ViTModel``),
``dinov2``, ``clip`` and ``siglip``, and this platform's ``auto_transformer`` (any vision
backbone ``AutoModel`` loads). Each returns the model's pooled output, (batch, hidden size).

A ``pretrained_model_name_or_path`` is resolved by :mod:`~ludwig_hpo.data.hf_loader` (a folder,
the local Hugging Face cache, or a download where the hub is reachable); ``hpo sweep`` checks
before any trial that it can be found. Weights that ``AutoModel`` loads (``_vit_legacy``,
``dinov2``, ``auto_transformer``) are read once per process and copied into each new encoder;
``clip`` and ``siglip`` take the vision half of a text-and-image checkpoint through their
vision model class. Runs on every rank; the models keep their own
initialization (pretrained or transformers' ``_init_weights``), never Ludwig's.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import torch
from torch import nn

from ludwig_hpo.config import encoders_image as cfgs
from ludwig_hpo.data import hf_loader

#: Ludwig's transformers class of each named image encoder (its ``use_pretrained`` path).
MODEL_CLASSES = {
    "_vit_legacy": ("ViTModel", "ViTConfig"),
    "dinov2": ("Dinov2Model", "Dinov2Config"),
    "clip": ("CLIPVisionModel", "CLIPVisionConfig"),
    "siglip": ("SiglipVisionModel", "SiglipVisionConfig"),
}


def model_name(cfg: Any) -> str:
    """The hub id or folder an encoder section names (``pretrained_model`` for ``_vit_legacy``)."""
    return str(cfg.pretrained_model if isinstance(cfg, cfgs.ViTLegacyEncoder) else cfg.pretrained_model_name_or_path)


def loads_pretrained(cfg: Any) -> bool:
    """Whether the encoder reads pretrained weights (``use_pretrained`` and not ``saved_weights_in_checkpoint``)."""
    return bool(cfg.use_pretrained and not cfg.saved_weights_in_checkpoint)


def model_config(cfg: Any, shape: tuple[int, int, int]) -> Any:
    """The transformers config the encoder builds (or loads) for (C, H, W) images: for
    ``_vit_legacy`` without pretrained weights, a ``ViTConfig`` of Ludwig's keys and the image's
    size; otherwise the checkpoint's own config (``config.json``, read from the folder or the hub
    cache). Any process.

    Raises:
        HFModelError: the name is neither a folder nor a hub id (see :func:`~ludwig_hpo.data.hf_loader.resolve`).
        OSError: the checkpoint's config can be neither found locally nor downloaded.
    """
    import transformers

    if isinstance(cfg, cfgs.ViTLegacyEncoder) and not loads_pretrained(cfg):
        c, h, _ = shape
        return transformers.ViTConfig(
            image_size=h,
            num_channels=c,
            patch_size=cfg.patch_size,
            hidden_size=cfg.hidden_size,
            num_hidden_layers=cfg.num_hidden_layers,
            num_attention_heads=cfg.num_attention_heads,
            intermediate_size=cfg.intermediate_size,
            hidden_act=cfg.hidden_act,
            hidden_dropout_prob=cfg.hidden_dropout_prob,
            attention_probs_dropout_prob=cfg.attention_probs_dropout_prob,
            initializer_range=cfg.initializer_range,
            layer_norm_eps=cfg.layer_norm_eps,
        )
    resolved = hf_loader.resolve(model_name(cfg))
    local = {"local_files_only": True} if resolved.local else {}
    config_class = getattr(transformers, MODEL_CLASSES[cfg.type][1]) if cfg.type in MODEL_CLASSES else None
    return (config_class or transformers.AutoConfig).from_pretrained(resolved.source, **local)


def hidden_width(config: Any) -> int:
    """The width of a vision model's pooled output: ``hidden_size``, or the last stage's width
    of a convolutional backbone (``hidden_sizes[-1]``: ConvNeXt, ResNet, ...)."""
    sizes = getattr(config, "hidden_sizes", None)
    return int(sizes[-1]) if sizes else int(config.hidden_size)


def processor_mean_std(name: str) -> tuple[list[float], list[float]] | None:
    """The per-channel ``image_mean`` and ``image_std`` of a checkpoint's image processor
    (``preprocessor_config.json``), or None when it has no such file or no normalization.
    Reads the folder, the hub cache or the hub."""
    from transformers.utils import cached_file

    resolved = hf_loader.resolve(name)
    if resolved.path is not None:
        local = resolved.path / "preprocessor_config.json"
        path: str | None = str(local) if local.is_file() else None
    else:
        path = cached_file(name, "preprocessor_config.json", _raise_exceptions_for_missing_entries=False)
    if path is None:
        return None
    with open(path) as f:
        data = json.load(f)
    if not data.get("do_normalize", True) or "image_mean" not in data or "image_std" not in data:
        return None
    return list(data["image_mean"]), list(data["image_std"])


def check_image_shape(cfg: Any, config: Any, shape: tuple[int, int, int]) -> str | None:
    """Why (C, H, W) images cannot go through this model, with the fix, or None: a channel
    count other than the model's ``num_channels``; for a model of a fixed ``image_size`` (ViT,
    CLIP, SigLIP) another size (``auto_transformer`` interpolates a ViT's position embeddings
    instead; DINOv2 always does). Pure."""
    c, h, w = shape
    want_c = getattr(config, "num_channels", None)
    if want_c is not None and int(want_c) != c:
        return (
            f"the model takes {want_c}-channel images but the prepared images have {c}; "
            f"set the feature's preprocessing num_channels: {want_c}"
        )
    if isinstance(cfg, cfgs.ViTLegacyEncoder) and h != w:
        return f"_vit_legacy takes square images but the prepared images are {h}x{w}; set the feature's preprocessing height and width to one size"
    size = getattr(config, "image_size", None)
    fixed = cfg.type in ("_vit_legacy", "clip", "siglip") or (
        cfg.type == "auto_transformer" and config.model_type in ("clip_vision_model", "siglip_vision_model")
    )
    if isinstance(size, int) and fixed and (h, w) != (size, size):
        return f"the model takes {size}x{size} images but the prepared images are {h}x{w}; set the feature's preprocessing height: {size}, width: {size}"
    return None


class HFImageEncoder(nn.Module):
    """A transformers vision model as an image encoder: (batch, C, H, W) (or (batch, H, W))
    float pixels -> (batch, ``output_size``) pooled output (``pooling: mean``, or a model without
    a pooler: the mean of the last hidden state over its tokens or its spatial map).

    ``trainable: false`` freezes every parameter and keeps the model in eval mode (its dropout
    off), as Ludwig's ``FreezeModule``; ``auto_transformer`` standardizes the pixels with the
    checkpoint's processor mean and std first, unless ``standardized`` (the feature's
    ``standardize_image: imagenet1k`` already did: the pixels are standardized once, by the
    statistics the user wrote). The model is ``self.model``; transformers'
    layer classes (``ViTLayer``, ...) are its blocks for FSDP's per-block wrapping.

    Raises:
        OSError: pretrained weights or config can be neither found locally nor downloaded.
        ValueError: images of a channel count or size the model does not take.
    """

    ludwig_initialized = True
    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, cfg: Any, shape: tuple[int, int, int], standardized: bool = False) -> None:
        super().__init__()
        import transformers

        config = model_config(cfg, shape)
        problem = check_image_shape(cfg, config, shape)
        if problem:
            raise ValueError(problem)
        if getattr(config, "vision_config", None) is not None:
            raise ValueError(
                f"{model_name(cfg)!r} is a {config.model_type} model of text and images, not a vision backbone; "
                f"use encoder type clip or siglip for it"
            )
        if cfg.type in ("clip", "siglip"):
            model_class: Any = getattr(transformers, MODEL_CLASSES[cfg.type][0])
            resolved = hf_loader.resolve(model_name(cfg))
            local = {"local_files_only": True} if resolved.local else {}
            pretrained = loads_pretrained(cfg)
            self.model = model_class.from_pretrained(resolved.source, **local) if pretrained else model_class(config)
        elif isinstance(cfg, cfgs.ViTLegacyEncoder) and not loads_pretrained(cfg):
            self.model = transformers.ViTModel(config)
        else:
            self.model = hf_loader.load_model(model_name(cfg), use_pretrained=loads_pretrained(cfg), config=config)
        if isinstance(cfg, cfgs.ViTLegacyEncoder) and cfg.gradient_checkpointing:
            # transformers 5 renamed it (the old name warns, and goes in 6)
            enable = getattr(self.model, "activation_checkpointing_enable", None)
            (enable or self.model.gradient_checkpointing_enable)()
        self.trainable = cfg.trainable
        for p in self.model.parameters():
            p.requires_grad_(cfg.trainable)
        if not cfg.trainable:
            self.model.eval()
        self.output_size = hidden_width(self.model.config)
        self.pool_mean = isinstance(cfg, cfgs.AutoVisionEncoder) and cfg.pooling == "mean"
        size = getattr(self.model.config, "image_size", None)
        takes = "interpolate_pos_encoding" in inspect.signature(self.model.forward).parameters
        self.interpolate = (
            isinstance(cfg, cfgs.AutoVisionEncoder)
            and takes
            and isinstance(size, int)
            and (shape[1], shape[2]) != (size, size)
        )
        own = isinstance(cfg, cfgs.AutoVisionEncoder) and not standardized
        stats = processor_mean_std(model_name(cfg)) if own else None
        self.standardize = stats is not None and len(stats[0]) == shape[0]
        mean, std = stats if self.standardize and stats else ([0.0] * shape[0], [1.0] * shape[0])
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def train(self, mode: bool = True) -> HFImageEncoder:
        """Train mode for a trainable model; a frozen one stays in eval mode (dropout off)."""
        super().train(mode)
        if not self.trainable:
            self.model.eval()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:
            x = x.unsqueeze(1)
        if self.standardize:
            x = (x - self.mean) / self.std
        kwargs = {"interpolate_pos_encoding": True} if self.interpolate else {}
        out = self.model(pixel_values=x, **kwargs)
        pooled = getattr(out, "pooler_output", None)
        if pooled is not None and not self.pool_mean:
            return pooled.flatten(1)
        hidden = out.last_hidden_state
        return hidden.mean(dim=(2, 3)) if hidden.dim() == 4 else hidden.mean(dim=1)
