"""Whole reports for the sweeps that break naive report code."""

import pytest

from dashboards import build_report
from dashboards.parallel import parallel_coordinates_info
from ludwig_hpo.results import KFoldRecord, ParamInfo

MARKER = "* plotly.js v"


def _page(result, tmp_path):
    out = tmp_path / "out"
    return build_report(result, out / "report.html", out / "hiplot.html").read_text(encoding="utf-8")


def test_one_trial(tmp_path, make_trial, make_sweep, params):
    page = _page(make_sweep([make_trial("only", {params[0].path: 1e-3}, 0.4)]), tmp_path)
    assert page.count(MARKER) == 1
    assert "Not computed: no parameter varies among the scored trials." in page
    assert "--set trainer.learning_rate=0.001" in page


def test_constant_metric(tmp_path, make_trial, make_sweep, params):
    lr = params[0]
    trials = [make_trial(f"t{i}", {lr.path: 10.0 ** -(i + 1)}, 0.25) for i in range(5)]
    page = _page(make_sweep(trials, parameters=[lr]), tmp_path)
    assert "Not computed: no variance: every scored trial has validation/label/loss = 0.25." in page


def test_constant_parameter_is_listed_as_fixed(tmp_path, make_trial, make_sweep, params):
    lr, layers, _ = params
    trials = [make_trial(f"t{i}", {lr.path: 10.0 ** -(i + 1), layers.path: 2}, 0.1 * i) for i in range(4)]
    result = make_sweep(trials, parameters=[lr, layers])
    assert parallel_coordinates_info(result).fixed_params == {layers.path: "2"}
    assert "image.encoder.num_layers = 2" in _page(result, tmp_path)


def test_two_hundred_categories(tmp_path, make_trial, make_sweep):
    p = ParamInfo("model.vocab", "choice", categories=tuple(f"w{i}" for i in range(200)))
    trials = [make_trial(f"t{i}", {p.path: f"w{i}"}, 0.1 + i / 1000) for i in range(200)]
    page = _page(make_sweep(trials, parameters=[p]), tmp_path)
    assert "200 categories, every 8th labelled" in page
    assert "model.vocab (200 values)" in page  # HiPlot shows the column anyway


def test_dict_valued_choices_everywhere(tmp_path, make_trial, make_sweep, params):
    optimizer = params[2]
    trials = [make_trial(f"t{i}", {optimizer.path: optimizer.categories[i % 3]}, 0.1 + 0.01 * i) for i in range(6)]
    kfold = [KFoldRecord(1, "t0", trials[0].params, (0.1, 0.12), 0.11, "label/loss")]
    page = _page(make_sweep(trials, kfold=kfold), tmp_path)
    assert "{&#34;momentum&#34;: 0.9, &#34;type&#34;: &#34;sgd&#34;}" in page  # trials table, full text
    assert "--set trainer.optimizer=adam" in page  # best configuration as --set overrides


@pytest.mark.parametrize("goal", ["minimize", "maximize"])
def test_all_failed(tmp_path, make_trial, make_sweep, params, goal):
    trials = [make_trial(f"t{i}", {params[0].path: 1e-3}, None, status="FAILED") for i in range(3)]
    page = _page(make_sweep(trials, goal=goal), tmp_path)
    assert page.count(MARKER) == 1 and "No trial finished with a metric" in page
    assert "no curves to draw" in page
