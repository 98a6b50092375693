from dashboards.history import history_figure, history_info


def test_best_so_far_follows_the_goal(make_trial, make_sweep):
    values = [0.5, None, 0.7, 0.3, 0.4]
    trials = [
        make_trial(f"t{i}", {}, v, status="FINISHED" if v is not None else "FAILED") for i, v in enumerate(values)
    ]
    info = history_info(make_sweep(trials, parameters=()))
    assert info.trial_numbers == [1, 3, 4, 5]
    assert info.values == [0.5, 0.7, 0.3, 0.4]
    assert info.best_so_far == [0.5, 0.5, 0.3, 0.3]
    assert info.n_without_metric == 1
    info = history_info(make_sweep(trials, parameters=(), goal="maximize"))
    assert info.best_so_far == [0.5, 0.7, 0.7, 0.7]
    fig = history_figure(info)
    assert [tr.name for tr in fig.data] == ["best so far", "completed"]


def test_no_metric_gives_annotated_figure(make_trial, make_sweep):
    info = history_info(make_sweep([make_trial("t0", {}, None, status="FAILED")], parameters=()))
    fig = history_figure(info)
    assert len(fig.data) == 0 and fig.layout.annotations
