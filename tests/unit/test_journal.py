"""The journal: what a trial reported, written when it ends, read back for a resume's replay."""

from __future__ import annotations

import pytest

from ludwig_hpo.driver.journal import JournalSink, ended_outside_state, read_journal
from ludwig_hpo.results import EpochRecord
from ludwig_hpo.results.live import LiveTrial


def _trial(tid, status="FINISHED"):
    t = LiveTrial(tid, {"trainer.learning_rate": 0.1}, {"phase": "search"}, f"trial_{tid}")
    t.history = [EpochRecord(1, 0.5, {"validation/y/loss": 0.5}), EpochRecord(2, 0.25, {"validation/y/loss": 0.25})]
    t.last = {
        "trial_id": tid,
        "batch_size": 16,
        "world_size": 2,
        "checkpoint_path": "/ckpt/2",
        "epoch": 2,
        "objective": 0.25,
        "validation/y/loss": 0.25,
        "pid": 7.0,
    }
    t.checkpoint, t.checkpoint_epoch = "/ckpt/2", 2
    t.status = status
    return t


def test_ended_trials_replay_what_they_reported(tmp_path):
    sink = JournalSink(tmp_path / "journal.jsonl")
    sink.trial_ended(_trial("a"))
    stopped = _trial("b")
    stopped.stopped_by = "scheduler"
    sink.trial_ended(stopped)
    sink.trial_ended(_trial("c", status="FAILED"))  # a failed trial runs again on resume
    replay = read_journal(tmp_path / "journal.jsonl")
    assert sorted(replay) == ["a", "b"]
    assert (replay["b"]["status"], replay["b"]["stopped_by"]) == ("FINISHED", "scheduler")
    assert replay["a"]["checkpoint_epoch"] == 2
    first, second = replay["a"]["results"]
    assert first == {
        "trial_id": "a",
        "batch_size": 16,
        "world_size": 2,
        "pid": 7.0,
        "validation/y/loss": 0.5,
        "objective": 0.5,
        "epoch": 1,
    }
    assert second["objective"] == 0.25 and second["epoch"] == 2 and second["checkpoint_path"] == "/ckpt/2"


def test_interrupted_trials_are_not_journaled_and_an_entry_keeps_the_trials_times(tmp_path):
    from ludwig_hpo.driver.journal import restore_trial

    sink = JournalSink(tmp_path / "journal.jsonl")
    cut = _trial("i", status="KILLED")
    cut.stopped_by = "interrupted"  # Ctrl-C: it runs again on resume, from its checkpoint
    sink.trial_ended(cut)
    a = _trial("a")
    a.started, a.ended = 100.0, 130.5
    sink.trial_ended(a)
    journal = read_journal(tmp_path / "journal.jsonl")
    assert sorted(journal) == ["a"]
    adopted = LiveTrial("a", {}, {}, "trial_a")
    restore_trial(adopted, journal["a"])
    assert (adopted.started, adopted.ended, adopted.last["batch_size"]) == (100.0, 130.5, 16)


def test_entries_of_early_stopped_trials_written_as_killed_replay_as_finished_and_stopped_early(tmp_path):
    import json

    from ludwig_hpo.driver.journal import restore_trial

    path = tmp_path / "journal.jsonl"
    JournalSink(path).trial_ended(_trial("new"))
    old = json.loads(path.read_text())
    lines = [
        {**old, "trial_id": "sched", "status": "KILLED", "stopped_by": None},  # the scheduler's stop, as once written
        {**old, "trial_id": "budget", "status": "KILLED", "stopped_by": "time budget"},
    ]
    with path.open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    restored = {}
    for tid, entry in read_journal(path).items():
        restored[tid] = LiveTrial(tid, {}, {}, f"trial_{tid}")
        restore_trial(restored[tid], entry)
    assert {tid: (t.status, t.stopped_by) for tid, t in restored.items()} == {
        "new": ("FINISHED", None),
        "sched": ("FINISHED", "scheduler"),
        "budget": ("FINISHED", "time budget"),
    }
    assert [h.epoch for h in restored["sched"].history] == [1, 2] and restored["sched"].replayed


