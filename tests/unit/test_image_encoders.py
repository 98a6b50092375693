"""Ludwig's image encoders besides ``stacked_cnn``: ``resnet`` (torchvision's network and state dict
names), ``mlp_mixer``, ``_vit_legacy`` (transformers' ViTModel), the Hugging Face backbones
(``dinov2``, ``auto_transformer``) loaded from a saved folder as a user's hub id would be, their
freezing, and their one-line refusals before any trial."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from ludwig_hpo.config.encoders_image import (
    AutoVisionEncoder,
    DINOv2Encoder,
    MLPMixerEncoder,
    ResNetEncoder,
    ViTEncoder,
    ViTLegacyEncoder,
)
from ludwig_hpo.config.features import ImageInputFeature
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model.encoders_image import check_image_encoders
from ludwig_hpo.model.encoders_image_build import build_image_encoder, image_encoder_problem


def _meta(shape: tuple[int, ...], **stats: float) -> Any:
    return SimpleNamespace(shape=shape, stats=stats)


def _feature(**encoder: Any) -> ImageInputFeature:
    return ImageInputFeature.model_validate({"name": "img", "type": "image", "encoder": encoder})


def _resnet18_keys() -> list[str]:
    """torchvision's ``resnet18().state_dict()`` keys without ``fc.*``, written out by hand."""
    bn = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    keys = ["conv1.weight", *(f"bn1.{k}" for k in bn)]
    for stage in (1, 2, 3, 4):
        for block in (0, 1):
            p = f"layer{stage}.{block}"
            keys += [f"{p}.conv1.weight", *(f"{p}.bn1.{k}" for k in bn)]
            keys += [f"{p}.conv2.weight", *(f"{p}.bn2.{k}" for k in bn)]
            if stage > 1 and block == 0:  # the strided first block of stages 2-4 has a 1x1 shortcut
                keys += [f"{p}.downsample.0.weight", *(f"{p}.downsample.1.{k}" for k in bn)]
    return keys


def test_resnet_is_torchvisions_network_with_its_state_dict_names():
    torch.manual_seed(0)
    enc = build_image_encoder(ResNetEncoder(model_variant=18, use_pretrained=False), _meta((3, 32, 32)))
    assert list(enc.model.state_dict()) == _resnet18_keys()
    assert enc.output_size == 512 and enc(torch.rand(2, 3, 32, 32)).shape == (2, 512)
    shapes = {k: tuple(v.shape) for k, v in enc.model.state_dict().items()}
    assert shapes["conv1.weight"] == (64, 3, 7, 7)
    assert shapes["layer2.0.downsample.0.weight"] == (128, 64, 1, 1)
    # one-channel images: the stem takes one channel; no ImageNet standardization
    gray = build_image_encoder(ResNetEncoder(model_variant=18, use_pretrained=False), _meta((1, 24, 20)))
    assert gray.model.conv1.in_channels == 1 and not gray.standardize
    assert gray(torch.rand(2, 1, 24, 20)).shape == (2, 512)


def test_resnet50_is_bottlenecks_of_2048_and_standardizes_once():
    enc = build_image_encoder(ResNetEncoder(use_pretrained=False), _meta((3, 32, 32)))
    assert enc.output_size == 2048 and len(enc.model.layer3) == 6
    assert [type(b).__name__ for b in enc.model.layer1] == ["Bottleneck"] * 3
    assert enc.standardize  # Ludwig's torchvision transforms standardize with ImageNet's mean/std
    again = build_image_encoder(ResNetEncoder(use_pretrained=False), _meta((3, 32, 32), imagenet1k=1.0))
    assert not again.standardize  # standardize_image: imagenet1k already did


def test_resnet_pretrained_loads_torchvisions_file_from_model_cache_dir(tmp_path):
    torch.manual_seed(1)
    source = build_image_encoder(ResNetEncoder(model_variant=18, use_pretrained=False), _meta((3, 32, 32)))
    state = dict(source.model.state_dict())
    state["fc.weight"], state["fc.bias"] = torch.zeros(1000, 512), torch.zeros(1000)  # as torchvision ships it
    folder = tmp_path / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    torch.save(state, folder / "resnet18-f37072fd.pth")
    cfg = ResNetEncoder(model_variant=18, model_cache_dir=str(tmp_path), trainable=False)
    assert image_encoder_problem(cfg, _meta((3, 32, 32))) is None
    torch.manual_seed(2)
    enc = build_image_encoder(cfg, _meta((3, 32, 32)))
    assert torch.equal(enc.model.layer4[1].conv2.weight, source.model.layer4[1].conv2.weight)
    assert not any(p.requires_grad for p in enc.parameters())


