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