def test_a_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / "journal.jsonl"
    JournalSink(path).trial_ended(_trial("a"))
    with path.open("a") as f:
        f.write('{"trial_id": "b", "resu')
    assert list(read_journal(path)) == ["a"]
    assert read_journal(tmp_path / "missing.jsonl") == {}


def test_a_replay_cut_short_by_the_resumed_scheduler_ends_as_recorded(tmp_path):
    from ludwig_hpo.driver.journal import restore_trial

    sink = JournalSink(tmp_path / "journal.jsonl")
    sink.trial_ended(_trial("a"))
    entry = read_journal(tmp_path / "journal.jsonl")["a"]
    replayed = LiveTrial("a", {}, {}, "trial_a")
    replayed.history = [EpochRecord(1, 0.5, {})]  # stopped after the first replayed epoch
    replayed.status = "KILLED"
    restore_trial(replayed, entry)
    assert replayed.status == "FINISHED" and [h.epoch for h in replayed.history] == [1, 2]
    assert replayed.history[1].metrics == {"validation/y/loss": 0.25} and replayed.checkpoint == "/ckpt/2"


def _state(folder, trial_ids):
    import json

    folder.mkdir(parents=True, exist_ok=True)
    data = {"trial_data": [[json.dumps({"trial_id": t}), "{}"] for t in trial_ids], "runner_data": {}, "stats": {}}
    (folder / "experiment_state-2026-01-01_00-00-00.json").write_text(json.dumps(data))


def test_trials_that_ended_after_tunes_last_save_are_found(tmp_path):
    path = tmp_path / "journal.jsonl"
    for tid in ("a", "b", "c"):
        t = _trial(tid)
        t.config = {"trainer.learning_rate": 0.1}
        JournalSink(path).trial_ended(t)
    k = _trial("k")
    k.config = {"job": "fold"}
    JournalSink(path, "kfold").trial_ended(k)
    journal = read_journal(path)
    assert journal["a"]["experiment"] == "search" and journal["a"]["config"] == {"trainer.learning_rate": 0.1}
    _state(tmp_path / "search", ["a", "x"])
    assert sorted(ended_outside_state(journal, "search", tmp_path / "search")) == ["b", "c"]
    assert ended_outside_state(journal, "search", tmp_path / "nothing-saved") == {}


def test_a_restored_monitor_adopts_them_as_ended(tmp_path):
    from ludwig_hpo.driver.monitor import SweepMonitor
    from ludwig_hpo.results.live import TrialDescription

    path = tmp_path / "journal.jsonl"
    t = _trial("b")
    t.stopped_by, t.config = "scheduler", {"trainer.learning_rate": 0.1}
    JournalSink(path).trial_ended(t)
    mon = SweepMonitor(
        epochs=4,
        goal_sign=1.0,
        sinks=[],
        describe=lambda tid, c: TrialDescription(dict(c), {"phase": "search"}, f"trial_{tid}"),
    )
    mon.ended_outside_state = read_journal(path)
    mon.set_state({"trials": {}})
    rec = mon.trials["b"]
    assert (rec.status, rec.stopped_by, rec.params, [h.epoch for h in rec.history]) == (
        "FINISHED",
        "scheduler",
        {"trainer.learning_rate": 0.1},
        [1, 2],
    )
    assert rec.replayed


def test_a_resumed_searcher_counts_them_and_stops_at_num_samples():
    from ray.tune.search import Searcher

    from ludwig_hpo.config.hyperopt import HyperoptConfig
    from ludwig_hpo.search import algorithms

    hp = HyperoptConfig.model_validate(
        {
            "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1}},
            "executor": {"num_samples": 3},
        }
    )
    s = algorithms.make_searcher(hp)
    s.suggest("t0")
    assert s.adopt_ended("b", {"trainer.learning_rate": 0.01}, {"objective": 0.3, "epoch": 1})
    assert not s.adopt_ended("b", {"trainer.learning_rate": 0.01}, {"objective": 0.3, "epoch": 1})
    assert isinstance(s.suggest("t1"), dict)  # t0, the adopted b, t1: 3 trials
    assert s.suggest("t2") == Searcher.FINISHED
    done = [t for t in s._ot_study.trials if t.state.name == "COMPLETE"]
    assert [(t.params, t.value) for t in done] == [({"trainer.learning_rate": 0.01}, 0.3)]


