"""Image encoder sections besides ``stacked_cnn`` (in :mod:`~ludwig_hpo.config.encoders`), with
Ludwig's keys and defaults: ``resnet`` and ``vit`` (torchvision's ResNet and ViT), ``mlp_mixer``, ``_vit_legacy``
(transformers' ViTModel), Ludwig's Hugging Face backbones ``dinov2``, ``clip`` and ``siglip``,
and this platform's ``auto_transformer`` (any transformers vision backbone by
``pretrained_model_name_or_path``). Typed, frozen; no I/O.

``height``, ``width`` and ``num_channels`` are Ludwig's encoder copies of the image
preprocessing; Ludwig fills them from the prepared images. Written here they must agree with
the prepared images (checked before any trial, naming the preprocessing keys to set instead).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ludwig_hpo.config.base import RuleError, _Base

#: torchvision's file name of each ResNet variant's default (``DEFAULT``) ImageNet weights, as
#: ``torch.hub`` caches it under ``<TORCH_HOME>/hub/checkpoints/``.
RESNET_WEIGHT_FILES = {
    18: "resnet18-f37072fd.pth",
    34: "resnet34-b627a593.pth",
    50: "resnet50-11ad3fa6.pth",
    101: "resnet101-cd907fc2.pth",
    152: "resnet152-f82ba261.pth",
}


class _ImageSize(_Base):
    """Ludwig's encoder-level copies of the prepared image size (filled by Ludwig itself)."""

    height: int | None = Field(default=None, ge=1)
    width: int | None = Field(default=None, ge=1)
    num_channels: int | None = Field(default=None, ge=1)


class ResNetEncoder(_Base):
    """Ludwig's ``resnet`` (torchvision's ResNet, ``model_variant`` 18, 34, 50, 101 or 152):
    (batch, C, H, W) -> (batch, 512 for 18 / 34, else 2048), the network up to its global
    average pool (the classification layer removed, as Ludwig does).

    ``use_pretrained: true`` (Ludwig's default) loads torchvision's default ImageNet weights
    from the file ``torch.hub`` keeps them in (``<model_cache_dir or TORCH_HOME>/hub/
    checkpoints/``); they are never downloaded here. ``trainable: false`` freezes the network.
    ``saved_weights_in_checkpoint`` (Ludwig sets it for a trained model) skips the pretrained
    weights: a checkpoint holds them.
    """

    type: Literal["resnet"] = "resnet"
    model_variant: Literal[18, 34, 50, 101, 152] = 50
    use_pretrained: bool = True
    model_cache_dir: str | None = None
    saved_weights_in_checkpoint: bool = False
    trainable: bool = True

    @property
    def weight_file(self) -> str:
        """torchvision's file name of this variant's default weights."""
        return RESNET_WEIGHT_FILES[self.model_variant]


#: torchvision's file name of each ViT variant's default weights (``h_14``: the 518x518 SWAG ones).
VIT_WEIGHT_FILES = {
    "b_16": "vit_b_16-c867db91.pth",
    "b_32": "vit_b_32-d86f8d99.pth",
    "l_16": "vit_l_16-852ce7e3.pth",
    "l_32": "vit_l_32-c7638314.pth",
    "h_14": "vit_h_14_swag-80465313.pth",
}


class ViTEncoder(_Base):
    """Ludwig's ``vit`` (torchvision's VisionTransformer, ``model_variant`` ``b_16``, ``b_32``,
    ``l_16``, ``l_32``, ``h_14``): (batch, C, S, S) -> (batch, 768 / 1024 / 1280), the class
    token after the last layer norm (the classification head removed, as Ludwig does).

    ``use_pretrained``, ``model_cache_dir``, ``saved_weights_in_checkpoint``, ``trainable`` as
    for ``resnet``; pretrained weights take the size they were trained at (224x224; ``h_14``
    518x518). Without them the network is built for the prepared images' size.
    """

    type: Literal["vit"] = "vit"
    model_variant: Literal["b_16", "b_32", "l_16", "l_32", "h_14"] = "b_16"
    use_pretrained: bool = True
    model_cache_dir: str | None = None
    saved_weights_in_checkpoint: bool = False
    trainable: bool = True

    @property
    def weight_file(self) -> str:
        """torchvision's file name of this variant's default weights."""
        return VIT_WEIGHT_FILES[self.model_variant]


class MLPMixerEncoder(_ImageSize):
    """Ludwig's ``mlp_mixer`` (MLP-Mixer, Tolstikhin et al. 2021): ``patch_size`` patches
    embedded to ``embed_size``, ``num_layers`` mixer blocks (token MLP of ``token_size``, channel
    MLP of ``channel_dim``), a layer norm, then the mean over patches (``avg_pool``):
    (batch, C, H, W) -> (batch, embed_size), or (batch, patches, embed_size) without it.
    ``patch_size`` must divide the image height and width."""

    type: Literal["mlp_mixer"] = "mlp_mixer"
    dropout: float = Field(default=0.0, ge=0, le=1)
    patch_size: int = Field(default=16, ge=1)
    embed_size: int = Field(default=512, ge=1)
    token_size: int = Field(default=2048, ge=1)
    channel_dim: int = Field(default=256, ge=1)
    num_layers: int = Field(default=8, ge=1)
    avg_pool: bool = True


class _HFVision(_ImageSize):
    """A transformers vision model: ``use_pretrained`` weights (found locally or downloaded
    through the Hugging Face loader), ``trainable: false`` freezes it (and keeps it in eval
    mode, as Ludwig's ``FreezeModule``)."""

    use_pretrained: bool = True
    trainable: bool = True
    saved_weights_in_checkpoint: bool = False


