"""What a streamed sweep cannot do yet, refused in one line before anything is read: every
refusal here needs the whole dataset in one place (image sizes, neighbouring rows, the most
frequent of every distinct text cell, a permutation of every row). Pure; runs in the driver.
"""

from __future__ import annotations

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.rows import features_of, global_preprocessing, preprocessing_of
from ludwig_hpo.errors import DataError

#: Feature types a streamed dataset fits and applies batch by batch (text: inputs; the
#: config refuses a text output of an ecd model).
STREAMED_TYPES = ("number", "binary", "category", "text")
_FIX = "or set dataset.streaming: false to load the dataset in memory"


def check_streamable(cfg: SweepConfig) -> None:
    """Refuse what streaming does not support, naming the key.

    Raises:
        DataError: an LLM sweep, a feature type other than number, binary, category and text,
            ``bfill`` / ``ffill`` missing values, a text input's ``fill_with_mode``, an
            ``outlier_strategy`` of ``bfill`` / ``ffill`` / ``drop_row``, sampling or class
            rebalancing of the training split.
    """
    if getattr(cfg, "model_type", "ecd") != "ecd":
        raise DataError("an llm sweep does not stream its dataset yet", key="dataset.streaming", fix=_FIX[3:])
    for section, feat in features_of(cfg):
        key = f"{section}[{feat.name}]"
        if feat.type not in STREAMED_TYPES:
            raise DataError(
                f"a streamed dataset prepares {', '.join(STREAMED_TYPES)} features; {feat.type} needs a pass "
                "over the whole column",
                key=key,
                fix=f"drop the feature, {_FIX}",
            )
        prep = preprocessing_of(feat, section)
        if prep.missing_value_strategy in ("bfill", "ffill"):
            raise DataError(
                f"missing_value_strategy {prep.missing_value_strategy} fills from neighbouring rows, which a "
                "streamed dataset does not keep in order",
                key=f"{key}.preprocessing.missing_value_strategy",
                fix=f"use fill_with_const, fill_with_mode or drop_row, {_FIX}",
            )
        if feat.type == "text" and prep.missing_value_strategy == "fill_with_mode":
            raise DataError(
                "missing_value_strategy fill_with_mode of a text feature counts every distinct cell, "
                "which a streamed dataset does not keep",
                key=f"{key}.preprocessing.missing_value_strategy",
                fix=f"use fill_with_const or drop_row, {_FIX}",
            )
        outliers = getattr(prep, "outlier_strategy", None)
        if outliers in ("bfill", "ffill", "drop_row"):
            why = "fills from neighbouring rows" if outliers != "drop_row" else "drops rows the fit then leaves out"
            raise DataError(
                f"outlier_strategy {outliers} {why}, which a streamed dataset does not support yet",
                key=f"{key}.preprocessing.outlier_strategy",
                fix=f"use fill_with_const, fill_with_mean or fill_with_mode, {_FIX}",
            )
    glob = global_preprocessing(cfg)
    if glob.sample_ratio < 1 or glob.sample_size is not None:
        raise DataError(
            "sampling rows needs every row's position, which a streamed dataset does not have",
            key="preprocessing.sample_ratio" if glob.sample_ratio < 1 else "preprocessing.sample_size",
            fix=f"remove it, {_FIX}",
        )
    if glob.oversample_minority is not None or glob.undersample_majority is not None:
        key = "oversample_minority" if glob.oversample_minority is not None else "undersample_majority"
        raise DataError(
            "rebalancing the training split is not supported on a streamed dataset yet",
            key=f"preprocessing.{key}",
            fix=f"remove it, {_FIX}",
        )
