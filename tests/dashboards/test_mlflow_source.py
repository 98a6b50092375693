"""The sweep read back from a real SQLite MLflow store (written by the product's own
writer): values, types, statuses, histories and k-fold scores; and ``hpo report`` on it."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from dashboards.mlflow_source import load_sweep_result
from dashboards.runs import RunSnapshot, parse_param, sweep_from_runs
from ludwig_hpo.cli import app
from ludwig_hpo.errors import TrackingError
from ludwig_hpo.results import ParamInfo
from tests.dashboards.mlflow_fixture import EVIL, EXPERIMENT, METRIC, STOP_REASON, WALL_TIME_S, write_store

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep") / "digits-cnn"
    uri, parent = write_store(root)
    return root, uri, parent


@pytest.fixture(scope="module")
def result(store):
    root, uri, parent = store
    return load_sweep_result(uri, run_id=parent)


def test_parent_run_gives_the_sweep(result, store):
    root, uri, _ = store
    assert result.name == "digits-cnn"  # the run name's time stamp goes
    assert (result.metric, result.goal) == (METRIC, "minimize")
    assert result.best_trial_id == "t_00003"
    assert result.output_dir == str(root.resolve())
    assert result.tracking_uri == uri
    # the sweep's own measurement (also in results.json and on the console), not the parent run's span
    assert result.wall_time_s == WALL_TIME_S
    assert result.stop_reason == STOP_REASON  # as in results.json: the report says why the search ended
    assert [p.path for p in result.parameters] == [
        "trainer.learning_rate",
        "image.encoder.num_layers",
        "trainer.optimizer",
    ]
    lr = result.parameters[0]
    assert lr.log and (lr.lower, lr.upper) == (1e-4, 1e-1)
    assert result.parameters[2].categories[1] == {"type": "sgd", "momentum": 0.9}


def test_one_trial_per_search_run_in_start_order_with_original_types(result):
    trials = {t.trial_id: t for t in result.trials}
    assert [t.trial_id for t in result.trials] == [f"t_0000{i}" for i in range(5)]
    assert [t.status for t in result.trials] == ["FINISHED", "KILLED", "FAILED", "FINISHED", "RUNNING"]
    assert trials["t_00000"].params == {
        "trainer.learning_rate": 1e-3,
        "image.encoder.num_layers": 2,
        "trainer.optimizer": "adam",
    }
    assert trials["t_00001"].params["trainer.optimizer"] == {"type": "sgd", "momentum": 0.9}
    assert trials["t_00002"].params["trainer.optimizer"] == [1, 2]
    assert trials["t_00003"].params["trainer.optimizer"] == EVIL
    # a declared string category that looks like a number stays a string
    assert trials["t_00004"].params["trainer.optimizer"] == "16"
    assert isinstance(trials["t_00000"].params["image.encoder.num_layers"], int)


def test_histories_best_and_last_values(result):
    trials = {t.trial_id: t for t in result.trials}
    t3 = trials["t_00003"]
    assert [h.epoch for h in t3.history] == [1, 2, 3]
    assert [h.objective for h in t3.history] == [0.8, 0.3, 0.35]
    assert (t3.objective_best, t3.objective_last) == (0.3, 0.35)
    assert t3.history[1].metrics["validation/label/accuracy"] == pytest.approx(0.85)
    assert t3.history[0].metrics["train/combined/running_loss"] == pytest.approx(0.9)
    assert t3.batch_size == 64 and t3.train_time_s == 6.0
    failed = trials["t_00002"]
    assert failed.history == () and failed.objective_best is None
    assert failed.error == "RuntimeError: boom"
    assert trials["t_00001"].objective_last == 1.2


def test_kfold_and_test_scores_per_configuration(result):
    assert [k.config_rank for k in result.kfold] == [1, 2]
    first, second = result.kfold
    assert first.trial_id == "t_00003" and first.params["trainer.optimizer"] == EVIL
    assert first.fold_scores == pytest.approx((0.31, 0.29, 0.36))  # last epoch, not the best
    assert first.test_score == pytest.approx(0.33)
    assert first.metric == "label/loss" and first.failed_folds == 0
    assert second.fold_scores == pytest.approx((0.41, 0.44)) and second.failed_folds == 1
    assert second.test_score == pytest.approx(0.47)


def test_experiment_name_finds_the_latest_sweep(store, result):
    _, uri, _ = store
    by_name = load_sweep_result(uri, experiment=EXPERIMENT)
    assert [t.trial_id for t in by_name.trials] == [t.trial_id for t in result.trials]
    assert by_name.kfold == result.kfold


def test_pure_conversion_without_search_space_and_running_parent():
    parent = RunSnapshot(
        "p",
        "s-20260101-000000",
        "RUNNING",
        100.0,
        None,
        {},
        {"metric": "validation/y/accuracy", "goal": "maximize"},
        {},
    )
    child = RunSnapshot(
        "c",
        "trial_x",
        "RUNNING",
        110.0,
        None,
        {"trial_id": "x"},
        {"a.b": "0.5", "batch_size": "32"},
        {"validation/y/accuracy": [(1, 0.5), (2, 0.7), (3, 0.6)]},
    )
    result = sweep_from_runs(parent, [child], None, now_s=130.0)
    assert result.wall_time_s == 30.0 and result.best_trial_id == "x"
    (trial,) = result.trials
    assert trial.status == "RUNNING" and trial.wall_time_s == 20.0
    assert trial.params == {"a.b": 0.5} and trial.batch_size == 32
    assert (trial.objective_best, trial.objective_last) == (0.7, 0.6)  # maximize
    assert result.parameters == (ParamInfo("a.b", "unknown"),)


LOSS, AUC = "validation/y/loss", "validation/y/roc_auc"


def _mo_trial(tid: str, loss: float, auc: float, status: str = "FINISHED") -> RunSnapshot:
    return RunSnapshot(
        tid,
        f"trial_{tid}",
        status,
        110.0,
        120.0,
        {"trial_id": tid, "status": status},
        {"a.b": "0.5"},
        {LOSS: [(1, 9.0), (2, loss)], AUC: [(1, 0.1), (2, auc)]},
    )


def test_a_multi_objective_sweep_keeps_its_objectives_and_pareto_set():
    """The parent's ``objectives`` tag (what the sweep logs) gives the objectives; the Pareto
    set is recomputed from each trial's last epoch, as the sweep does."""
    from ludwig_hpo.tracking.layout import objectives_tag_value

    tag = objectives_tag_value([(LOSS, "minimize"), (AUC, "maximize")])
    parent = RunSnapshot(
        "p",
        "mo-20260101-000000",
        "FINISHED",
        100.0,
        200.0,
        {"objectives": tag},
        {"metric": LOSS, "goal": "minimize"},
        {},
    )
    children = [
        _mo_trial("a", 0.3, 0.90),
        _mo_trial("b", 0.2, 0.80),
        _mo_trial("c", 0.4, 0.85),
        _mo_trial("d", 0.25, 0.95, status="KILLED"),
    ]
    result = sweep_from_runs(parent, children, None)
    assert result.objectives == (LOSS, AUC)
    assert result.pareto_trial_ids == ("b", "d")  # a and c are beaten by d on both
    single = RunSnapshot("p", "s", "FINISHED", 100.0, 200.0, {}, {"metric": LOSS, "goal": "minimize"}, {})
    assert sweep_from_runs(single, children, None).objectives == ()
    broken = RunSnapshot(
        "p", "s", "FINISHED", 100.0, 200.0, {"objectives": "[{"}, {"metric": LOSS, "goal": "minimize"}, {}
    )
    assert sweep_from_runs(broken, children, None).pareto_trial_ids == ()