class ViTLegacyEncoder(_HFVision):
    """Ludwig's ``_vit_legacy`` (``ViTEncoder``): transformers' ``ViTModel``, its pooled output:
    (batch, C, S, S) -> (batch, hidden_size). ``use_pretrained: true`` loads
    ``pretrained_model`` (a hub id or a folder) and ignores the size keys; false builds a
    ``ViTConfig`` of the image's size and channels and the keys below."""

    type: Literal["_vit_legacy"] = "_vit_legacy"
    pretrained_model: str = "google/vit-base-patch16-224"
    hidden_size: int = Field(default=768, ge=1)
    num_hidden_layers: int = Field(default=12, ge=1)
    num_attention_heads: int = Field(default=12, ge=1)
    intermediate_size: int = Field(default=3072, ge=1)
    hidden_act: Literal["relu", "gelu", "selu", "gelu_new"] = "gelu"
    hidden_dropout_prob: float = Field(default=0.1, ge=0, le=1)
    attention_probs_dropout_prob: float = Field(default=0.1, ge=0, le=1)
    initializer_range: float = Field(default=0.02, ge=0)
    layer_norm_eps: float = Field(default=1e-12, gt=0)
    gradient_checkpointing: bool = False
    patch_size: int = Field(default=16, ge=1)
    output_attentions: bool = False

    @field_validator("output_attentions")
    @classmethod
    def _no_attentions(cls, value: bool) -> bool:
        if value:
            raise RuleError(
                "output_attentions is not supported yet (the attention maps are not returned to the combiner)",
                fix="remove output_attentions",
            )
        return value


class DINOv2Encoder(_HFVision):
    """Ludwig's ``dinov2``: transformers' ``Dinov2Model``, its pooled output (the class token after
    the last layer norm): (batch, 3, H, W) -> (batch, hidden_size)."""

    type: Literal["dinov2"] = "dinov2"
    pretrained_model_name_or_path: str = "facebook/dinov2-base"


class CLIPEncoder(_HFVision):
    """Ludwig's ``clip``: transformers' ``CLIPVisionModel``, its pooled output:
    (batch, 3, S, S) -> (batch, hidden_size)."""

    type: Literal["clip"] = "clip"
    pretrained_model_name_or_path: str = "openai/clip-vit-base-patch32"


class SigLIPEncoder(_HFVision):
    """Ludwig's ``siglip``: transformers' ``SiglipVisionModel``, its pooled output:
    (batch, 3, S, S) -> (batch, hidden_size)."""

    type: Literal["siglip"] = "siglip"
    pretrained_model_name_or_path: str = "google/siglip-base-patch16-224"


class AutoVisionEncoder(_HFVision):
    """This platform's ``auto_transformer`` image encoder (Ludwig has the key for text only):
    any transformers vision backbone ``AutoModel`` loads (ViT, ConvNeXt, DINOv2, Swin, ...) by
    ``pretrained_model_name_or_path``: (batch, C, H, W) -> (batch, hidden size), the model's
    pooled output, or the mean of its last hidden state over tokens where it has none
    (``pooling: mean`` always takes the mean). The checkpoint's image processor mean and std
    (``preprocessor_config.json``) are applied to the [0, 1] pixels, as its processor would
    (not after the feature's ``standardize_image: imagenet1k``: pixels are standardized once).
    ``use_pretrained: false`` builds the same architecture from the checkpoint's config, with
    fresh weights."""

    type: Literal["auto_transformer"] = "auto_transformer"
    pretrained_model_name_or_path: str
    pooling: Literal["pooled", "mean"] = "pooled"


#: Keys of Ludwig's ``_resnet_legacy`` that its torchvision ``resnet`` does not have.
_LEGACY_RESNET_KEYS = frozenset(
    {
        "height",
        "width",
        "num_channels",
        "resnet_size",
        "out_channels",
        "kernel_size",
        "conv_stride",
        "first_pool_kernel_size",
        "first_pool_stride",
        "batch_norm_momentum",
        "batch_norm_epsilon",
        "fc_layers",
        "num_fc_layers",
        "output_size",
        "use_bias",
        "weights_initializer",
        "bias_initializer",
        "norm",
        "norm_params",
        "activation",
        "dropout",
    }
)
#: Keys of Ludwig's ``_vit_legacy`` that its torchvision ``vit`` does not have.
_LEGACY_VIT_KEYS = frozenset(ViTLegacyEncoder.model_fields) - {
    "type",
    "use_pretrained",
    "trainable",
    "saved_weights_in_checkpoint",
}


def legacy_image_encoder(value: Any) -> Any:
    """Ludwig 0.7's upgrade of an image encoder section (``_upgrade_legacy_image_encoders``): a
    ``resnet`` or ``vit`` written with a key only the old encoder of that name has (``resnet_size``,
    ``num_hidden_layers``, ...) is that old encoder, ``_resnet_legacy`` / ``_vit_legacy``. Any other
    value passes unchanged. Pure (a before-validator of the image feature's ``encoder``)."""
    if not isinstance(value, dict):
        return value
    legacy = {"resnet": ("_resnet_legacy", _LEGACY_RESNET_KEYS), "vit": ("_vit_legacy", _LEGACY_VIT_KEYS)}
    kind = value.get("type")
    if isinstance(kind, str) and kind in legacy and set(value) & legacy[kind][1]:
        return {**value, "type": legacy[kind][0]}
    return value


#: The image encoders whose weights come through transformers, by type.
HF_IMAGE_ENCODERS = (ViTLegacyEncoder, DINOv2Encoder, CLIPEncoder, SigLIPEncoder, AutoVisionEncoder)
