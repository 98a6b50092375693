import math

import plotly.graph_objects as go
import pytest

from dashboards.parallel import parallel_coordinates_figure, parallel_coordinates_info
from ludwig_hpo.results import ParamInfo


def axis(info, label):
    return next(a for a in info.axes if a.label == label)


def test_log_param_on_log10_values_with_ticks_in_original_units(make_trial, make_sweep, params):
    lr, layers, optimizer = params
    trials = [
        make_trial(f"t{i}", {lr.path: v, layers.path: i % 3 + 1, optimizer.path: "adam"}, 0.1 * i + 0.1)
        for i, v in enumerate([1e-4, 3e-3, 1e-1])
    ]
    info = parallel_coordinates_info(make_sweep(trials))
    ax = axis(info, lr.path)
    by_id = dict(zip(info.trial_ids, ax.values, strict=True))
    assert by_id["t0"] == pytest.approx(-4) and by_id["t1"] == pytest.approx(math.log10(3e-3))
    assert ax.tickvals == pytest.approx([-4, -3, -2, -1])
    assert ax.ticktext == ["1e-4", "1e-3", "1e-2", "1e-1"]
    assert ax.range == pytest.approx((-4, -1))


def test_log_range_spans_declared_bounds(make_trial, make_sweep, params):
    lr = params[0]  # declared 1e-4 .. 1e-1
    trials = [make_trial(f"t{i}", {lr.path: v}, 0.5 + i) for i, v in enumerate([2e-3, 1e-2])]
    ax = axis(parallel_coordinates_info(make_sweep(trials, parameters=[lr])), lr.path)
    assert ax.range == pytest.approx((-4, -1))
    assert ax.ticktext == ["1e-4", "1e-3", "1e-2", "1e-1"]


def test_narrow_log_range_gets_1_2_5_ticks(make_trial, make_sweep):
    lr = ParamInfo("trainer.learning_rate", "loguniform", log=True)  # no bounds known
    trials = [make_trial(f"t{i}", {lr.path: v}, 0.5 + i) for i, v in enumerate([0.012, 0.06])]
    ax = axis(parallel_coordinates_info(make_sweep(trials, parameters=[lr])), lr.path)
    assert ax.ticktext == ["0.02", "0.05"]
    assert ax.tickvals == pytest.approx([math.log10(0.02), math.log10(0.05)])


def test_integer_param_gets_integer_ticks(make_trial, make_sweep, params):
    layers = params[1]
    trials = [make_trial(f"t{i}", {layers.path: v}, 0.1 * i) for i, v in enumerate([1, 3, 2])]
    ax = axis(parallel_coordinates_info(make_sweep(trials, parameters=[layers])), layers.path)
    assert ax.tickvals == [1.0, 2.0, 3.0] and ax.ticktext == ["1", "2", "3"]
    assert sorted(ax.values) == [1.0, 2.0, 3.0]


def test_log_param_must_be_positive(make_trial, make_sweep, params):
    lr = params[0]
    trials = [make_trial("t0", {lr.path: 0.0}, 0.5), make_trial("t1", {lr.path: 0.1}, 0.4)]
    with pytest.raises(ValueError, match="must be > 0.*'t0'"):
        parallel_coordinates_info(make_sweep(trials, parameters=[lr]))


def test_categories_map_to_declaration_order_with_full_labels(make_trial, make_sweep, params):
    optimizer = params[2]
    trials = [
        make_trial("t0", {optimizer.path: {"type": "sgd", "momentum": 0.9}}, 0.3),
        make_trial("t1", {optimizer.path: "adam"}, 0.2),
        make_trial("t2", {optimizer.path: (1, 2)}, 0.1),  # a tuple equals the declared list
    ]
    info = parallel_coordinates_info(make_sweep(trials, parameters=[optimizer]))
    ax = axis(info, optimizer.path)
    assert ax.ticktext == ["adam", '{"momentum": 0.9, "type": "sgd"}', "[1, 2]"]
    assert ax.tickvals == [0.0, 1.0, 2.0]
    assert dict(zip(info.trial_ids, ax.values, strict=True)) == {"t0": 1.0, "t1": 0.0, "t2": 2.0}
    assert ax.range == (0.0, 2.0)


