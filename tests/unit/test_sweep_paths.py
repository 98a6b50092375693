"""The output folder's names (:class:`SweepPaths`), the tracking store's precedence, the trial
ranking, and the hand-off of trials that ended after Tune's last save to the searcher Tune
restores."""

from __future__ import annotations

from pathlib import Path

import pytest

from ludwig_hpo.config.schema import TrackingConfig
from ludwig_hpo.driver.paths import SweepPaths
from ludwig_hpo.errors import TrackingError
from ludwig_hpo.results import TrialRecord
from ludwig_hpo.results.ranking import distinct_top, rank_trials
from ludwig_hpo.tracking.resolve import existing_store_uri, resolve_tracking, sqlite_uri


def test_sweep_paths_name_every_file_of_the_output_folder(tmp_path):
    p = SweepPaths(tmp_path / "s")
    names = {
        x.relative_to(p.root).as_posix()
        for x in (
            p.sweep_file,
            p.state,
            p.journal,
            p.results,
            p.report,
            p.hiplot,
            p.best_model,
            p.best_weights,
            p.best_config,
            p.best_preprocessing,
            p.mlflow_db,
            p.artifacts,
        )
    }
    assert names == {
        "sweep.yaml",
        "state.json",
        "journal.jsonl",
        "results.json",
        "report.html",
        "hiplot.html",
        "best_model",
        "best_model/model.pt",
        "best_model/config.yaml",
        "best_model/preprocessing.json",
        "mlflow.db",
        "mlartifacts",
    }
    assert p.ray == (tmp_path / "s" / "ray").resolve() and p.experiment("search") == p.ray / "search"
    assert p.tuner_state("kfold") == p.ray / "kfold" / "tuner.pkl" and p.train_storage == p.ray / "train"
    assert p.tracking_uri == f"sqlite:///{(tmp_path / 's' / 'mlflow.db').resolve()}" == sqlite_uri(p.root)


def test_kept_weights_prefer_the_trials_own_train_storage(tmp_path):
    p = SweepPaths(tmp_path)
    tune_copy = p.experiment("search") / "search_t1_00000_lr=0.1" / "checkpoint_000002" / "model.pt"
    tune_copy.parent.mkdir(parents=True)
    tune_copy.touch()
    assert p.kept_weights("t1") == [tune_copy]
    own = p.train_storage / "t1" / "checkpoint_000003" / "model.pt"
    own.parent.mkdir(parents=True)
    own.touch()
    assert p.kept_weights("t1") == [own] and p.kept_weights("t2") == []


def test_tracking_store_precedence(tmp_path):
    env = {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}
    given = resolve_tracking(TrackingConfig(uri="file:///x", experiment="e"), "name", env, tmp_path)
    assert (given.uri, given.origin, given.experiment, given.artifact_location) == (
        "file:///x",
        "tracking.uri",
        "e",
        None,
    )
    from_env = resolve_tracking(TrackingConfig(), "name", env, tmp_path)
    assert (from_env.uri, from_env.origin, from_env.experiment) == (
        "http://127.0.0.1:5000",
        "MLFLOW_TRACKING_URI",
        "name",
    )
    assert from_env.describe() == "http://127.0.0.1:5000 (MLFLOW_TRACKING_URI), experiment 'name'"
    embedded = resolve_tracking(TrackingConfig(), "name", {}, Path("out/name"))
    assert embedded.embedded and embedded.uri == sqlite_uri(Path("out/name"))
    assert embedded.artifact_location == Path("out/name/mlartifacts")
    assert embedded.describe() == "out/name/mlflow.db (embedded SQLite store), experiment 'name'"


def test_existing_store_uri_needs_the_file(tmp_path):
    with pytest.raises(TrackingError, match="no mlflow.db in this folder"):
        existing_store_uri(tmp_path)
    (tmp_path / "mlflow.db").touch()
    assert existing_store_uri(tmp_path) == sqlite_uri(tmp_path)


def _trial(tid: str, best: float | None, status: str = "FINISHED", **params: object) -> TrialRecord:
    return TrialRecord(tid, status, dict(params), best, best)


def test_ranking_best_first_without_failed_or_unscored_trials():
    records = (_trial("a", 0.3), _trial("b", 0.1), _trial("c", None), _trial("d", 0.0, "FAILED"), _trial("e", 0.2))
    assert [r.trial_id for r in rank_trials(records, 1.0)] == ["b", "e", "a"]
    assert [r.trial_id for r in rank_trials(records, -1.0)] == ["a", "e", "b"]


def test_distinct_top_counts_a_repeated_configuration_once():
    ranked = [_trial("a", 0.1, lr=1), _trial("b", 0.2, lr=1), _trial("c", 0.3, lr=2), _trial("d", 0.4, lr=3)]
    assert [r.trial_id for r in distinct_top(ranked, 2)] == ["a", "c"]
    assert [r.trial_id for r in distinct_top(ranked, 10)] == ["a", "c", "d"]


def test_trials_that_ended_after_tunes_last_save_reach_the_restored_searcher(tmp_path):
    # Tune rebuilds the searcher from its newest saved state file on restore: the driver adopts
    # the ended trials into that file, and the searcher Tune restores counts them.
    from ray.tune.search import Searcher

    from ludwig_hpo.config.hyperopt import HyperoptConfig
    from ludwig_hpo.driver.tune_run import adopt_into_saved_searcher
    from ludwig_hpo.search.algorithms import make_searcher

    hp = HyperoptConfig.model_validate(
        {
            "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1}},
            "executor": {"num_samples": 3},
        }
    )
    saved = tmp_path / "search"
    saved.mkdir()
    running = make_searcher(hp)
    running.suggest("t0")
    running.save_to_dir(str(saved), "2026-01-01_00-00-00")
    entry = {
        "trial_id": "b",
        "experiment": "search",
        "status": "FINISHED",
        "config": {"trainer.learning_rate": 0.01},
        "results": [{"objective": 0.5, "epoch": 1}, {"objective": 0.3, "epoch": 2}],
    }
    assert adopt_into_saved_searcher(make_searcher(hp), saved, {"b": entry}) == 1
    restored = make_searcher(hp)
    restored.restore_from_dir(str(saved))
    assert isinstance(restored.suggest("t1"), dict)  # t0, the adopted b, t1: 3 trials
    assert restored.suggest("t2") == Searcher.FINISHED
    done = [t for t in restored._ot_study.trials if t.state.name == "COMPLETE"]
    assert [(t.params, t.value) for t in done] == [({"trainer.learning_rate": 0.01}, 0.3)]
    assert adopt_into_saved_searcher(make_searcher(hp), tmp_path / "nothing-saved", {"b": entry}) == 0