def test_a_run_that_is_not_a_sweep_is_refused():
    parent = RunSnapshot("p", "x", "FINISHED", 1.0, 2.0, {}, {}, {})
    with pytest.raises(TrackingError, match="not the parent run of a sweep"):
        sweep_from_runs(parent, [])


@pytest.mark.parametrize(
    "text, expected",
    [
        ("16", 16),
        ("0.001", 0.001),
        ("adam", "adam"),
        ("[1, 2]", [1, 2]),
        ('{"a": 1}', {"a": 1}),
        ("true", True),
        (EVIL, EVIL),
    ],
)
def test_parse_param_without_categories(text, expected):
    assert parse_param(text) == expected


def test_parse_param_prefers_declared_categories():
    info = ParamInfo("p", "choice", categories=("16", 16, (1, 2)))
    assert parse_param("16", info) == "16"
    assert parse_param("[1, 2]", info) == (1, 2)
    assert math.isnan(parse_param("NaN"))


# ---------------------------------------------------------------------------- hpo report
def test_hpo_report_from_dir_experiment_and_run_id(store, tmp_path):
    root, uri, parent = store
    runner = CliRunner()
    res = runner.invoke(app, ["report", str(root)])
    assert res.exit_code == 0, res.output
    assert (root / "report.html").is_file() and (root / "hiplot.html").is_file()
    assert "5 trials, 2 k-fold configuration(s)" in res.output
    out = tmp_path / "by-name"
    res = runner.invoke(app, ["report", "--experiment", EXPERIMENT, "--tracking-uri", uri, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "report.html").is_file()
    out = tmp_path / "by-id"
    res = runner.invoke(app, ["report", "--run-id", parent, "--tracking-uri", uri, "-o", str(out)])
    assert res.exit_code == 0, res.output
    page = (out / "report.html").read_text()
    assert "t_00003" in page and EVIL not in page
    out = tmp_path / "linked"
    res = runner.invoke(app, ["report", str(root), "-o", str(out), "--mlflow-ui", "http://127.0.0.1:5000"])
    assert res.exit_code == 0, res.output
    page = (out / "report.html").read_text()
    assert page.count('class="run-link" href="http://127.0.0.1:5000/#/experiments/') == 5  # every search trial
    assert "151.2 s" in page  # the wall time the sweep logged


@pytest.mark.parametrize(
    "args, message",
    [
        (["--experiment", "nope"], "no experiment named 'nope' in this store (it has: 'digits-cnn'"),
        (["--run-id", "0123456789abcdef"], "no run with id '0123456789abcdef'"),
    ],
)
def test_hpo_report_unknown_experiment_or_run(store, tmp_path, args, message):
    _, uri, _ = store
    res = CliRunner().invoke(app, ["report", *args, "--tracking-uri", uri, "-o", str(tmp_path / "x")])
    assert res.exit_code == 2
    assert message in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "uri, message",
    [
        ("http://127.0.0.1:9", "the MLflow server does not answer"),
        ("sqlite:///{tmp}/missing.db", "the SQLite store does not exist"),
    ],
)
def test_hpo_report_unreachable_store(tmp_path, uri, message):
    uri = uri.format(tmp=tmp_path)
    res = CliRunner().invoke(app, ["report", "--experiment", "x", "--tracking-uri", uri])
    assert res.exit_code == 2 and message in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "missing.db").exists()