def test_resnet_pretrained_without_the_file_is_one_line_before_any_trial(tmp_path):
    feat = _feature(type="resnet", model_variant=34, model_cache_dir=str(tmp_path))
    with pytest.raises(ConfigError) as info:
        check_image_encoders([feat], {"img": _meta((3, 32, 32))}, "sweep.yaml")  # type: ignore[arg-type]
    assert info.value.key == "input_features[img].encoder"
    assert "resnet34-b627a593.pth" in str(info.value) and "use_pretrained: false" in (info.value.fix or "")
    gray = _feature(type="resnet", model_variant=18)
    with pytest.raises(ConfigError, match="3-channel"):
        check_image_encoders([gray], {"img": _meta((1, 32, 32))}, "sweep.yaml")  # type: ignore[arg-type]


@pytest.mark.parametrize("channels", [1, 3])
def test_mlp_mixer_pools_patches_or_returns_them_as_a_sequence(channels):
    cfg = MLPMixerEncoder(patch_size=4, embed_size=16, token_size=8, channel_dim=12, num_layers=2)
    enc = build_image_encoder(cfg, _meta((channels, 16, 8)))
    assert enc(torch.rand(3, channels, 16, 8)).shape == (3, 16) and not enc.sequence
    assert len(list(enc.mixer_blocks)) == 2 and all(p.requires_grad for p in enc.parameters())
    seq = build_image_encoder(cfg.model_copy(update={"avg_pool": False}), _meta((channels, 16, 8)))
    assert seq.sequence and seq.length == 8 and seq(torch.rand(3, channels, 16, 8)).shape == (3, 8, 16)
    problem = image_encoder_problem(MLPMixerEncoder(patch_size=5), _meta((channels, 16, 8)))
    assert problem is not None and "patch_size 5 does not divide the 16x8 images" in problem


@pytest.mark.parametrize("channels", [1, 3])
def test_vit_legacy_without_pretrained_builds_vitconfig_of_the_keys_and_image(channels):
    cfg = ViTLegacyEncoder(
        use_pretrained=False,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        patch_size=8,
    )
    enc = build_image_encoder(cfg, _meta((channels, 16, 16)))
    c = enc.model.config
    assert (type(enc.model).__name__, c.image_size, c.num_channels, c.num_hidden_layers) == (
        "ViTModel",
        16,
        channels,
        2,
    )
    assert enc.output_size == 32 and enc(torch.rand(2, channels, 16, 16)).shape == (2, 32)
    problem = image_encoder_problem(cfg, _meta((channels, 16, 12)))
    assert problem is not None and "square" in problem
    checkpointed = build_image_encoder(
        cfg.model_copy(update={"gradient_checkpointing": True}), _meta((channels, 16, 16))
    )
    assert checkpointed.model.is_activation_checkpointing and not enc.model.is_activation_checkpointing
    checkpointed(torch.rand(2, channels, 16, 16)).sum().backward()


def test_vit_legacy_pretrained_loads_the_saved_folder_and_freezes(tiny_vit_dir):
    from transformers import ViTModel

    saved = ViTModel.from_pretrained(tiny_vit_dir)
    cfg = ViTLegacyEncoder(pretrained_model=str(tiny_vit_dir), trainable=False)
    assert image_encoder_problem(cfg, _meta((3, 32, 32))) is None
    enc = build_image_encoder(cfg, _meta((3, 32, 32)))
    assert torch.equal(enc.model.layers[1].mlp.fc2.weight, saved.layers[1].mlp.fc2.weight)
    assert not any(p.requires_grad for p in enc.parameters())
    enc.train()
    assert not enc.model.training  # a frozen model keeps its dropout off, as Ludwig's FreezeModule
    from ludwig_hpo.train.strategy import transformer_blocks

    assert [type(b).__name__ for b in transformer_blocks(enc)] == ["ViTEmbeddings", "ViTLayer", "ViTLayer"]
    x = torch.rand(2, 3, 32, 32)
    assert torch.allclose(enc(x), saved(pixel_values=x).pooler_output, atol=1e-6)
    problem = image_encoder_problem(cfg, _meta((3, 24, 24)))
    assert problem is not None and "height: 32, width: 32" in problem
    problem = image_encoder_problem(cfg, _meta((1, 32, 32)))
    assert problem is not None and "num_channels: 3" in problem


