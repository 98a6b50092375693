"""A sweep that stops on an error or an interruption mid-search leaves no MLflow run RUNNING
(parent and children end), keeps ``state.json`` at the phase it was in, so a rerun of the same
command resumes it, and says in one line what to do next. A real embedded MLflow store, no Ray."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from rich.console import Console

from ludwig_hpo.driver.output import closing_parent_run
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.driver.state import SweepState, decide, fingerprint, read_state, write_state
from ludwig_hpo.driver.sweep_run import SweepOutput
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.mlflow_store import MlflowStore

TEXT = "name: s\n"
RAW = {"name": "s"}


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory):
    """A migrated, empty SQLite store (created once: a schema migration takes seconds)."""
    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowStore(f"sqlite:///{path}", "unit").close()
    return path


@pytest.fixture
def output(tmp_path, empty_store):
    """An open sweep output mid-search: a parent run, trial ``a`` RUNNING whose end the journal
    holds (its end was still queued), trial ``b`` RUNNING, trial ``c`` FAILED."""
    root = tmp_path / "s"
    root.mkdir()
    paths = SweepPaths(root)
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit")
    parent = store.start_run("s-20260101-000000")
    runs = {}
    for tid in ("a", "b", "c"):
        runs[tid] = store.start_run(f"trial_{tid}", parent_id=parent, tags={layout.TRIAL_ID_TAG: tid})
    store.end_run(runs["c"], "FAILED")
    entry = {"trial_id": "a", "experiment": "search", "status": "FINISHED", "results": [{"objective": 0.5, "epoch": 1}]}
    paths.journal.write_text(json.dumps(entry) + "\n")
    state = SweepState(fingerprint(TEXT, RAW), str(tmp_path / "s.yaml"), parent, store.uri, phase="search")
    write_state(root, state)
    yield SweepOutput(paths, store, parent, state, resumed=False), runs
    store.close()


def _statuses(out: SweepOutput, runs: dict[str, str]) -> dict[str, str]:
    client = out.store.client
    found = {tid: client.get_run(rid).info.status for tid, rid in runs.items()}
    found["parent"] = client.get_run(out.parent).info.status
    return found


def _reopen(out: SweepOutput) -> SweepOutput:
    """The same store again (``closing_parent_run`` closed it), to read what it holds."""
    store = MlflowStore(out.state.tracking_uri, "unit")
    return SweepOutput(out.paths, store, out.parent, out.state, resumed=False)


def test_an_unexpected_error_ends_every_run_and_the_sweep_resumes(output):
    out, runs = output
    text = io.StringIO()
    with pytest.raises(RuntimeError), closing_parent_run(out, Console(file=text, width=400)):
        raise RuntimeError("the store went away")
    seen = _reopen(out)
    try:
        assert _statuses(seen, runs) == {"a": "FINISHED", "b": "FAILED", "c": "FAILED", "parent": "FAILED"}
        tags = seen.store.client.get_run(runs["b"]).data.tags
        assert tags[layout.STATUS_TAG] == "FAILED" and "RuntimeError: the store went away" in tags[layout.ERROR_TAG]
    finally:
        seen.store.close()
    line = text.getvalue().strip()
    assert "\n" not in line and "rerun the same command" in line and "1 trial run(s)" in line
    assert read_state(out.paths.root).phase == "search"  # nothing moved on
    assert decide(out.paths.root, TEXT, RAW, restart=False)[0] == "resume"


def test_an_error_in_the_sweep_file_says_a_rerun_needs_restart(output):
    out, runs = output
    text = io.StringIO()
    with pytest.raises(ConfigError), closing_parent_run(out, Console(file=text, width=400)):
        raise ConfigError("a sampled value does not validate", key="hyperopt.parameters")
    seen = _reopen(out)
    try:
        assert "RUNNING" not in _statuses(seen, runs).values()
    finally:
        seen.store.close()
    assert "--restart" in text.getvalue() and "\n" not in text.getvalue().strip()


def test_an_interruption_ends_the_runs_left_running_as_killed(output):
    out, runs = output
    with pytest.raises(KeyboardInterrupt), closing_parent_run(out, Console(file=io.StringIO())):
        raise KeyboardInterrupt
    seen = _reopen(out)
    try:
        assert _statuses(seen, runs) == {"a": "FINISHED", "b": "KILLED", "c": "FAILED", "parent": "KILLED"}
        tags = seen.store.client.get_run(runs["b"]).data.tags
        assert tags[layout.STOPPED_BY_TAG] == layout.STOPPED_BY_INTERRUPTED
    finally:
        seen.store.close()


def test_a_journal_of_an_older_version_ends_an_early_stopped_trial_as_finished(output):
    """Older journals hold a trial the scheduler stopped as KILLED without ``stopped_by``: its
    queued end is written as the sweep writes it now (FINISHED, stopped by the scheduler)."""
    out, runs = output
    entry = {"trial_id": "a", "experiment": "search", "status": "KILLED", "results": [{"objective": 0.5, "epoch": 1}]}
    out.paths.journal.write_text(json.dumps(entry) + "\n")
    with pytest.raises(KeyboardInterrupt), closing_parent_run(out, Console(file=io.StringIO())):
        raise KeyboardInterrupt
    seen = _reopen(out)
    try:
        assert _statuses(seen, runs)["a"] == "FINISHED"
        tags = seen.store.client.get_run(runs["a"]).data.tags
        assert tags[layout.STATUS_TAG] == "FINISHED"
        assert tags[layout.STOPPED_BY_TAG] == layout.STOPPED_BY_SCHEDULER
    finally:
        seen.store.close()


# ---------------------------------------------------------------------------- the test split
def _finished(tmp_path, test_scores):
    from ludwig_hpo.results import EpochRecord, SweepResult, TrialRecord

    best = TrialRecord("t1", "FINISHED", {"trainer.learning_rate": 0.01}, 0.9, 0.9, history=(EpochRecord(1, 0.9, {}),))
    return SweepResult(
        name="s",
        metric="validation/y/accuracy",
        goal="maximize",
        parameters=(),
        trials=(best,),
        best_trial_id="t1",
        output_dir=str(tmp_path),
        test_scores=test_scores,
    )


def test_the_best_trials_test_scores_reach_results_json_the_parent_run_and_the_console(tmp_path):
    from ludwig_hpo.driver.outcome import summary_metrics, sweep_description
    from ludwig_hpo.driver.summary import print_sweep_summary
    from ludwig_hpo.results.io import read_result, write_result

    scores = {"test/y/accuracy": 0.75, "test/y/loss": 0.5, "test/combined/loss": 0.5}
    result = _finished(tmp_path, scores)
    write_result(result, tmp_path / "results.json")
    assert read_result(tmp_path / "results.json").test_scores == scores
    assert {k: summary_metrics(result)[k] for k in scores} == scores
    assert "| `test/y/accuracy` | 0.75 |" in sweep_description(result)
    console = Console(file=io.StringIO(), width=200)
    assert print_sweep_summary(console, result)
    text = console.file.getvalue()
    assert "test split (best weights of trial t1): test/y/accuracy = 0.75" in text
    assert "  test/y/loss: 0.5" in text


def test_results_json_of_an_older_version_reads_without_test_scores(tmp_path):
    from ludwig_hpo.results.io import read_result, write_result

    write_result(_finished(tmp_path, {}), tmp_path / "results.json")
    d = json.loads((tmp_path / "results.json").read_text())
    del d["test_scores"]
    (tmp_path / "results.json").write_text(json.dumps(d))
    assert read_result(tmp_path / "results.json").test_scores == {}


def test_the_best_weights_are_scored_on_the_test_rows_as_the_trainer_scores_them(tmp_path):
    """The driver's test score is the trial's evaluation of the exported weights on the test split."""
    import torch

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.driver.holdout import score_best_on_test
    from ludwig_hpo.model import build_model
    from ludwig_hpo.results import TrialRecord
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    from ..conftest import SWEEPS

    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    best = TrialRecord("t1", "FINISHED", {"trainer.learning_rate": 0.01, "combiner.output_size": 8}, 0.9, 0.9)
    from ludwig_hpo.config.loader import resolve_trial_config

    cfg = resolve_trial_config(loaded.raw, best.params)
    data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    paths = SweepPaths(tmp_path)
    paths.best_model.mkdir()
    torch.save({"state_dict": model.state_dict(), "epoch": 1}, paths.best_weights)
    console = Console(file=io.StringIO())
    scores = score_best_on_test(best, loaded, data, paths, console)
    want = evaluate(model, cfg, DeviceData(data, torch.device("cpu")), data.splits["test"], "test", 64)
    # the combined loss repeats the one output's loss: left out, as in the trial's run
    assert set(scores) == set(want) - {"test/combined/loss"} and "test/malignant/roc_auc" in scores
    assert scores == pytest.approx({k: want[k] for k in scores})
    paths.best_weights.write_bytes(b"not a checkpoint")  # unreadable: one warning, the sweep goes on
    assert score_best_on_test(best, loaded, data, paths, console) == {}
    assert "warning: the best trial could not be scored on the test split: " in console.file.getvalue()
    paths.best_weights.unlink()  # nothing exported: nothing scored, and the console says so
    assert score_best_on_test(best, loaded, data, paths, console) == {}
    assert "no weights of the best trial t1" in console.file.getvalue()


def test_a_training_run_has_no_time_budget_to_end_it(tmp_path):
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.single_run import single_run_sweep

    from ..conftest import SWEEPS

    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    assert loaded.config.hyperopt.executor.time_budget_s  # a search's, by default
    assert single_run_sweep(loaded).config.hyperopt.executor.time_budget_s is None
