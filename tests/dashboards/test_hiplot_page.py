from dashboards.hiplot_page import hiplot_rows, write_hiplot_page
from dashboards.table import trials_table


def test_rows_turn_lists_and_dicts_into_text(make_trial, make_sweep, params):
    optimizer = params[2]
    trials = [
        make_trial("t0", {optimizer.path: {"type": "sgd", "momentum": 0.9}}, 0.3),
        make_trial("t1", {optimizer.path: [1, 2]}, None, status="FAILED"),
    ]
    rows = hiplot_rows(trials_table(make_sweep(trials, parameters=[optimizer])))
    assert rows[0][optimizer.path] == '{"momentum": 0.9, "type": "sgd"}'
    assert rows[1][optimizer.path] == "[1, 2]"
    assert rows[1]["objective_best"] is None
    assert rows[0]["batch_size"] == 64


def test_page_is_written_and_a_value_cannot_close_its_script(tmp_path, make_trial, make_sweep):
    evil = "<script>alert(1)</script>"
    trials = [make_trial("t0", {"act": evil}, 0.3), make_trial("t1", {"act": "relu"}, 0.2)]
    path = write_hiplot_page(trials_table(make_sweep(trials, parameters=())), tmp_path / "hiplot.html")
    page = path.read_text(encoding="utf-8")
    assert "</script>alert" not in page and evil not in page
    assert "\\u003cscript>alert(1)\\u003c/script>" in page
    assert [p.name for p in tmp_path.iterdir()] == ["hiplot.html"]


def test_two_hundred_categories_are_forced_visible_with_a_note(tmp_path, make_trial, make_sweep):
    from dashboards.hiplot_page import crowded_columns, hiplot_notes

    trials = [make_trial(f"t{i}", {"model.vocab": f"w{i}", "model.fixed": 1}, 0.1 + i / 1000) for i in range(200)]
    table = trials_table(make_sweep(trials, parameters=()))
    assert crowded_columns(table) == {"model.vocab": 200}  # trial_id is not a column to draw
    notes = " ".join(hiplot_notes(table))
    assert "model.vocab (200 values)" in notes and "model.fixed" in notes
    page = write_hiplot_page(table, tmp_path / "hiplot.html").read_text(encoding="utf-8")
    assert '"categoricalMaximumValues": 200' in page.replace("\\", "")


def test_whole_numbers_are_categories_log_parameters_log_and_ids_no_axes(tmp_path, sweep, params):
    from dashboards.hiplot_page import column_types

    lr, layers, optimizer = params
    table = trials_table(sweep)
    types = column_types(table, sweep.parameters)
    # epochs (2 or 10), layers (1-3) and batch size (64): their ticks are their values, never 1.5
    assert types["epochs"] == types[layers.path] == types["batch_size"] == "categorical"
    assert types[lr.path] == "numericlog" and types[optimizer.path] == "categorical"
    assert "objective_best" not in types and "trial_id" not in types
    page = write_hiplot_page(table, tmp_path / "hiplot.html", sweep.parameters).read_text(encoding="utf-8")
    flat = page.replace("\\", "")
    assert '"hide": ["uid", "from_uid", "trial_id"]' in flat  # the ids are not drawn as axes
    assert '"type": "numericlog"' in flat and '"type": "categorical"' in flat
    assert '"stopped early": "#7fa7d6"' in flat and '"failed": "#c0392b"' in flat  # the report's state colours
    assert "n.m=[80,40,10,70]" in page and "n.m=[80,40,10,10]" not in page  # room for the first axis' labels


def test_floats_are_rounded_as_in_the_report(make_trial, make_sweep):
    trials = [make_trial("t0", {"trainer.learning_rate": 0.0123456789}, 0.98113207547)]
    rows = hiplot_rows(trials_table(make_sweep(trials, parameters=())))
    assert rows[0]["trainer.learning_rate"] == 0.01235 and rows[0]["objective_best"] == 0.9811


def test_rows_start_in_order_and_whole_number_categories_sort_as_numbers(tmp_path, make_trial, make_sweep):
    import json
    import re

    trials = [
        make_trial(f"t{i}", {"model.layers": (2, 10, 9)[i % 3]}, 0.1 + i / 100, epochs=(2, 10)[i % 2])
        for i in range(12)
    ]
    table = trials_table(make_sweep(trials, parameters=()))
    page = write_hiplot_page(table, tmp_path / "hiplot.html").read_text(encoding="utf-8")
    flat = page.replace("\\", "")
    assert '"order_by": [["uid", "asc"]]' in flat
    uids = re.findall(r'"uid": "(\d+)"', flat)
    assert uids[:3] == ["000000", "000001", "000002"]  # as text, 000010 still sorts after 000009
    layers = set(re.findall(r'"model.layers": "([ \d]+)"', flat))
    assert layers == {" 2", "10", " 9"} and sorted(layers) == [" 2", " 9", "10"]  # text order = number order
    order = json.loads(re.search(r'"order": (\[[^\]]*\])', flat).group(1))
    assert order[-1] == "epochs"  # HiPlot lays "order" out from the right: epochs is the first axis
