"""Ludwig's image ``resnet`` encoder: torchvision's ResNet (He et al. 2015, the v1.5 bottleneck
with its stride on the 3x3 convolution), written in torch with torchvision's module names, so a
torchvision state dict (``resnet50-11ad3fa6.pth``, ...) loads into it unchanged.

Runs on every rank; parameters come from torch's global RNG in construction order, initialized
as torchvision initializes them (convolutions kaiming-normal, fan-out; batch norms 1 and 0).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ludwig_hpo.config.encoders_image import ResNetEncoder as ResNetConfig
from ludwig_hpo.config.encoders_image import ViTEncoder as ViTConfig
from ludwig_hpo.model.image_input import IMAGENET1K_MEAN, IMAGENET1K_STD


class BasicBlock(nn.Module):
    """torchvision's ``BasicBlock`` (ResNet-18 / 34): two 3x3 convolutions and the shortcut."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    """torchvision's ``Bottleneck`` (ResNet-50 / 101 / 152): 1x1, 3x3 (strided), 1x1 to 4x planes."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


#: Each variant's block and blocks per stage (torchvision's ``resnet18`` ... ``resnet152``).
VARIANTS: dict[int, tuple[type[BasicBlock] | type[Bottleneck], tuple[int, int, int, int]]] = {
    18: (BasicBlock, (2, 2, 2, 2)),
    34: (BasicBlock, (3, 4, 6, 3)),
    50: (Bottleneck, (3, 4, 6, 3)),
    101: (Bottleneck, (3, 4, 23, 3)),
    152: (Bottleneck, (3, 8, 36, 3)),
}


class ResNet(nn.Module):
    """torchvision's ``ResNet`` without its classification layer: (batch, in_channels, H, W) ->
    (batch, 512 x block expansion) after the global average pool; any H, W of at least 1 pixel
    after the stem's two stride-2 steps work (the pool adapts)."""

    def __init__(self, variant: int, in_channels: int = 3) -> None:
        super().__init__()
        block, counts = VARIANTS[variant]
        self.inplanes = 64
        self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._stage(block, 64, counts[0], 1)
        self.layer2 = self._stage(block, 128, counts[1], 2)
        self.layer3 = self._stage(block, 256, counts[2], 2)
        self.layer4 = self._stage(block, 512, counts[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.output_size = 512 * block.expansion
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _stage(self, block: type[BasicBlock] | type[Bottleneck], planes: int, count: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers: list[nn.Module] = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, count)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


def weights_path(cfg: ResNetConfig | ViTConfig) -> Path:
    """Where torchvision keeps a ``resnet`` or ``vit`` variant's default weights: ``<model_cache_dir>/hub/checkpoints/``
    (Ludwig points ``TORCH_HOME`` at ``model_cache_dir``), else torch.hub's own folder
    (``$TORCH_HOME/hub``, by default ``~/.cache/torch/hub``). Pure apart from reading the
    environment."""
    hub = Path(cfg.model_cache_dir) / "hub" if cfg.model_cache_dir else Path(torch.hub.get_dir())
    return hub / "checkpoints" / cfg.weight_file


def loads_pretrained(cfg: ResNetConfig | ViTConfig) -> bool:
    """Whether the encoder starts from torchvision's weights (``use_pretrained`` and not
    ``saved_weights_in_checkpoint``)."""
    return cfg.use_pretrained and not cfg.saved_weights_in_checkpoint


class TorchvisionBackbone(nn.Module):
    """What ``resnet`` and ``vit`` share around their torchvision network ``self.model``:
    torchvision's default weights read from :func:`weights_path` (the classification head's
    keys, ``head_prefix``, left out), ``trainable: false`` freezing every parameter, and the
    ImageNet mean and std Ludwig's torchvision transforms apply to 3-channel [0, 1] pixels
    (``standardized``: the feature's ``standardize_image: imagenet1k`` did already).
    ``forward``: (batch, C, H, W) or (batch, H, W) -> what ``self.model`` returns. Every rank.

    Raises:
        FileNotFoundError: ``use_pretrained`` and the weights file is not in torch.hub's folder.
    """

    mean: torch.Tensor
    std: torch.Tensor

    def _setup(
        self, model: nn.Module, cfg: ResNetConfig | ViTConfig, channels: int, standardized: bool, head_prefix: str
    ) -> None:
        self.model = model
        if loads_pretrained(cfg):
            path = weights_path(cfg)
            if not path.is_file():
                raise FileNotFoundError(path)
            state = torch.load(path, map_location="cpu", weights_only=True)
            self.model.load_state_dict({k: v for k, v in state.items() if not k.startswith(head_prefix)})
        for p in self.model.parameters():
            p.requires_grad_(cfg.trainable)
        self.standardize = channels == 3 and not standardized
        self.register_buffer("mean", torch.tensor(IMAGENET1K_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET1K_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:
            x = x.unsqueeze(1)
        if self.standardize:
            x = (x - self.mean) / self.std
        return self.model(x)


class ResNetEncoder(TorchvisionBackbone):
    """Ludwig's ``resnet``: (batch, C, H, W) (or (batch, H, W) one-channel) float pixels in
    [0, 1] -> (batch, 512 or 2048). Three-channel images are standardized with ImageNet's mean
    and std first, as Ludwig's torchvision transforms do (unless ``standardized``: the feature's
    ``standardize_image: imagenet1k`` already did); ``trainable: false`` freezes every
    parameter (the batch norms still update their running statistics in training, as Ludwig's).

    The network is ``self.model``, so its state dict keys are torchvision's under ``model.``.

    Raises:
        FileNotFoundError: ``use_pretrained`` and the weights file is not in torch.hub's folder.
        ValueError: pretrained weights for images that do not have 3 channels.
    """

    ludwig_initialized = True

    def __init__(self, cfg: ResNetConfig, channels: int, standardized: bool = False) -> None:
        super().__init__()
        if loads_pretrained(cfg) and channels != 3:
            raise ValueError(f"torchvision's resnet{cfg.model_variant} weights take 3-channel images, not {channels}")
        model = ResNet(cfg.model_variant, channels)
        self._setup(model, cfg, channels, standardized, head_prefix="fc.")
        self.output_size = model.output_size
