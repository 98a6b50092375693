import math

from dashboards import trials_table
from dashboards.table import TRIAL_COLUMNS


def test_one_row_per_trial_with_param_columns(sweep, params):
    table = trials_table(sweep)
    lr, layers, optimizer = params
    assert list(table.columns) == [*TRIAL_COLUMNS, lr.path, layers.path, optimizer.path]
    assert list(table["trial_id"]) == [t.trial_id for t in sweep.trials]
    first = sweep.trials[0]
    row = table.iloc[0]
    assert row["status"] == first.label
    assert row["epochs"] == len(first.history)
    assert row["batch_size"] == 64 and isinstance(row["batch_size"], int)
    assert row[lr.path] == first.params[lr.path]
    assert row[optimizer.path] == first.params[optimizer.path]  # dicts/lists kept as they are


def test_failed_trial_has_nan_metrics(sweep):
    table = trials_table(sweep).set_index("trial_id")
    failed = next(t for t in sweep.trials if t.status == "FAILED")
    assert math.isnan(table.loc[failed.trial_id, "objective_best"])
    assert table.loc[failed.trial_id, "batch_size"] is None
    assert table.loc[failed.trial_id, "epochs"] == 0


def test_param_named_like_a_column_is_prefixed(make_trial, make_sweep):
    result = make_sweep([make_trial("t1", {"epochs": 5}, 0.5)], parameters=())
    assert "params.epochs" in trials_table(result).columns


def test_no_trials_gives_empty_frame(make_sweep, params):
    table = trials_table(make_sweep([]))
    assert len(table) == 0
    assert list(table.columns)[: len(TRIAL_COLUMNS)] == list(TRIAL_COLUMNS)


def test_cells_read_like_the_sweep_file():
    import numpy as np

    from dashboards._format import format_cell, value_label

    assert value_label({"type": "sgd", "momentum": 0.9}) == '{"momentum": 0.9, "type": "sgd"}'
    assert value_label((1, np.int64(2))) == "[1, 2]"
    assert value_label(True) == "true" and value_label(None) == "null"
    assert format_cell(np.int64(10)) == "10" and format_cell(float("nan")) == "—"
    assert format_cell(0.000123456) == "0.0001235"
