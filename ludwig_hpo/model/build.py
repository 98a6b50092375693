"""The declarative model: encoders -> combiner -> output heads (Ludwig's ECD)."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.combiners import AUX_LOSS, EncodedInput, build_combiner
from ludwig_hpo.model.combiners.concat import ConcatCombiner
from ludwig_hpo.model.encoders import PassthroughEncoder, build_encoder
from ludwig_hpo.model.image_input import PixelScaling
from ludwig_hpo.model.init import ludwig_default_init
from ludwig_hpo.model.outputs import OutputHeads, _module_key

__all__ = ["AUX_LOSS", "ECDModel", "build_model", "module_key"]


def module_key(name: str) -> str:
    """A feature's name as a key of the model's ``nn.ModuleDict`` (torch refuses a ``.`` in a
    submodule's name): ``.`` as ``%2E`` and ``%`` as ``%25``, the name itself without either.
    The keys are also the state dict's, so names without them keep the keys they always had."""
    return _module_key(name)


def _encoded_input(feature_type: str, name: str, encoder: nn.Module, meta: FeatureMeta) -> EncodedInput:
    """What the combiner is told of one encoder: its width and, for a sequence encoder
    (``sequence = True``, (batch, length, width)), the length (the prepared array's, ``meta.shape[0]``)."""
    length = int(getattr(encoder, "length", meta.shape[0])) if getattr(encoder, "sequence", False) else None
    return EncodedInput(name=name, type=feature_type, width=cast(int, encoder.output_size), length=length)


class ECDModel(nn.Module):
    """Encoder-combiner-decoder model built from a sweep config.

    ``forward(inputs)`` takes ``{input feature name: batch tensor}`` (shapes as in
    :class:`~ludwig_hpo.data.PreparedData`) and returns ``{output feature name: logits}``; while
    training, a combiner with an auxiliary loss (``tabnet``) adds it under :data:`AUX_LOSS`.
    Runs on every rank; parameters come from torch's global RNG in a fixed order (encoders,
    combiner, heads, then Ludwig's initializers over the encoders and heads).
    """

    def __init__(self, cfg: SweepConfig, meta: dict[str, FeatureMeta]) -> None:
        super().__init__()
        self.input_names = [f.name for f in cfg.input_features]
        encoders = {f.name: build_encoder(f, meta[f.name]) for f in cfg.input_features}
        #: width of each input feature's encoding, by feature name
        self.widths: dict[str, int] = {name: cast(int, e.output_size) for name, e in encoders.items()}
        #: features that enter the combiner unchanged (passthrough encoders). They are not
        #: submodules: a table of 30 numbers would otherwise add 30 module calls to every
        #: forward and 30 modules to every state dict, ``train()`` and ``eval()``.
        self.passthrough = frozenset(name for name, e in encoders.items() if isinstance(e, PassthroughEncoder))
        #: the encoders with layers, by feature name
        self.encoders = nn.ModuleDict(
            {module_key(name): e for name, e in encoders.items() if name not in self.passthrough}
        )
        self._names = tuple(self.input_names)
        #: image features, whose stored pixels are scaled to floats on each batch (see ``pixels``)
        self.images = tuple(f.name for f in cfg.input_features if f.type == "image")
        self.pixels = nn.ModuleDict({module_key(n): PixelScaling(meta[n].stats) for n in self.images})
        inputs = [_encoded_input(f.type, f.name, encoders[f.name], meta[f.name]) for f in cfg.input_features]
        self.combiner = build_combiner(cfg.combiner, inputs)
        self.output_names = [f.name for f in cfg.output_features]
        self.heads = OutputHeads(cfg.output_features, meta, cast(int, self.combiner.output_size))
        ludwig_default_init(self.encoders)
        ludwig_default_init(self.heads)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "passthrough" not in self.__dict__:  # pickled without them: every encoder is a module
            self.passthrough = frozenset()
            self._names = tuple(self.input_names)
            self.widths = {name: cast(int, e.output_size) for name, e in self.encoders.items()}
        if "images" not in self.__dict__:  # pickled when image inputs arrived scaled
            self.images = ()
            self._modules["pixels"] = nn.ModuleDict()
        if "output_names" not in self.__dict__:  # pickled before feature names could hold a '.'
            self.output_names = list(self.heads.keys())
        heads = self._modules["heads"]
        if not isinstance(heads, OutputHeads):  # pickled when the heads were a plain ModuleDict
            upgraded = OutputHeads.__new__(OutputHeads)
            nn.ModuleDict.__init__(upgraded, dict(cast(nn.ModuleDict, heads).items()))
            upgraded.output_names = list(self.output_names)
            self._modules["heads"] = upgraded
        combiner = self._modules["combiner"]
        if isinstance(combiner, nn.Sequential):  # pickled when concat's layers were a plain Sequential
            self._modules["combiner"] = _legacy_concat(combiner, self.input_names, self.widths)

    def encode(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``{input name: encoder output}`` in input order (passthrough inputs as they are)."""
        if self.images:  # stored pixels (uint8) -> the floats the image encoders take
            inputs = {**inputs, **{n: self.pixels[module_key(n)](inputs[n]) for n in self.images}}
        return {
            n: inputs[n] if n in self.passthrough else self.encoders[module_key(n)](inputs[n]) for n in self.input_names
        }

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        table = getattr(inputs, "table", None)  # ludwig_hpo.train.data.Columns
        combiner = self.combiner
        aux: torch.Tensor | None = None
        with_loss = getattr(combiner, "forward_with_loss", None)  # tabnet's: (hidden, auxiliary loss)
        if (
            table is not None
            and isinstance(combiner, ConcatCombiner)
            and len(self.passthrough) == len(self.input_names)
            and getattr(inputs, "names", None) == self._names
        ):
            h = combiner.fc(table)  # the table is the concatenation of its columns, already made
        elif self.training and with_loss is not None:
            h, aux = with_loss(self.encode(inputs))
        else:
            h = combiner(self.encode(inputs))
        out: dict[str, torch.Tensor] = self.heads(h)
        if aux is not None:
            out[AUX_LOSS] = aux
        return out


def _legacy_concat(layers: nn.Sequential, names: list[str], widths: dict[str, int]) -> ConcatCombiner:
    """A concat combiner around the (Linear, ReLU, Dropout) blocks of a model pickled before
    combiners were modules of their own."""
    legacy = ConcatCombiner.__new__(ConcatCombiner)
    nn.Module.__init__(legacy)
    legacy.names = list(names)
    legacy.flatten_inputs = False
    legacy.fc = layers  # type: ignore[assignment]  # a Sequential maps (batch, width) as the stack does
    linears = [m for m in layers if isinstance(m, nn.Linear)]
    legacy.output_size = linears[-1].out_features if linears else sum(widths[n] for n in names)
    return legacy


def build_model(cfg: SweepConfig, meta: dict[str, FeatureMeta]) -> nn.Module:
    """Build the model of one trial's config: an :class:`ECDModel`, or for ``model_type: llm``
    an :class:`~ludwig_hpo.model.llm.LLMModel` (the base model's weights cached per process);
    parameters are initialized from torch's global RNG. Every rank."""
    if cfg.is_llm:
        from ludwig_hpo.model.llm import build_llm

        return build_llm(cfg, meta)
    return ECDModel(cfg, meta)
