"""Output heads: Ludwig's output features' decoders (``ludwig/features/base_feature.OutputFeature``
and ``ludwig/decoders/generic_decoders.py``).

Each head reduces a sequence combiner's (batch, length, width) output by its ``reduce_input``
(a (batch, width) output passes unchanged), concatenates the hidden states of the outputs it
depends on (``dependencies``, in the order written), runs its fully connected stack (none by
default) and projects: a regressor to one value, a classifier to one logit per class, a
projector to the vector's size (then its ``activation`` and ``clip``). Weights are Ludwig's
initializers (``xavier_uniform`` and zero biases unless configured).
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from ludwig_hpo.config.outputs import AnyOutput, dependency_order
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.combiners.base import SequenceReducer
from ludwig_hpo.model.combiners.fc import FCStack, activation, layer_specs
from ludwig_hpo.model.init import init_linear
from ludwig_hpo.model.losses import OutputLoss, OutputLosses, num_classes
from ludwig_hpo.model.metrics import OutputMetrics, roc_auc

__all__ = ["OutputHead", "OutputHeads", "OutputLosses", "OutputMetrics", "roc_auc"]


class OutputHead(nn.Module):
    """One output's decoder: ``hidden(h, deps)`` -> (batch, hidden_size) after the reduction,
    the dependencies and the fully connected stack; ``project(hidden)`` -> logits: category
    and set (batch, classes), vector (batch, size), binary and number (batch,).

    Args:
        feature: the output feature's config; meta: its prepared metadata (classes, size).
        in_size: the combiner's output width; dep_size: the summed hidden sizes of its
            dependencies.
    """

    #: the heads apply Ludwig's initializers themselves (``model.init.ludwig_default_init`` skips them)
    ludwig_initialized = True

    def __init__(self, feature: AnyOutput, meta: FeatureMeta, in_size: int, dep_size: int = 0) -> None:
        super().__init__()
        self.kind = feature.type  # not ``type``: that is nn.Module's dtype-cast method
        self.dependencies = list(feature.dependencies)
        self.reducer = SequenceReducer(feature.reduce_input, 1, in_size)
        self.dep_reducer = SequenceReducer(feature.reduce_dependencies, 1, in_size) if self.dependencies else None
        d = feature.decoder
        defaults = {
            "output_size": d.stack_output_size,
            "use_bias": d.fc_use_bias,
            "weights_initializer": d.fc_weights_initializer,
            "bias_initializer": d.fc_bias_initializer,
            "norm": d.fc_norm,
            "norm_params": d.fc_norm_params,
            "activation": d.stack_activation,
            "dropout": d.stack_dropout,
        }
        self.stack = FCStack(in_size + dep_size, layer_specs(d.fc_layers, d.num_fc_layers, defaults))
        #: width of :meth:`hidden`'s output, what a dependent output concatenates
        self.hidden_size = self.stack.output_size
        # Ludwig's MLPClassifier: its own layers between the stack and the projection
        mlp = {
            "output_size": d.output_size or 256,
            "use_bias": d.use_bias,
            "weights_initializer": d.weights_initializer,
            "bias_initializer": d.bias_initializer,
            "norm": None,
            "norm_params": None,
            "activation": d.activation if "activation" in d.model_fields_set else "relu",
            "dropout": d.dropout or 0.0,
        }
        n_mlp = d.num_fc_layers if d.type == "mlp_classifier" else 0
        self.mlp = FCStack(self.hidden_size, layer_specs(None, n_mlp, mlp)) if n_mlp else None
        proj_in = self.mlp.output_size if self.mlp is not None else self.hidden_size
        n_out = num_classes(feature, meta) if feature.type in ("category", "set", "vector") else 1
        self.projection = nn.Linear(proj_in, n_out, bias=d.use_bias)
        init_linear(self.projection, d.weights_initializer, d.bias_initializer)
        self.out_activation = activation(d.activation) if feature.type == "vector" and d.activation else None
        self.clip = tuple(d.clip) if feature.type == "vector" and d.clip is not None else None

    def hidden(self, h: torch.Tensor, deps: list[torch.Tensor]) -> torch.Tensor:
        if h.dim() == 3:
            if self.reducer.keeps_sequence:
                raise ValueError(f"a {self.kind} output cannot take a sequence: set its reduce_input (e.g. sum)")
            h = self.reducer(h)
        if deps:
            reduce = self.dep_reducer
            h = torch.cat([h, *(reduce(x) if x.dim() == 3 and reduce is not None else x for x in deps)], dim=-1)
        return self.stack(h)

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        mlp = self.__dict__["_modules"].get("mlp")  # absent in a head pickled before it existed
        out = self.projection(mlp(hidden) if mlp is not None else hidden)
        if self.out_activation is not None:
            out = self.out_activation(out)
        if self.clip is not None:
            out = out.clamp(self.clip[0], self.clip[1])
        return out if self.kind in ("category", "set", "vector") else out.squeeze(-1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Logits of a head without dependencies (see :class:`OutputHeads` for the others)."""
        if "net" in self.__dict__["_modules"]:  # a head pickled as one Sequential
            out = self._modules["net"](h)  # type: ignore[misc]  # the Sequential it was pickled with
            return out if self.kind == "category" else out.squeeze(-1)
        return self.project(self.hidden(h, []))

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("type"), str):  # a head pickled with its kind under ``type``
            state["kind"] = state.pop("type")
        state.setdefault("dependencies", [])
        super().__setstate__(state)


