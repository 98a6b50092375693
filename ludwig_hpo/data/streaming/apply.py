"""The fitted preprocessing applied to one streamed batch: raw rows in, the prepared arrays
the worker loop takes out (keys of :mod:`ludwig_hpo.data.streaming.record`). The same
:func:`~ludwig_hpo.data.preprocess.apply_input` / :func:`~ludwig_hpo.data.preprocess.apply_target`
as in memory (a text input: :func:`~ludwig_hpo.data.streaming.text.apply_text`, the
tokenization and padding of :func:`~ludwig_hpo.data.text.encode_text`), so a row is prepared
alike on either path. Pure; runs wherever Ray Data maps
the batch (lazily, as the ranks read it).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta, apply_input, apply_target
from ludwig_hpo.data.streaming.fit import drop_mask, require_columns
from ludwig_hpo.data.streaming.record import FOLD_KEY, input_key, target_key
from ludwig_hpo.data.streaming.splits import SplitRule, fold_codes, split_codes
from ludwig_hpo.data.streaming.text import apply_text


def apply_batch(
    df: pd.DataFrame,
    cfg: SweepConfig,
    rule: SplitRule,
    meta: dict[str, FeatureMeta],
    splits: Collection[int],
    origin: DataOrigin,
) -> dict[str, np.ndarray]:
    """The rows of ``df`` in ``splits`` (0 train, 1 validation, 2 test), prepared with the fitted
    ``meta``: ``input_key(name)`` / ``target_key(name)`` arrays and :data:`FOLD_KEY`, every
    array with one first dimension (the kept rows, in the batch's order).

    Raises:
        DataError: a cell that does not read as its feature's type (see
            :func:`~ludwig_hpo.data.preprocess.apply_input`), naming the file and the column.
    """
    require_columns(df, cfg, rule, origin)
    drop, _ = drop_mask(df, cfg)
    if drop.any():
        df = df.iloc[np.flatnonzero(~drop)].reset_index(drop=True)
    codes = split_codes(df, rule, origin)
    folds = fold_codes(df, rule, codes, origin)
    keep = np.isin(codes, list(splits))
    if not keep.all():
        df, folds = df.iloc[np.flatnonzero(keep)].reset_index(drop=True), folds[keep]
    out: dict[str, np.ndarray] = {FOLD_KEY: folds}
    for feat in cfg.input_features:
        key = f"input_features[{feat.name}]"
        s = df[feat.source_column]
        if feat.type == "text":
            out[input_key(feat.name)] = apply_text(feat, s, meta[feat.name], key, origin)
        else:
            out[input_key(feat.name)], _ = apply_input(feat, s, meta[feat.name], key, origin)
    for target in cfg.output_features:
        key = f"output_features[{target.name}]"
        out[target_key(target.name)], _ = apply_target(target, df[target.source_column], meta[target.name], key, origin)
    return out
