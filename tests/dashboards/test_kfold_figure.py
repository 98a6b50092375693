import numpy as np
import pytest
from scipy import stats

from dashboards.kfold import kfold_figure, kfold_info, optimism_sentence, paired_test, t_interval
from ludwig_hpo.results import KFoldRecord


def test_mean_sample_std_and_t_interval_against_scipy(sweep):
    info = kfold_info(sweep)
    records = sorted(sweep.kfold, key=lambda r: r.config_rank)
    assert info.labels == [f"config #{r.config_rank} (trial {r.trial_id})" for r in records]
    for i, record in enumerate(records):
        scores = np.asarray(record.fold_scores)
        assert info.means[i] == pytest.approx(scores.mean())
        assert info.stds[i] == pytest.approx(scores.std(ddof=1))
        low, high = stats.t.interval(0.95, len(scores) - 1, loc=scores.mean(), scale=stats.sem(scores))
        assert (info.ci_lows[i], info.ci_highs[i]) == pytest.approx((low, high))
        assert info.test_scores[i] == record.test_score
        search = next(t for t in sweep.trials if t.trial_id == record.trial_id)
        assert info.search_scores[i] == search.objective_best
    assert info.y_title == "label/loss (lower is better)"
    fig = kfold_figure(info)
    folds, means, search, tests, scatter, diagonal = fig.data
    assert len(folds.y) == 9
    assert list(means.error_y.array) == pytest.approx(np.subtract(info.ci_highs, info.means))
    assert list(means.error_y.arrayminus) == pytest.approx(np.subtract(info.means, info.ci_lows))
    assert tests.marker.symbol == "diamond"
    assert list(scatter.x) == pytest.approx(info.means) and list(scatter.y) == pytest.approx(info.test_scores)
    assert list(diagonal.x) == list(diagonal.y)  # the y = x line
    assert scatter.xaxis == "x2" and diagonal.xaxis == "x2"


def test_t_interval_of_known_values():
    low, high = t_interval([1.0, 2.0, 3.0])  # mean 2, s = 1, t(0.975, 2) = 4.3027
    assert (low, high) == pytest.approx((2 - 4.302653 / np.sqrt(3), 2 + 4.302653 / np.sqrt(3)))
    assert t_interval([1.0]) is None


def test_optimism_is_test_minus_cv_signed_by_goal(make_sweep, make_trial):
    trials = [make_trial("t1", {}, 0.20), make_trial("t2", {}, 0.25)]
    kfold = [
        KFoldRecord(1, "t1", {}, (0.30, 0.32), 0.35, "label/loss"),
        KFoldRecord(2, "t2", {}, (0.40, 0.42), 0.39, "label/loss"),
    ]
    info = kfold_info(make_sweep(trials, kfold=kfold))
    # minimize: (0.35 - 0.31) and (0.39 - 0.41) -> mean 0.01 worse on test
    assert info.cv_optimism == pytest.approx(0.01)
    assert info.search_optimism == pytest.approx(((0.35 - 0.20) + (0.39 - 0.25)) / 2)
    assert "0.01 worse than their CV mean" in optimism_sentence(info)
    info = kfold_info(make_sweep(trials, kfold=kfold, goal="maximize"))
    assert info.cv_optimism == pytest.approx(-0.01)
    assert "0.01 better than their CV mean" in optimism_sentence(info)


def test_paired_tests_against_scipy_with_plain_verdicts():
    a = [0.30, 0.32, 0.31, 0.29, 0.33]
    b = [0.31, 0.31, 0.33, 0.30, 0.32]
    test = paired_test(1, 2, a, b, "minimize")
    assert test.t_pvalue == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert test.wilcoxon_pvalue == pytest.approx(stats.wilcoxon(np.subtract(a, b)).pvalue)
    assert test.verdict.startswith("#1 and #2 are not distinguishable at 5 %")
    clearly_worse = [x + 0.1 + 0.001 * i for i, x in enumerate(a)]
    test = paired_test(1, 2, a, clearly_worse, "minimize")
    assert test.t_pvalue < 0.05 and test.verdict.startswith("#1 is better than #2 at 5 %")
    test = paired_test(1, 2, a, clearly_worse, "maximize")
    assert test.verdict.startswith("#2 is better than #1 at 5 %")
    assert paired_test(1, 2, a, a, "minimize").verdict == "#1 and #2 scored the same on every fold"
    assert "fewer than 2 folds" in paired_test(1, 2, [0.1], [0.2], "minimize").verdict


def test_pairs_with_a_failed_fold_are_not_compared(make_sweep):
    kfold = [
        KFoldRecord(1, "t1", {}, (0.3, 0.31), 0.3, "label/loss"),
        KFoldRecord(2, "t2", {}, (0.4,), 0.5, "label/loss", failed_folds=1),
    ]
    (test,) = kfold_info(make_sweep([], kfold=kfold)).tests
    assert "a fold failed" in test.verdict and test.t_pvalue is None


def test_single_fold_has_no_bar_and_failed_test_is_skipped(make_sweep):
    kfold = [
        KFoldRecord(2, "t2", {}, (0.4,), 0.5, "label/loss"),
        KFoldRecord(1, "t1", {}, (0.3,), None, "label/loss"),
    ]
    info = kfold_info(make_sweep([], kfold=kfold))
    assert info.trial_ids == ["t1", "t2"]  # rank order
    assert info.stds == [None, None] and info.ci_lows == [None, None]
    assert info.test_scores == [None, 0.5]
    _, means, _, tests, scatter, _ = kfold_figure(info).data
    assert list(means.error_y.array) == [0.0, 0.0]
    assert list(tests.y) == [0.5]
    assert list(scatter.x) == [0.4]


def test_empty_kfold_gives_none(make_sweep):
    assert kfold_info(make_sweep([])) is None