def test_auto_transformer_applies_the_processors_mean_std_and_interpolates(tiny_vit_dir):
    from transformers import ViTModel

    cfg = AutoVisionEncoder(pretrained_model_name_or_path=str(tiny_vit_dir))
    enc = build_image_encoder(cfg, _meta((3, 32, 32)))
    saved = ViTModel.from_pretrained(tiny_vit_dir).eval()
    enc.eval()
    x = torch.rand(2, 3, 32, 32)
    mean, std = torch.tensor([0.5, 0.5, 0.5]), torch.tensor([0.5, 0.5, 0.5])  # the saved ViTImageProcessor's
    expected = saved(pixel_values=(x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)).pooler_output
    assert enc.standardize and torch.allclose(enc(x), expected, atol=1e-5)
    small = build_image_encoder(cfg, _meta((3, 16, 16)))  # position embeddings interpolated to 2x2 patches
    assert small(torch.rand(2, 3, 16, 16)).shape == (2, 32)
    mean_pool = build_image_encoder(cfg.model_copy(update={"pooling": "mean"}), _meta((3, 32, 32))).eval()
    tokens = saved(pixel_values=(x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)).last_hidden_state
    assert torch.allclose(mean_pool(x), tokens.mean(dim=1), atol=1e-5)
    fresh = build_image_encoder(cfg.model_copy(update={"use_pretrained": False}), _meta((3, 32, 32)))
    assert not torch.equal(fresh.model.pooler.dense.weight, saved.pooler.dense.weight)
    # standardize_image: imagenet1k standardized the pixels already: not a second time
    once = build_image_encoder(cfg, _meta((3, 32, 32), imagenet1k=1.0)).eval()
    assert not once.standardize and torch.allclose(once(x), saved(pixel_values=x).pooler_output, atol=1e-5)


def test_dinov2_loads_a_saved_dinov2(tmp_path):
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    config = Dinov2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, patch_size=8, image_size=32
    )
    Dinov2Model(config).save_pretrained(tmp_path / "dino")
    cfg = DINOv2Encoder(pretrained_model_name_or_path=str(tmp_path / "dino"))
    assert image_encoder_problem(cfg, _meta((3, 24, 40))) is None  # DINOv2 interpolates its positions
    enc = build_image_encoder(cfg, _meta((3, 24, 40)))
    assert type(enc.model).__name__ == "Dinov2Model" and enc(torch.rand(2, 3, 24, 40)).shape == (2, 32)


def test_a_missing_model_folder_is_one_line_and_a_hub_id_is_not_fetched(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    feat = _feature(type="auto_transformer", pretrained_model_name_or_path=str(tmp_path / "missing"))
    with pytest.raises(ConfigError) as info:
        check_image_encoders([feat], {"img": _meta((3, 32, 32))}, "sweep.yaml")  # type: ignore[arg-type]
    assert "not found" in str(info.value) and info.value.fix and "\n" not in str(info.value)
    # a hub id not in the local cache: no download here (the check of every named model asks the hub)
    assert image_encoder_problem(DINOv2Encoder(), _meta((3, 32, 32))) is None


def test_written_encoder_sizes_must_match_the_prepared_images():
    feat = _feature(type="mlp_mixer", patch_size=4, num_channels=3)
    with pytest.raises(ConfigError) as info:
        check_image_encoders([feat], {"img": _meta((1, 16, 16))}, "sweep.yaml")  # type: ignore[arg-type]
    assert "preprocessing num_channels: 3" in (info.value.fix or "")
    ok = _feature(type="stacked_cnn", height=16, width=16, num_channels=1, padding="same")
    check_image_encoders([ok], {"img": _meta((1, 16, 16))}, "sweep.yaml")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "hint"), [("alexnet", "vit"), ("convnext", "auto_transformer"), ("_resnet_legacy", "resnet")]
)
def test_encoders_not_built_are_refused_naming_the_built_ones(kind, hint):
    with pytest.raises(ValidationError, match="not supported yet") as info:
        _feature(type=kind)
    assert hint in info.value.errors()[0]["ctx"]["error"].fix


def test_output_attentions_is_refused_not_ignored():
    with pytest.raises(ValueError, match="output_attentions"):
        _feature(type="_vit_legacy", output_attentions=True)


