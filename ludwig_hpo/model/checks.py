"""Checks of the model a sweep file describes against its prepared data, run once in the driver
before any trial starts, so that a mismatch is one line rather than a failed trial."""

from __future__ import annotations

from collections.abc import Mapping

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.model.encoders_image import check_image_encoders
from ludwig_hpo.model.losses import check_losses


def check_prepared(cfg: SweepConfig, meta: Mapping[str, FeatureMeta], source: str) -> None:
    """Every output's loss resolved against the data's classes, and every image ``stacked_cnn``
    against the prepared image size. Driver.

    Raises:
        ConfigError: naming ``source`` (the sweep file), the key and the fix.
    """
    check_losses(cfg.output_features, meta, source)
    check_image_encoders(cfg.input_features, meta, source)
