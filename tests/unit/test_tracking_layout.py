"""The MLflow layout: names the writer and the reader share, and the composed names round-trip."""

from __future__ import annotations

import datetime as dt

from ludwig_hpo.tracking import layout
from ludwig_hpo.train.report_keys import ONCE_KEYS


def test_the_batch_size_tag_is_one_of_the_once_logged_keys():
    assert layout.BATCH_SIZE_TAG in layout.ONCE_TAGS == ONCE_KEYS


def test_the_parent_run_name_gives_back_the_sweep_name():
    name = layout.parent_run_name("digits-cnn", dt.datetime(2026, 1, 2, 3, 4, 5))
    assert name == "digits-cnn-20260102-030405"
    assert layout.sweep_name_of(name) == "digits-cnn"
    assert layout.sweep_name_of("hand-made") == "hand-made"


def test_the_objectives_tag_round_trips_and_a_bad_one_is_no_objectives():
    objectives = [("validation/label/loss", "minimize"), ("validation/label/roc_auc", "maximize")]
    assert layout.parse_objectives_tag(layout.objectives_tag_value(objectives)) == objectives
    assert layout.parse_objectives_tag(None) == []
    assert layout.parse_objectives_tag("[{") == []
    assert layout.parse_objectives_tag(layout.objectives_tag_value(objectives[:1])) == []
    assert layout.parse_objectives_tag(layout.objectives_tag_value([("a", "up"), ("b", "minimize")])) == []


def test_score_metrics_are_split_metrics_only():
    assert layout.is_score_metric("validation/label/loss")
    for name in (layout.OBJECTIVE_METRIC, layout.TIME_TOTAL_S, layout.hparam_metric("trainer.learning_rate")):
        assert not layout.is_score_metric(name)


def test_composed_names():
    assert layout.best_param("trainer.learning_rate") == "best.trainer.learning_rate"
    assert layout.best_metric("validation/label/loss") == "best/validation/label/loss"
    assert layout.hparam_tag("trainer.learning_rate") == "hparam.trainer.learning_rate"
    assert layout.retry_error_tag(2) == "retry_2_error"
    assert layout.version_tag("torch") == "version.torch"
    assert layout.registered_model_value("digits", "3") == "digits/3"
    assert layout.trial_run_name("a1b2") == "trial_a1b2"


def test_one_output_features_loss_curve_is_kept_once_under_the_sweeps_metric():
    names = {"train/y/loss", "train/combined/loss", "validation/y/loss", "validation/combined/loss", "validation/y/acc"}
    # the default: the feature's own losses stay
    assert layout.redundant_scores(names) == {"train/combined/loss", "validation/combined/loss"}
    assert layout.redundant_scores(names, keep="validation/y/loss") == {
        "train/combined/loss",
        "validation/combined/loss",
    }
    # the sweep optimizes the combined loss: it keeps its name, the same curves under the feature's name go
    assert layout.redundant_scores(names, keep="validation/combined/loss") == {"train/y/loss", "validation/y/loss"}
    # two output features: the combined loss is a curve of its own
    two = {"validation/y/loss", "validation/z/loss", "validation/combined/loss"}
    assert layout.redundant_scores(two, keep="validation/combined/loss") == frozenset()
