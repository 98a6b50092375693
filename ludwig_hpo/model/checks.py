"""Checks of the model a sweep file describes against its prepared data, run once in the driver
before any trial starts, so that a mismatch is one line rather than a failed trial."""

from __future__ import annotations

from collections.abc import Mapping

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.encoders_image import check_image_encoders
from ludwig_hpo.model.hf_checks import check_models_available, check_text_encoders
from ludwig_hpo.model.losses import check_losses


def check_prepared(
    cfg: SweepConfig, meta: Mapping[str, FeatureMeta], source: str, *, network: bool = True
) -> list[str]:
    """Every output's loss resolved against the data's classes, every image ``stacked_cnn``
    against the prepared image size, every Hugging Face model found (``network``: a hub id not
    cached here must be downloadable; else it is a note) and, when local, checked against the
    prepared text (:mod:`ludwig_hpo.model.hf_checks`); an llm's base model and adapter
    (:mod:`ludwig_hpo.model.llm_checks`). Driver.

    Returns:
        the notes ``hpo validate`` prints (hub ids not checked offline).

    Raises:
        ConfigError: naming ``source`` (the sweep file), the key and the fix.
    """
    check_losses(cfg.output_features, meta, source)
    check_image_encoders(cfg.input_features, meta, source)
    notes = check_models_available(cfg, source, network=network)
    check_text_encoders(cfg.input_features, meta, source)
    if cfg.is_llm:
        from ludwig_hpo.model.llm_checks import check_base_model

        notes += check_base_model(cfg, source, network=network)
    return notes
