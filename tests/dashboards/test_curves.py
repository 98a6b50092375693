from dashboards.curves import curves_figure, curves_info


def test_top_trials_best_first_and_others_behind(sweep):
    info = curves_info(sweep, top_n=3)
    scored = sorted((t for t in sweep.trials if t.objective_best is not None), key=lambda t: t.objective_best)
    assert [c.trial_id for c in info.top] == [t.trial_id for t in scored[:3]]
    assert [c.rank for c in info.top] == [1, 2, 3]
    first = info.top[0]
    trial = scored[0]
    assert first.epochs == [h.epoch for h in trial.history]
    assert first.values == [h.objective for h in trial.history]
    assert len(info.others) == len(scored) - 3  # failed trials have no curve
    fig = curves_figure(info)
    assert fig.data[0].name == "other trials" and fig.data[1].name.startswith("#1 ")


def test_stopped_early_is_named_and_no_curve_gives_a_note(make_trial, make_sweep):
    info = curves_info(make_sweep([make_trial("k", {}, 0.3, epochs=2, stopped_by="scheduler")]))
    assert "(stopped early)" in curves_figure(info).data[0].name
    info = curves_info(make_sweep([make_trial("f", {}, None, status="FAILED")]))
    fig = curves_figure(info)
    assert len(fig.data) == 0 and "no curves" in fig.layout.annotations[0].text
