"""The image encoders besides ``stacked_cnn`` built from their sections, and their checks against
the prepared images (run once in the driver, before any trial, so a mismatch is one line).

Images reach an encoder as (batch, C, H, W) floats, scaled (and ImageNet-standardized with
``preprocessing.standardize_image: imagenet1k``) by the model's pixel scaling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from ludwig_hpo.config import encoders_image as cfgs
from ludwig_hpo.config.encoders import StackedCNNEncoder
from ludwig_hpo.data import hf_loader
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model import encoders_image_hf as hf
from ludwig_hpo.model.encoders_image_mixer import MLPMixerEncoder, patch_problem
from ludwig_hpo.model.encoders_image_resnet import ResNetEncoder, loads_pretrained, weights_path
from ludwig_hpo.model.encoders_image_vit import ViTEncoder
from ludwig_hpo.model.encoders_image_vit import image_problem as vit_image_problem

#: The sections this module builds.
IMAGE_CONFIGS = (cfgs.ResNetEncoder, cfgs.ViTEncoder, cfgs.MLPMixerEncoder, *cfgs.HF_IMAGE_ENCODERS)
#: The sections :func:`image_encoder_problem` checks (``stacked_cnn``: its size keys only).
CHECKED_CONFIGS = (StackedCNNEncoder, *IMAGE_CONFIGS)


def geometry(shape: Sequence[int]) -> tuple[int, int, int]:
    """(channels, height, width) of a prepared image feature's ``FeatureMeta.shape``: (C, H, W),
    or (H, W) for one-channel images stored without the channel axis."""
    dims = tuple(int(d) for d in shape)
    return (1, dims[0], dims[1]) if len(dims) == 2 else (dims[0], dims[1], dims[2])


def build_image_encoder(cfg: Any, meta: FeatureMeta) -> nn.Module:
    """The encoder of one of :data:`IMAGE_CONFIGS` for the prepared images of ``meta``; its
    ``output_size`` is the width it returns. Every rank.

    Raises:
        ValueError, OSError, FileNotFoundError: as :func:`image_encoder_problem` reports them.
    """
    shape = geometry(meta.shape)
    # standardize_image: imagenet1k standardized the pixels already: encoders that standardize
    # with their own statistics skip theirs, so no image is standardized twice.
    standardized = bool(meta.stats.get("imagenet1k", 0.0))
    if isinstance(cfg, cfgs.ResNetEncoder):
        return ResNetEncoder(cfg, shape[0], standardized=standardized)
    if isinstance(cfg, cfgs.ViTEncoder):
        return ViTEncoder(cfg, shape, standardized=standardized)
    if isinstance(cfg, cfgs.MLPMixerEncoder):
        return MLPMixerEncoder(cfg, shape)
    return hf.HFImageEncoder(cfg, shape, standardized=standardized)


def _written_size(cfg: Any, shape: tuple[int, int, int]) -> str | None:
    """Ludwig's encoder copies of the image size (``height``, ``width``, ``num_channels``) that
    disagree with the prepared images."""
    c, h, w = shape
    for key, value, preprocessing in (
        ("height", h, "height"),
        ("width", w, "width"),
        ("num_channels", c, "num_channels"),
    ):
        written = getattr(cfg, key, None)
        if written is not None and written != value:
            return (
                f"{key} {written} is not the prepared images' {value} (Ludwig fills the encoder's {key} from "
                f"preprocessing); set the feature's preprocessing {preprocessing}: {written} instead, or remove {key}"
            )
    return None


def _weights_missing(cfg: cfgs.ResNetEncoder | cfgs.ViTEncoder, network: str) -> str | None:
    """Why torchvision's default weights of ``network`` cannot be read, or None."""
    path = weights_path(cfg)
    if path.is_file():
        return None
    return (
        f"use_pretrained: torchvision's {network} weights are not in {path.parent} "
        f"(they are never downloaded here); put {cfg.weight_file} there (or point model_cache_dir at "
        f"the folder holding hub/checkpoints/{cfg.weight_file}), or set use_pretrained: false"
    )


def image_encoder_problem(cfg: Any, meta: FeatureMeta) -> str | None:
    """Why the encoder cannot be built for the prepared images of ``meta``, as ``"what; fix"``,
    or None. Reads the weights file (``resnet``) or a local checkpoint's config (transformers
    encoders; a hub id not cached here is left to the check of every named model), never the
    network. Driver.
    """
    shape = geometry(meta.shape)
    written = _written_size(cfg, shape)
    if written or isinstance(cfg, StackedCNNEncoder):
        return written
    if isinstance(cfg, cfgs.ViTEncoder):
        problem = vit_image_problem(cfg, shape)
        if problem or not loads_pretrained(cfg):
            return problem
        return _weights_missing(cfg, f"vit_{cfg.model_variant}")
    if isinstance(cfg, cfgs.ResNetEncoder):
        if not loads_pretrained(cfg):
            return None
        if shape[0] != 3:
            return (
                f"use_pretrained: torchvision's resnet{cfg.model_variant} weights take 3-channel images, "
                f"not {shape[0]}; set the feature's preprocessing num_channels: 3, or use_pretrained: false"
            )
        return _weights_missing(cfg, f"resnet{cfg.model_variant}")
    if isinstance(cfg, cfgs.MLPMixerEncoder):
        return patch_problem(cfg.patch_size, shape[1], shape[2])
    if not (isinstance(cfg, cfgs.ViTLegacyEncoder) and not hf.loads_pretrained(cfg)):  # else no checkpoint read
        try:
            resolved = hf_loader.resolve(hf.model_name(cfg))
        except hf_loader.HFModelError as e:
            return f"{e}; {e.fix}"
        if not resolved.local:
            return None  # a hub id to download: whether the hub can serve it is checked with the other models
    try:
        config = hf.model_config(cfg, shape)
    except OSError as e:
        name = hf.model_name(cfg)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return (
            f"the model {name!r} can be neither found locally nor downloaded ({first}); "
            f"point the encoder's {'pretrained_model' if cfg.type == '_vit_legacy' else 'pretrained_model_name_or_path'} "
            f"at a folder holding its config.json and weights"
        )
    if getattr(config, "vision_config", None) is not None:
        return (
            f"{hf.model_name(cfg)!r} is a {config.model_type} model of text and images, not a vision backbone; "
            f"use encoder type clip or siglip for it"
        )
    return hf.check_image_shape(cfg, config, shape)
