import pytest

from dashboards.importance import importance_figure, importance_info, rebuild_study
from ludwig_hpo.results import ParamInfo


def test_study_rebuilt_with_the_search_space(sweep, params):
    lr, layers, optimizer = params
    study, varied = rebuild_study(sweep)
    scored = [t for t in sweep.trials if t.objective_best is not None]
    assert len(study.trials) == len(scored) and varied == [lr.path, layers.path, optimizer.path]
    dists = study.trials[0].distributions
    assert dists[lr.path].log and (dists[lr.path].low, dists[lr.path].high) == (1e-4, 1e-1)
    assert (dists[layers.path].low, dists[layers.path].high) == (1, 3)  # randint upper is exclusive
    assert dists[optimizer.path].choices == ("adam", '{"momentum": 0.9, "type": "sgd"}', "[1, 2]")
    assert [t.value for t in study.trials] == [t.objective_best for t in scored]


def test_the_parameter_that_drives_the_metric_comes_first(make_trial, make_sweep, params):
    lr, layers, _ = params
    trials = [
        make_trial(
            f"t{i}",
            {lr.path: 10 ** (-4 + 3 * (i % 10) / 9), layers.path: 1 + i % 3},
            0.1 + 0.5 * abs(-4 + 3 * (i % 10) / 9 + 2.5),
        )
        for i in range(30)
    ]
    info = importance_info(make_sweep(trials, parameters=[lr, layers]))
    assert info.params == [lr.path, layers.path] and info.note is None
    assert sum(info.importances) == pytest.approx(1.0) and info.importances[0] > 0.9
    bars = importance_figure(info).data[0]
    assert list(bars.y) == [layers.path, lr.path]  # most important on top


def test_constant_metric_says_no_variance(make_trial, make_sweep, params):
    lr = params[0]
    trials = [make_trial(f"t{i}", {lr.path: 10.0 ** -(i % 4 + 1)}, 0.5) for i in range(6)]
    info = importance_info(make_sweep(trials, parameters=[lr]))
    assert info.params == [] and info.note.startswith("no variance")
    fig = importance_figure(info)
    assert len(fig.data) == 0 and "no variance" in fig.layout.annotations[0].text


@pytest.mark.parametrize("n, note", [(1, "no parameter varies"), (2, "too few scored trials (2")])
def test_too_few_trials(make_trial, make_sweep, params, n, note):
    lr = params[0]
    trials = [make_trial(f"t{i}", {lr.path: 10.0 ** -(i + 1)}, 0.1 * (i + 1)) for i in range(n)]
    assert importance_info(make_sweep(trials, parameters=[lr])).note.startswith(note)


def test_values_outside_the_declared_bounds_widen_them(make_trial, make_sweep):
    p = ParamInfo("a", "uniform", lower=0.0, upper=1.0)
    trials = [make_trial(f"t{i}", {"a": 2.0 * i}, 0.1 * i) for i in range(4)]
    study, _ = rebuild_study(make_sweep(trials, parameters=[p]))
    assert study.trials[0].distributions["a"].high == 6.0
