"""A trained model's predictions of prepared rows, as Ludwig names and shapes them
(``LudwigModel.predict``): per output feature ``<name>_predictions`` and, for classifiers,
``<name>_probabilities`` (every class's, in class order), ``<name>_probability`` (the predicted
class's) and one ``<name>_probabilities_<class>`` column per class.

| output | ``_predictions`` | probability columns |
|---|---|---|
| category | the class label | ``_probabilities`` (list), ``_probability``, ``_probabilities_<class>`` |
| binary | True / False (probability >= ``threshold``), or the column's two labels | ``_probabilities`` ([false, true]), ``_probability``, ``_probabilities_False`` / ``_True`` (or ``_<label>``) |
| number | the value, in the column's units (a normalized target denormalized) | none |
| set | the list of tokens whose probability >= ``threshold`` | ``_probabilities`` (list), ``_probabilities_<token>`` |
| vector | the list of values | none |

Runs in whatever process scores the model (CPU, one process, no Ray).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.numbers import denormalize
from ludwig_hpo.data.preprocess import PreparedData
from ludwig_hpo.data.rows import preprocessing_of
from ludwig_hpo.model.outputs import predicted_values

#: Rows per forward pass.
BATCH_ROWS = 512


@torch.no_grad()
def output_values(model: torch.nn.Module, data: PreparedData, batch_rows: int = BATCH_ROWS) -> dict[str, np.ndarray]:
    """Each output's values for every prepared row, in row order: category (N, C) class
    probabilities, binary (N,) probability of true, set (N, V) token probabilities, number (N,)
    and vector (N, D) values as the model predicts them (a normalized number still normalized).
    Calibrated outputs use their fitted temperature (:func:`predicted_values`)."""
    model.eval()
    heads = model.get_submodule("heads")
    n = len(next(iter(data.inputs.values())))
    kinds = {name: m.type for name, m in data.meta.items()}
    parts: dict[str, list[np.ndarray]] = {}
    for start in range(0, n, batch_rows):
        # a copy: the rows given may be read-only arrays
        x = {k: torch.tensor(v[start : start + batch_rows]) for k, v in data.inputs.items()}
        logits = model(x)
        for name in [k for k in logits if k in kinds]:  # the outputs (not an auxiliary loss)
            z = predicted_values(heads, name, logits[name].float())  # clip, softmax, temperature
            kind = kinds[name]
            if kind == "category":
                v = torch.softmax(z, dim=-1)
            elif kind in ("binary", "set"):
                v = torch.sigmoid(z)
            else:
                v = z
            parts.setdefault(name, []).append(v.numpy())
    return {k: np.concatenate(v) for k, v in parts.items()}


def prediction_frame(
    values: dict[str, np.ndarray],
    cfg: SweepConfig,
    data: PreparedData,
    binary_labels: dict[str, tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """The Ludwig-named prediction columns (see the module's table) of :func:`output_values`,
    one row per prepared row, outputs in the config's order. ``binary_labels``: a binary
    output's (false, true) text labels, which its predictions and probability columns are
    named by instead of ``False`` / ``True`` (Ludwig's ``bool2str``). Pure."""
    cols: dict[str, Any] = {}
    for out in cfg.output_features:
        v, meta = values[out.name], data.meta[out.name]
        p = f"{out.name}_"
        if out.type == "category":
            classes = [str(c) for c in meta.vocab]
            top = v.argmax(axis=1)
            cols[p + "predictions"] = [classes[i] for i in top]
            cols[p + "probabilities"] = [row.tolist() for row in v]
            cols[p + "probability"] = v.max(axis=1)
            for j, c in enumerate(classes):
                cols[p + f"probabilities_{c}"] = v[:, j]
        elif out.type == "binary":
            pred = v >= out.threshold
            labels = (binary_labels or {}).get(out.name)
            no, yes = labels or ("False", "True")
            cols[p + "predictions"] = pred if labels is None else np.where(pred, yes, no)
            cols[p + "probabilities"] = [[1.0 - float(q), float(q)] for q in v]
            cols[p + "probability"] = np.where(pred, v, 1.0 - v)
            cols[p + f"probabilities_{no}"] = 1.0 - v
            cols[p + f"probabilities_{yes}"] = v
        elif out.type == "number":
            prep = preprocessing_of(out, "output_features")
            cols[p + "predictions"] = denormalize(v.astype(np.float64), prep.normalizer, meta.stats)
        elif out.type == "set":
            vocab = [str(t) for t in meta.vocab]
            cols[p + "predictions"] = [[vocab[j] for j in np.flatnonzero(row >= out.threshold)] for row in v]
            cols[p + "probabilities"] = [row.tolist() for row in v]
            for j, t in enumerate(vocab):
                cols[p + f"probabilities_{t}"] = v[:, j]
        else:  # vector
            cols[p + "predictions"] = [row.tolist() for row in v]
    return pd.DataFrame(cols)
