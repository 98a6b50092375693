"""The trained model behind one flat tensor, as MLflow's PyTorch flavour serves it.

MLflow's pyfunc wrapper feeds a model one float32 tensor (a DataFrame's values) and expects
one tensor back; :class:`FlatInputModel` adapts :class:`~ludwig_hpo.model.ECDModel` (a dict
of per-feature tensors in, a dict of logits out) to that: columns in, predictions out.
Inputs are the *prepared* values (see ``best_model/preprocessing.json``): numbers after
normalization, category ids from the training vocabulary, image pixels after scaling, and
one column per element of the other types' prepared rows (a set's or bag's vocabulary
entries, a vector's or timeseries' values, a sequence's token ids, a date's 9 and an h3
cell's 19 components).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.build import ECDModel
from ludwig_hpo.model.outputs import predicted_values

#: Input types fed as one column per element of their prepared row (see :func:`input_columns`).
_MULTI = frozenset({"image", "set", "bag", "vector", "timeseries", "sequence", "text", "date", "h3"})
#: Input types whose prepared values are integer ids or components.
_INTEGER = frozenset({"category", "sequence", "text", "date", "h3"})


def _width(meta: FeatureMeta) -> int:
    return int(np.prod(meta.shape)) if meta.type in _MULTI else 1


def input_columns(input_names: list[str], meta: dict[str, FeatureMeta]) -> list[str]:
    """Column names of the flat input, in order: one per number / binary / category feature,
    ``<feature>[i]`` per element (row-major) of an image, set, bag, vector, timeseries,
    sequence, date or h3 feature's prepared row."""
    cols: list[str] = []
    for name in input_names:
        m = meta[name]
        cols += [f"{name}[{i}]" for i in range(_width(m))] if m.type in _MULTI else [name]
    return cols


def output_columns(output_names: list[str], meta: dict[str, FeatureMeta]) -> list[str]:
    """Column names of the prediction: ``<binary>`` (probability of true), ``<category>[<class>]``
    (class probabilities), ``<set>[<token>]`` (each token's probability), ``<vector>[i]``
    (each element), ``<number>`` (the value)."""
    cols: list[str] = []
    for name in output_names:
        m = meta[name]
        if m.type in ("category", "set"):
            cols += [f"{name}[{v}]" for v in m.vocab]
        elif m.type == "vector":
            cols += [f"{name}[{i}]" for i in range(int(m.shape[0]))]
        else:
            cols.append(name)
    return cols


class FlatInputModel(nn.Module):
    """``forward(x)``: (batch, len(input_columns)) float32 -> (batch, len(output_columns)) float32.

    Args:
        model: the trained model (its weights are shared, not copied).
        meta: the sweep's feature metadata (``PreparedData.meta``).
        output_names: the output features, in sweep-file order.
    """

    def __init__(self, model: ECDModel, meta: dict[str, FeatureMeta], output_names: list[str]) -> None:
        super().__init__()
        self.model = model
        self.inputs = [(n, meta[n].type, tuple(meta[n].shape), _width(meta[n])) for n in model.input_names]
        self.outputs = [(n, meta[n].type) for n in output_names]
        self.input_columns = input_columns(model.input_names, meta)
        self.output_columns = output_columns(output_names, meta)

    def split(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The flat columns as the model's per-feature tensors (shapes of ``PreparedData.inputs``)."""
        out, i = {}, 0
        for name, kind, shape, width in self.inputs:
            cols = x[:, i : i + width]
            i += width
            if kind == "category":
                out[name] = cols[:, 0].round().long()
            elif kind == "image":
                out[name] = cols.reshape(len(x), *shape)
            elif kind in _INTEGER:
                out[name] = cols.round().long()
            else:
                out[name] = cols
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.model(self.split(x.float()))
        parts = []
        for name, kind in self.outputs:
            z = predicted_values(self.model.heads, name, logits[name])  # clip, softmax
            if kind == "category":
                parts.append(torch.softmax(z, dim=-1))
            elif kind == "set":
                parts.append(torch.sigmoid(z))
            elif kind == "vector":
                parts.append(z)
            elif kind == "binary":
                parts.append(torch.sigmoid(z).unsqueeze(-1))
            else:
                parts.append(z.unsqueeze(-1))
        return torch.cat(parts, dim=-1)


def flat_inputs(
    inputs: dict[str, np.ndarray], rows: np.ndarray, input_names: list[str], meta: dict[str, FeatureMeta]
) -> pd.DataFrame:
    """Prepared rows (``PreparedData.inputs`` at ``rows``) as the flat model's input DataFrame."""
    blocks = [np.asarray(inputs[n][rows], dtype=np.float32).reshape(len(rows), -1) for n in input_names]
    return pd.DataFrame(np.concatenate(blocks, axis=1), columns=input_columns(input_names, meta))