def test_hpo_report_needs_something_to_report_on(tmp_path):
    res = CliRunner().invoke(app, ["report"])
    assert res.exit_code == 2 and "--experiment NAME or --run-id" in res.output
    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "no MLflow store to read" in res.output


def test_tidy_tables_from_the_store(result):
    from dashboards import epochs_table, kfold_table, trials_table

    trials = trials_table(result)
    assert list(trials["trial_id"]) == [f"t_0000{i}" for i in range(5)]
    # the words users read (status_label): the scheduler's stop is "stopped early", not a failure
    assert list(trials["status"]) == ["completed", "stopped early", "failed", "completed", "running"]
    assert list(trials["epochs"]) == [3, 1, 0, 3, 1]
    assert trials["objective_best"].tolist()[:2] == [0.4, 1.2] and math.isnan(trials["objective_best"][2])
    assert trials["trainer.optimizer"][1] == {"type": "sgd", "momentum": 0.9}

    epochs = epochs_table(result)
    assert list(epochs.columns) == [
        "trial_id",
        "status",
        "epoch",
        "objective",
        "train/combined/running_loss",
        "validation/label/accuracy",
        "validation/label/loss",
    ]
    t3 = epochs[epochs["trial_id"] == "t_00003"]
    assert t3["epoch"].tolist() == [1, 2, 3] and t3["objective"].tolist() == [0.8, 0.3, 0.35]
    assert len(epochs) == 3 + 1 + 3 + 1  # the failed trial has no epoch

    kfold = kfold_table(result)
    assert kfold.to_dict(orient="list") == {
        "config_rank": [1, 1, 1, 1, 2, 2, 2],
        "trial_id": ["t_00003"] * 4 + ["t_00000"] * 3,
        "fold": ["0", "1", "2", "test", "0", "1", "test"],
        "score": pytest.approx([0.31, 0.29, 0.36, 0.33, 0.41, 0.44, 0.47]),
    }