class OutputHeads(nn.ModuleDict):
    """Every output feature's head, keyed by :func:`~ludwig_hpo.model.build.module_key` of its name.

    ``forward(hidden)`` takes the combiner's output, (batch, width) or (batch, length, width),
    and returns ``{output feature name: logits}`` (shapes as :class:`OutputHead`), computing
    the heads in dependency order. ``output_losses`` and ``output_metrics`` are each output's loss and
    metrics, resolved against the same metadata. Runs on every rank.

    Raises:
        ConfigError: class weights or similarities that do not fit the data's classes.
    """

    def __init__(self, output_features: list[AnyOutput], meta: dict[str, FeatureMeta], in_size: int) -> None:
        by_name = {f.name: f for f in output_features}
        heads: dict[str, OutputHead] = {}
        for name in dependency_order(output_features):
            f = by_name[name]
            dep_size = sum(heads[d].hidden_size for d in f.dependencies)
            heads[name] = OutputHead(f, meta[name], in_size, dep_size)
        super().__init__({_module_key(f.name): heads[f.name] for f in output_features})
        self.output_names = [f.name for f in output_features]
        # attributes prefixed ``output_``: a feature (a submodule) may be named ``order`` or ``metrics``
        self.output_order = list(heads)
        self.output_losses = OutputLosses(output_features, meta)
        self.output_metrics = {
            f.name: OutputMetrics(f, meta.get(f.name), cast(OutputLoss, self.output_losses.losses[f.name]))
            for f in output_features
        }

    def forward(self, hidden: torch.Tensor) -> dict[str, torch.Tensor]:
        order = self.__dict__.get("output_order") or self.output_names
        hiddens: dict[str, torch.Tensor] = {}
        logits: dict[str, torch.Tensor] = {}
        for name in order:
            head = self[_module_key(name)]
            assert isinstance(head, OutputHead)
            if "net" in head.__dict__["_modules"]:
                logits[name] = head(hidden)
                continue
            hiddens[name] = head.hidden(hidden, [hiddens[d] for d in head.dependencies])
            logits[name] = head.project(hiddens[name])
        return {name: logits[name] for name in self.output_names}


def predicted_values(heads: nn.Module, name: str, logits: torch.Tensor) -> torch.Tensor:
    """What output ``name``'s prediction is made of: a number's output clipped to its ``clip``,
    a vector's softmaxed with ``softmax``, any other output's logits unchanged (heads pickled
    without their metrics: unchanged too)."""
    metrics = heads.__dict__.get("output_metrics")
    scorer = metrics.get(name) if isinstance(metrics, dict) else None
    return scorer.predictions(logits) if isinstance(scorer, OutputMetrics) else logits


def _module_key(name: str) -> str:
    """A feature's name as a submodule key (torch refuses a ``.``): ``.`` as ``%2E``, ``%`` as ``%25``;
    a name that is an attribute of ``nn.ModuleDict`` (``type``, ``train``) gets a trailing ``%``."""
    if hasattr(nn.ModuleDict, name):
        return f"{name}%"
    if "." not in name and "%" not in name:
        return name
    return name.replace("%", "%25").replace(".", "%2E")


def output_loss(feature: AnyOutput, meta: FeatureMeta | None = None) -> OutputLoss:
    """The :class:`OutputLoss` of one output feature (``meta`` for class weights by name)."""
    return OutputLoss(feature, meta)


def loss(kind: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean loss over the batch of an output type's default loss: softmax cross entropy
    (category), binary cross entropy on the logit (binary), squared error (number)."""
    if kind == "category":
        return F.cross_entropy(logits, target)
    if kind == "binary":
        return F.binary_cross_entropy_with_logits(logits, target)
    return F.mse_loss(logits, target)


def metric_sums(kind: str, logits: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-batch sums (0-dim float64 tensors) of an output type's default loss and its
    accuracy (category, binary: correct predictions) or ``mae`` (number: absolute errors)."""
    logits, target = logits.detach().float(), target.detach()
    if kind == "category":
        return {
            "loss": F.cross_entropy(logits, target, reduction="sum").double(),
            "accuracy": (logits.argmax(-1) == target).sum().double(),
        }
    if kind == "binary":
        return {
            "loss": F.binary_cross_entropy_with_logits(logits, target.float(), reduction="sum").double(),
            "accuracy": ((torch.sigmoid(logits) >= 0.5).float() == target).sum().double(),
        }
    return {"loss": F.mse_loss(logits, target, reduction="sum").double(), "mae": (logits - target).abs().sum().double()}
