"""``trainer.loss_balancing``: Ludwig's default ``none`` (the loss.weight-weighted sum of the
output losses) is accepted; Ludwig's other strategies are one "not supported yet" line."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ludwig_hpo.config.trainer import TrainerConfig


def test_none_is_ludwigs_default_and_accepted():
    assert TrainerConfig().loss_balancing == "none"
    assert TrainerConfig.model_validate({"loss_balancing": "none"}).loss_balancing == "none"


@pytest.mark.parametrize("strategy", ["log_transform", "uncertainty", "famo", "gradnorm", "nash_mtl", "pareto_mtl"])
def test_other_strategies_are_not_supported_yet(strategy):
    with pytest.raises(ValidationError, match=f"'{strategy}' is not supported yet"):
        TrainerConfig.model_validate({"loss_balancing": strategy})


def test_a_multi_task_file_with_loss_balancing_none_validates(tmp_path):
    from ludwig_hpo.config import load_sweep

    (tmp_path / "config.yaml").write_text(
        "input_features: [{name: x, type: number}]\n"
        "output_features: [{name: a, type: binary}, {name: b, type: number, loss: {weight: 2.0}}]\n"
        "trainer: {epochs: 1, loss_balancing: none}\n"
    )
    cfg = load_sweep(tmp_path / "config.yaml", dataset=tmp_path / "data.csv", search=False).config
    assert cfg.trainer.loss_balancing == "none"
