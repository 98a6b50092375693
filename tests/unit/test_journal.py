"""The journal: what a trial reported, written when it ends, read back for a resume's replay."""

from __future__ import annotations

from ludwig_hpo.journal import JournalSink, read_journal
from ludwig_hpo.monitor import LiveTrial
from ludwig_hpo.results import EpochRecord


def _trial(tid, status="FINISHED"):
    t = LiveTrial(tid, {"trainer.learning_rate": 0.1}, {"phase": "search"}, f"trial_{tid}")
    t.history = [EpochRecord(1, 0.5, {"validation/y/loss": 0.5}), EpochRecord(2, 0.25, {"validation/y/loss": 0.25})]
    t.last = {"trial_id": tid, "batch_size": 16, "world_size": 2, "checkpoint_path": "/ckpt/2", "epoch": 2,
              "objective": 0.25, "validation/y/loss": 0.25, "pid": 7.0}
    t.checkpoint, t.checkpoint_epoch = "/ckpt/2", 2
    t.status = status
    return t


def test_ended_trials_replay_what_they_reported(tmp_path):
    sink = JournalSink(tmp_path / "journal.jsonl")
    sink.trial_ended(_trial("a"))
    sink.trial_ended(_trial("b", status="KILLED"))
    sink.trial_ended(_trial("c", status="FAILED"))  # a failed trial runs again on resume
    replay = read_journal(tmp_path / "journal.jsonl")
    assert sorted(replay) == ["a", "b"]
    assert replay["b"]["status"] == "KILLED" and replay["a"]["checkpoint_epoch"] == 2
    first, second = replay["a"]["results"]
    assert first == {"trial_id": "a", "batch_size": 16, "world_size": 2, "pid": 7.0, "validation/y/loss": 0.5,
                     "objective": 0.5, "epoch": 1}
    assert second["objective"] == 0.25 and second["epoch"] == 2 and second["checkpoint_path"] == "/ckpt/2"


def test_a_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / "journal.jsonl"
    JournalSink(path).trial_ended(_trial("a"))
    with path.open("a") as f:
        f.write('{"trial_id": "b", "resu')
    assert list(read_journal(path)) == ["a"]
    assert read_journal(tmp_path / "missing.jsonl") == {}


def test_a_replay_cut_short_by_the_resumed_scheduler_ends_as_recorded(tmp_path):
    from ludwig_hpo.journal import restore_trial

    sink = JournalSink(tmp_path / "journal.jsonl")
    sink.trial_ended(_trial("a"))
    entry = read_journal(tmp_path / "journal.jsonl")["a"]
    replayed = LiveTrial("a", {}, {}, "trial_a")
    replayed.history = [EpochRecord(1, 0.5, {})]  # stopped after the first replayed epoch
    replayed.status = "KILLED"
    restore_trial(replayed, entry)
    assert replayed.status == "FINISHED" and [h.epoch for h in replayed.history] == [1, 2]
    assert replayed.history[1].metrics == {"validation/y/loss": 0.25} and replayed.checkpoint == "/ckpt/2"