def test_a_checkpoint_tunes_saved_state_names_but_its_retention_deleted_is_put_back(tmp_path):
    # Tune keeps one checkpoint per trial: the next one deletes it, before Tune saves its state
    # again; a driver killed in between leaves a state that names a deleted checkpoint.
    import json

    import cloudpickle
    from ray.train import Checkpoint, CheckpointConfig
    from ray.train._internal.checkpoint_manager import _CheckpointManager
    from ray.train._internal.session import _TrainingResult

    from ludwig_hpo.driver.journal import restore_missing_checkpoints

    exp = tmp_path / "search"

    def trial(tid, status, names, saved):
        folder = exp / f"search_trial_{tid}"
        for n in names:
            (folder / n).mkdir(parents=True)
            (folder / n / "model.pt").write_text(n)
        manager = _CheckpointManager(CheckpointConfig(num_to_keep=1))
        manager.register_checkpoint(_TrainingResult(Checkpoint(str(folder / saved)), {}))
        meta = {"checkpoint_manager": {"_type": "CLOUDPICKLE_FALLBACK", "value": cloudpickle.dumps(manager).hex()}}
        return [json.dumps({"trial_id": tid, "status": status}), json.dumps(meta)]

    data = [
        trial("a", "RUNNING", ["checkpoint_000001"], "checkpoint_000000"),  # replaced, then killed
        trial("b", "RUNNING", ["checkpoint_000000"], "checkpoint_000000"),  # as saved
        trial("c", "TERMINATED", ["checkpoint_000002"], "checkpoint_000001"),
    ]  # not restored
    (exp / "experiment_state-2026-01-01_00-00-00.json").write_text(json.dumps({"trial_data": data}))
    assert restore_missing_checkpoints(exp) == ["a"]
    assert (exp / "search_trial_a" / "checkpoint_000000" / "model.pt").read_text() == "checkpoint_000001"
    assert (exp / "search_trial_a" / "checkpoint_000001").is_dir()  # the journal may name it
    assert not (exp / "search_trial_c" / "checkpoint_000001").exists()
    assert restore_missing_checkpoints(tmp_path / "nothing-saved") == []


@pytest.mark.parametrize("saved_without_bookkeeping", [False, True])
def test_a_continued_trial_does_not_report_a_step_to_optuna_twice(tmp_path, saved_without_bookkeeping):
    import warnings

    from ludwig_hpo.config.hyperopt import HyperoptConfig
    from ludwig_hpo.search import algorithms

    hp = HyperoptConfig.model_validate(
        {"parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1}}}
    )
    s = algorithms.make_searcher(hp)
    s.suggest("t0")
    for step in (1, 2, 3):
        s.on_trial_result("t0", {"objective": 1.0 / step, "training_iteration": step})
    if saved_without_bookkeeping:  # a searcher state saved before it kept the reported steps
        del s._reported
    s.save(str(tmp_path / "searcher.pkl"))
    resumed = algorithms.make_searcher(hp)
    resumed.restore(str(tmp_path / "searcher.pkl"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the resumed trial continues from its epoch-2 checkpoint: epochs 3 and 4 follow
        for step, value in ((3, 0.3), (4, 0.2)):
            resumed.on_trial_result("t0", {"objective": value, "training_iteration": step})
    assert not [w for w in caught if "already reported" in str(w.message)]
    (trial,) = resumed._ot_study.get_trials(deepcopy=False)
    assert trial.intermediate_values == {1: 1.0, 2: 0.5, 3: pytest.approx(1 / 3), 4: 0.2}
