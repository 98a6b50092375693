"""The second, small pass of a streamed fit, only for number features with an
``outlier_strategy``: the last training value that is not an outlier (``last_kept`` of
:class:`~ludwig_hpo.data.numbers.FittedNumber`), which needs the fitted statistics first.
Pure; :func:`last_kept_of_batch` runs wherever Ray Data maps a batch, :func:`with_last_kept`
in the driver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.numbers import outlier_mask, parse_numbers
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.data.rows import features_of, preprocessing_of
from ludwig_hpo.data.streaming.fit import drop_mask
from ludwig_hpo.data.streaming.splits import SplitRule, split_codes


def outlier_features(cfg: SweepConfig) -> list[tuple[str, Any]]:
    """The ``(section, feature)`` of every number feature with an ``outlier_strategy``. Pure."""
    return [
        (section, feat)
        for section, feat in features_of(cfg)
        if feat.type == "number" and preprocessing_of(feat, section).outlier_strategy is not None
    ]


def last_kept_of_batch(
    df: pd.DataFrame, cfg: SweepConfig, rule: SplitRule, meta: dict[str, FeatureMeta], origin: DataOrigin
) -> dict[str, tuple[float | None, int]]:
    """Per number feature with an ``outlier_strategy``: the batch's last training value (missing
    cells filled) within ``outlier_threshold`` of the fitted mean (None when none is), and how
    many of the batch's rows (every split) are outliers. Pure."""
    drop, _ = drop_mask(df, cfg)
    if drop.any():
        df = df.iloc[np.flatnonzero(~drop)].reset_index(drop=True)
    train = split_codes(df, rule, origin) == 0
    out: dict[str, tuple[float | None, int]] = {}
    for section, feat in outlier_features(cfg):
        prep = preprocessing_of(feat, section)
        fitted = meta[feat.name]
        x = parse_numbers(df[feat.source_column], f"{section}[{feat.name}]", origin)
        fill = fitted.fitted.get("fill")
        if fill is not None:
            x = np.where(np.isnan(x), fill, x)
        outliers = outlier_mask(x, fitted.stats, prep.outlier_threshold)
        tr = x[train]
        kept = tr[~np.isnan(tr) & ~outlier_mask(np.nan_to_num(tr), fitted.stats, prep.outlier_threshold)]
        out[feat.name] = (float(kept[-1]) if len(kept) else None, int(outliers.sum()))
    return out


def with_last_kept(
    meta: dict[str, FeatureMeta], batches: Iterable[dict[str, tuple[float | None, int]]]
) -> tuple[dict[str, FeatureMeta], dict[str, int]]:
    """``meta`` with each feature's ``last_kept`` (the last non-None of the batches', in dataset
    order), and the outliers counted per feature over every row. Pure."""
    last: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for batch in batches:
        for name, (value, n) in batch.items():
            if value is not None or name not in last:
                last[name] = value if value is not None else last.get(name)
            counts[name] = counts.get(name, 0) + n
    fitted = {
        name: dataclasses.replace(m, fitted={**m.fitted, "last_kept": last[name]}) if name in last else m
        for name, m in meta.items()
    }
    return fitted, counts
