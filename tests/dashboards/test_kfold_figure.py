import numpy as np
import pytest

from dashboards.kfold import kfold_figure, kfold_info
from ludwig_hpo.results import KFoldRecord


def test_mean_and_sample_std_per_configuration(sweep):
    info = kfold_info(sweep)
    records = sorted(sweep.kfold, key=lambda r: r.config_rank)
    assert info.labels == [f"config #{r.config_rank} (trial {r.trial_id})" for r in records]
    for record, mean, std, test in zip(
        records, info.means, info.stds, info.test_scores, strict=True
    ):
        assert mean == pytest.approx(np.mean(record.fold_scores))
        assert std == pytest.approx(np.std(record.fold_scores, ddof=1))
        assert test == record.test_score
    assert info.y_title == "label/loss (lower is better)"
    fig = kfold_figure(info)
    folds, means, tests = fig.data
    assert len(folds.y) == 9
    assert list(means.error_y.array) == pytest.approx(info.stds)
    assert tests.marker.symbol == "diamond"


def test_single_fold_has_no_bar_and_failed_test_is_skipped(make_sweep):
    kfold = [
        KFoldRecord(2, "t2", {}, (0.4,), 0.5, "label/loss"),
        KFoldRecord(1, "t1", {}, (0.3,), None, "label/loss"),
    ]
    info = kfold_info(make_sweep([], kfold=kfold))
    assert info.trial_ids == ["t1", "t2"]  # rank order
    assert info.stds == [None, None]
    assert info.test_scores == [None, 0.5]
    _, means, tests = kfold_figure(info).data
    assert list(means.error_y.array) == [0.0, 0.0]
    assert list(tests.y) == [0.5]


def test_empty_kfold_gives_none(make_sweep):
    assert kfold_info(make_sweep([])) is None