def test_bool_and_int_categories_stay_distinct(make_trial, make_sweep):
    flag = ParamInfo("model.flag", "choice", categories=(True, 1, None))
    trials = [make_trial(f"t{i}", {flag.path: v}, 0.1 * i) for i, v in enumerate([True, 1, None])]
    ax = axis(parallel_coordinates_info(make_sweep(trials, parameters=[flag])), flag.path)
    assert ax.ticktext == ["true", "1", "null"]
    assert sorted(ax.values) == [0.0, 1.0, 2.0]


def test_constant_param_listed_not_drawn(make_trial, make_sweep, params):
    lr, layers, optimizer = params
    trials = [
        make_trial(f"t{i}", {lr.path: 10.0 ** -(i + 2), layers.path: 2, optimizer.path: [1, 2]}, 0.1 * i)
        for i in range(3)
    ]
    info = parallel_coordinates_info(make_sweep(trials))
    assert [a.label for a in info.axes] == [lr.path, "validation/label/loss"]
    assert info.fixed_params == {layers.path: "2", optimizer.path: "[1, 2]"}
    fig = parallel_coordinates_figure(info)
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert "image.encoder.num_layers = 2" in notes


def test_failed_trials_drawn_grey_on_a_no_metric_tick_and_status_axis(sweep):
    info = parallel_coordinates_info(sweep)
    failed = [t.trial_id for t in sweep.trials if t.status == "FAILED"]
    assert failed and info.trial_ids[: len(failed)] == failed  # drawn first, under the others
    assert info.excluded == {"failed": len(failed)}
    assert len(info.trial_ids) == len(sweep.trials)
    assert all(len(a.values) == len(info.trial_ids) for a in info.axes)
    metric = axis(info, "validation/label/loss")
    scored = [v for v in metric.values if v != info.no_metric_value]
    # minimize: "no metric" sits beyond the worst (highest) value, 10 % of the span away
    assert info.no_metric_value == pytest.approx(max(scored) + 0.1 * (max(scored) - min(scored)))
    assert metric.values[: len(failed)] == [info.no_metric_value] * len(failed)
    assert metric.ticktext[-1] == "no metric" and metric.tickvals[-1] == info.no_metric_value
    assert all(min(scored) <= t <= max(scored) for t in metric.tickvals[:-1])
    status = axis(info, "status")
    assert info.axes[0] is status and status.ticktext == ["completed", "stopped early", "failed"]
    by_id = dict(zip(info.trial_ids, status.values, strict=True))
    assert {by_id[t] for t in failed} == {2.0}
    killed = [t.trial_id for t in sweep.trials if t.stopped_by]
    assert {by_id[t] for t in killed} == {1.0}
    fig = parallel_coordinates_figure(info)
    line = fig.data[0].line
    assert line.colorscale[0][1] == "#c8c8c8"  # grey end of the scale, the worse end once reversed
    assert line.cmax == info.no_metric_value
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert f"{len(failed)} failed without a metric" in notes


def test_axes_ordered_by_importance_most_important_next_to_the_metric(sweep, params):
    lr, layers, optimizer = params
    info = parallel_coordinates_info(sweep, importance=[layers.path, lr.path])
    assert [a.label for a in info.axes] == ["status", optimizer.path, lr.path, layers.path, "validation/label/loss"]
    info = parallel_coordinates_info(sweep)
    assert [a.label for a in info.axes][1:4] == [lr.path, layers.path, optimizer.path]