def test_wall_time_is_the_sweeps_own_else_the_parent_runs_span():
    from dashboards.runs import RunSnapshot, sweep_wall_time
    from ludwig_hpo.tracking import layout

    parent = RunSnapshot("p", "sweep", "FINISHED", 1000.0, 1141.0, {}, {}, {})
    assert sweep_wall_time(parent, now_s=5000.0) == 141.0  # a store without the metric
    logged = parent._replace(metrics={layout.SWEEP_WALL_TIME_METRIC: 151.0})
    assert sweep_wall_time(logged, now_s=5000.0) == 151.0
    running = parent._replace(end_s=None)
    assert sweep_wall_time(running, now_s=1030.0) == 30.0


def test_report_source_gives_each_trials_run(store):
    from dashboards.mlflow_source import load_sweep_report

    _, uri, parent = store
    result, ids = load_sweep_report(uri, run_id=parent)
    assert set(ids.by_trial) == {t.trial_id for t in result.trials} and ids.experiment_id


def test_hpo_report_from_results_json_links_the_runs_of_the_store_it_names(store, tmp_path):
    """A folder holding only ``results.json`` (a sweep tracked elsewhere): ``--mlflow-ui``
    finds each trial's run in the store ``results.json`` names; without a store to read, one
    line says how to pass it."""
    from dataclasses import replace

    from ludwig_hpo.results.io import write_result

    root, uri, parent = store
    folder = tmp_path / "copied"
    folder.mkdir()
    write_result(
        replace(load_sweep_result(uri, run_id=parent), output_dir=str(root.resolve())), folder / "results.json"
    )
    out = tmp_path / "linked"
    ui = ["--mlflow-ui", "http://127.0.0.1:5000"]
    res = CliRunner().invoke(app, ["report", str(folder), "-o", str(out), *ui])
    assert res.exit_code == 0, res.output
    page = (out / "report.html").read_text()
    assert page.count('class="run-link" href="http://127.0.0.1:5000/#/experiments/') == 5  # every search trial

    lost = replace(load_sweep_result(uri, run_id=parent), tracking_uri=f"sqlite:///{tmp_path / 'gone.db'}")
    write_result(lost, folder / "results.json")
    res = CliRunner().invoke(app, ["report", str(folder), "-o", str(tmp_path / "x"), *ui])
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert "--mlflow-ui needs the sweep's MLflow store" in res.output and "pass --tracking-uri URI" in res.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "gone.db").exists()
