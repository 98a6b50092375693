"""The declarative model: encoders -> concat combiner -> output heads (Ludwig's ECD)."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.encoders import PassthroughEncoder, build_encoder
from ludwig_hpo.model.outputs import OutputHeads, _module_key


def module_key(name: str) -> str:
    """A feature's name as a key of the model's ``nn.ModuleDict`` (torch refuses a ``.`` in a
    submodule's name): ``.`` as ``%2E`` and ``%`` as ``%25``, the name itself without either.
    The keys are also the state dict's, so names without them keep the keys they always had."""
    return _module_key(name)


class ECDModel(nn.Module):
    """Encoder-combiner-decoder model built from a sweep config.

    ``forward(inputs)`` takes ``{input feature name: batch tensor}`` (shapes as in
    :class:`~ludwig_hpo.data.PreparedData`) and returns ``{output feature name: logits}``.
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
        width = sum(self.widths.values())
        c = cfg.combiner
        layers: list[nn.Module] = []
        for _ in range(c.num_fc_layers):
            layers += [nn.Linear(width, c.output_size), nn.ReLU(), nn.Dropout(c.dropout)]
            width = c.output_size
        self.combiner = nn.Sequential(*layers)
        self.output_names = [f.name for f in cfg.output_features]
        self.heads = OutputHeads(cfg.output_features, meta, width)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "passthrough" not in self.__dict__:  # pickled without them: every encoder is a module
            self.passthrough = frozenset()
            self._names = tuple(self.input_names)
            self.widths = {name: cast(int, e.output_size) for name, e in self.encoders.items()}
        if "output_names" not in self.__dict__:  # pickled before feature names could hold a '.'
            self.output_names = list(self.heads.keys())
        heads = self._modules["heads"]
        if not isinstance(heads, OutputHeads):  # pickled when the heads were a plain ModuleDict
            upgraded = OutputHeads.__new__(OutputHeads)
            nn.ModuleDict.__init__(upgraded, dict(cast(nn.ModuleDict, heads).items()))
            upgraded.output_names = list(self.output_names)
            self._modules["heads"] = upgraded

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        table = getattr(inputs, "table", None)  # ludwig_hpo.train.data.Columns
        if (
            table is not None
            and len(self.passthrough) == len(self.input_names)
            and getattr(inputs, "names", None) == self._names
        ):
            h = table  # the concatenation of its columns, already made
        else:
            h = torch.cat(
                [
                    inputs[n] if n in self.passthrough else self.encoders[module_key(n)](inputs[n])
                    for n in self.input_names
                ],
                dim=-1,
            )
        h = self.combiner(h)
        return self.heads(h)


def build_model(cfg: SweepConfig, meta: dict[str, FeatureMeta]) -> ECDModel:
    """Build the model of one trial's config; parameters are initialized from torch's global RNG."""
    return ECDModel(cfg, meta)