def test_two_hundred_categories_label_every_nth_tried_one(make_trial, make_sweep):
    p = ParamInfo("model.vocab", "choice", categories=tuple(f"word_{i:03d}" for i in range(200)))
    trials = [make_trial(f"t{i}", {p.path: f"word_{i:03d}"}, 0.1 + i / 1000) for i in range(0, 200, 2)]
    info = parallel_coordinates_info(make_sweep(trials, parameters=[p]))
    vocab = axis(info, p.path)
    assert vocab.range == (0.0, 99.0)  # the 100 tried categories
    assert vocab.ticktext[:3] == ["word_000", "word_008", "word_016"]  # every 4th, full text
    assert len(vocab.ticktext) == 25
    assert vocab.note == "100 of 200 categories tried, only those shown; every 4th labelled"
    notes = " ".join(a.text for a in parallel_coordinates_figure(info).layout.annotations)
    assert "every 4th labelled" in notes


def test_dict_and_list_choices_get_full_labels(make_trial, make_sweep, params):
    optimizer = params[2]
    trials = [make_trial(f"t{i}", {optimizer.path: c}, 0.1 * i) for i, c in enumerate(optimizer.categories)]
    info = parallel_coordinates_info(make_sweep(trials))
    assert axis(info, optimizer.path).ticktext == ["adam", '{"momentum": 0.9, "type": "sgd"}', "[1, 2]"]


@pytest.mark.parametrize("goal", ["minimize", "maximize"])
def test_colour_and_order_follow_the_goal(sweep, goal):
    result = sweep.__class__(**{**sweep.__dict__, "goal": goal})
    info = parallel_coordinates_info(result)
    assert info.metric_values == axis(info, "validation/label/loss").values
    best = min(info.metric_values) if goal == "minimize" else max(info.metric_values)
    assert info.metric_values[-1] == best  # drawn last, on top
    assert info.reversescale is (goal == "minimize")
    direction = "lower is better" if goal == "minimize" else "higher is better"
    assert info.metric_title == f"validation/label/loss ({direction})"
    line = parallel_coordinates_figure(info).data[0].line
    assert line.reversescale is (goal == "minimize") and direction in line.colorbar.title.text


def test_one_trial(make_trial, make_sweep, params):
    lr = params[0]
    result = make_sweep([make_trial("t0", {lr.path: 1e-3}, 0.42)], parameters=[lr])
    info = parallel_coordinates_info(result)
    assert [a.label for a in info.axes] == ["validation/label/loss"]
    low, high = info.axes[0].range
    assert low < 0.42 < high
    assert info.fixed_params == {lr.path: "0.001"}
    assert isinstance(parallel_coordinates_figure(info).data[0], go.Parcoords)


def test_all_failed_gives_annotated_empty_figure(make_trial, make_sweep, params):
    lr = params[0]
    trials = [make_trial(f"t{i}", {lr.path: 1e-3}, None, status="FAILED") for i in range(3)]
    info = parallel_coordinates_info(make_sweep(trials))
    assert info.axes == [] and info.trial_ids == [] and info.excluded == {"failed": 3}
    fig = parallel_coordinates_figure(info)
    assert len(fig.data) == 0
    assert any("No trial reported a metric" in a.text for a in fig.layout.annotations)


def test_thousand_trials(make_trial, make_sweep, params):
    lr, layers, optimizer = params
    trials = [
        make_trial(
            f"t{i}",
            {
                lr.path: 10 ** (-4 + 3 * i / 999),
                layers.path: i % 3 + 1,
                optimizer.path: optimizer.categories[i % 3],
            },
            1.0 / (i + 1),
        )
        for i in range(1000)
    ]
    info = parallel_coordinates_info(make_sweep(trials))
    assert len(info.axes) == 4 and all(len(a.values) == 1000 for a in info.axes)
    parallel_coordinates_figure(info)


def test_user_strings_are_escaped_for_plotly(make_trial, make_sweep):
    evil = "<script>alert(1)</script>"
    p = ParamInfo("model.act", "choice", categories=(evil, "relu"))
    trials = [make_trial("t0", {p.path: evil}, 0.2), make_trial("t1", {p.path: "relu"}, 0.1)]
    info = parallel_coordinates_info(make_sweep(trials, parameters=[p]))
    assert axis(info, p.path).ticktext[0] == evil  # the info keeps the value
    dim = parallel_coordinates_figure(info).data[0].dimensions[0]
    assert dim.ticktext[0] == "&lt;script&gt;alert(1)&lt;/script&gt;"