def _fit(enc: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[float, float]:
    head = nn.Linear(int(enc.output_size), 2)
    params = [p for p in [*enc.parameters(), *head.parameters()] if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-3)
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(head(enc(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses[0], losses[-1]


@pytest.mark.parametrize(
    "cfg",
    [
        ResNetEncoder(model_variant=18, use_pretrained=False),
        MLPMixerEncoder(patch_size=4, embed_size=16, token_size=8, channel_dim=8, num_layers=1),
        ViTLegacyEncoder(
            use_pretrained=False,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            patch_size=4,
        ),
    ],
    ids=lambda c: c.type,
)
def test_training_a_few_steps_lowers_the_loss(cfg):
    torch.manual_seed(0)
    x = torch.rand(4, 3, 16, 16)
    y = torch.tensor([0, 1] * 2)
    x[y == 1, 0] += 1.0  # a red channel tells the classes apart
    enc = build_image_encoder(cfg, _meta((3, 16, 16)))
    first, last = _fit(enc, x, y, steps=6)
    assert last < first


def test_model_folder_is_not_a_text_and_image_model(tmp_path: Path):
    from transformers import CLIPConfig, CLIPModel

    CLIPModel(
        CLIPConfig(
            text_config={"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32},
            vision_config={
                "hidden_size": 16,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 32,
                "image_size": 16,
                "patch_size": 8,
            },
            projection_dim=8,
        )
    ).save_pretrained(tmp_path / "clip")
    cfg = AutoVisionEncoder(pretrained_model_name_or_path=str(tmp_path / "clip"))
    problem = image_encoder_problem(cfg, _meta((3, 16, 16)))
    assert problem is not None and "use encoder type clip" in problem


def test_ludwigs_old_resnet_and_vit_keys_pick_the_old_encoders():
    vit = _feature(type="vit", num_hidden_layers=2, hidden_size=16, num_attention_heads=2, use_pretrained=False)
    assert isinstance(vit.encoder, ViTLegacyEncoder) and vit.encoder.num_hidden_layers == 2
    with pytest.raises(ValidationError, match="'_resnet_legacy' is not supported yet"):
        _feature(type="resnet", resnet_size=50)
    assert isinstance(_feature(type="resnet", model_variant=18).encoder, ResNetEncoder)


def test_vit_is_torchvisions_vision_transformer_with_its_state_dict_names(tmp_path):
    torch.manual_seed(0)
    cfg = ViTEncoder(model_variant="b_16", use_pretrained=False)
    enc = build_image_encoder(cfg, _meta((3, 32, 32)))
    block = ["ln_1.weight", "ln_1.bias", "self_attention.in_proj_weight", "self_attention.in_proj_bias"]
    block += ["self_attention.out_proj.weight", "self_attention.out_proj.bias", "ln_2.weight", "ln_2.bias"]
    block += ["mlp.0.weight", "mlp.0.bias", "mlp.3.weight", "mlp.3.bias"]
    expected = ["class_token", "conv_proj.weight", "conv_proj.bias", "encoder.pos_embedding"]
    expected += [f"encoder.layers.encoder_layer_{i}.{k}" for i in range(12) for k in block]
    expected += ["encoder.ln.weight", "encoder.ln.bias"]
    assert list(enc.model.state_dict()) == expected
    assert enc.model.encoder.pos_embedding.shape == (1, 5, 768)  # 2x2 patches of 16 and the class token
    assert enc.output_size == 768 and enc(torch.rand(2, 3, 32, 32)).shape == (2, 768)
    from ludwig_hpo.train.strategy import transformer_blocks

    assert [type(b).__name__ for b in transformer_blocks(enc)] == ["EncoderBlock"] * 12  # one FSDP unit each
    gray = build_image_encoder(ViTEncoder(model_variant="b_32", use_pretrained=False), _meta((1, 32, 32)))
    assert gray.model.conv_proj.in_channels == 1 and gray(torch.rand(2, 1, 32, 32)).shape == (2, 768)
    problem = image_encoder_problem(cfg, _meta((3, 32, 24)))
    assert problem is not None and "square images of a whole number of 16-pixel patches" in problem
    pretrained = ViTEncoder(model_cache_dir=str(tmp_path))
    problem = image_encoder_problem(pretrained, _meta((3, 32, 32)))
    assert problem is not None and "height: 224, width: 224" in problem
    problem = image_encoder_problem(pretrained, _meta((3, 224, 224)))
    assert problem is not None and "vit_b_16-c867db91.pth" in problem
