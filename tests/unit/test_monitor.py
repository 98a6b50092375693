"""SweepMonitor classifies trials (FINISHED, stopped early or not / KILLED when interrupted / FAILED) from Tune's events and feeds
its sinks; the k-fold jobs and their aggregation. No Ray cluster: Tune trials are stand-ins."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ludwig_hpo.driver.monitor import SweepMonitor
from ludwig_hpo.results import TrialRecord
from ludwig_hpo.results.kfold import aggregate_kfold, job_name, job_tags, kfold_jobs
from ludwig_hpo.results.live import TrialDescription


@dataclass
class FakeTrial:
    trial_id: str
    config: dict = field(default_factory=dict)
    error: str | None = None

    def get_error(self):
        return self.error


class RecordingSink:
    def __init__(self):
        self.events = []

    def trial_started(self, t):
        self.events.append(("started", t.trial_id))

    def trial_result(self, t, result):
        self.events.append(("result", t.trial_id, result["epoch"]))

    def trial_ended(self, t):
        self.events.append(("ended", t.trial_id, t.status))

    def trial_retried(self, t):
        self.events.append(("retried", t.trial_id, t.retries))

    def trials_restored(self, trials):
        self.events.append(("restored", sorted(t.trial_id for t in trials)))


def make_monitor(epochs=3, sign=1.0):
    sink = RecordingSink()
    mon = SweepMonitor(
        epochs=epochs,
        goal_sign=sign,
        sinks=[sink],
        describe=lambda tid, cfg: TrialDescription(dict(cfg), {"phase": "search"}, f"trial_{tid}"),
    )
    return mon, sink


def result(epoch, objective, **extra):
    return {"epoch": epoch, "objective": objective, "validation/y/loss": objective, **extra}


def test_all_epochs_is_finished_fewer_is_finished_and_stopped_early_by_the_scheduler():
    mon, sink = make_monitor(epochs=3)
    a, b = FakeTrial("a", {"lr": 0.1}), FakeTrial("b", {"lr": 0.2})
    for t in (a, b):
        mon.on_trial_start(0, [], t)
    for e in (1, 2, 3):
        mon.on_trial_result(0, [], a, result(e, 1.0 / e))
    mon.on_trial_result(0, [], b, result(1, 5.0))
    mon.on_trial_complete(0, [], a)
    mon.on_trial_complete(0, [], b)
    recs = {r.trial_id: r for r in mon.records()}
    assert recs["a"].status == "FINISHED" and recs["b"].status == "FINISHED"  # b did nothing wrong
    assert (recs["a"].stopped_by, recs["b"].stopped_by, recs["b"].stopped_at_epoch) == (None, "scheduler", 1)
    assert (recs["a"].label, recs["b"].label) == ("completed", "stopped early")
    assert recs["a"].objective_best == pytest.approx(1 / 3) and recs["a"].objective_last == pytest.approx(1 / 3)
    assert [h.epoch for h in recs["a"].history] == [1, 2, 3]
    assert sink.events[:2] == [("started", "a"), ("started", "b")]
    assert sink.events[-2:] == [("ended", "a", "FINISHED"), ("ended", "b", "FINISHED")]


def test_best_follows_the_goal_and_keeps_the_latest_checkpoint_with_its_best_epoch():
    mon, _ = make_monitor(epochs=6, sign=-1.0)  # maximize
    t = FakeTrial("m")
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 0.7, checkpoint_path="/c1", checkpoint_epoch=1, checkpoint_objective=0.7))
    mon.on_trial_result(0, [], t, result(2, 0.9))  # better, kept in memory by the worker
    mon.on_trial_result(0, [], t, result(3, 0.8, checkpoint_path="/c3", checkpoint_epoch=2, checkpoint_objective=0.9))
    rec = mon.records()[0]
    assert rec.objective_best == 0.9 and rec.objective_last == 0.8
    # the epoch-3 checkpoint holds epoch 2's weights
    assert (mon.trials["m"].checkpoint, mon.trials["m"].checkpoint_epoch) == ("/c3", 2)
    mon.on_trial_result(0, [], t, result(4, 0.6))  # no checkpoint: the last one stays
    assert (mon.trials["m"].checkpoint, mon.trials["m"].checkpoint_epoch) == ("/c3", 2)
    # a PBT clone continues with a donor's best (0.85), worse than the trial's own: not taken
    mon.on_trial_result(0, [], t, result(5, 0.7, checkpoint_path="/c5", checkpoint_epoch=3, checkpoint_objective=0.85))
    assert mon.trials["m"].checkpoint == "/c3"
    mon.on_trial_result(0, [], t, result(6, 0.95, checkpoint_path="/c6", checkpoint_epoch=6, checkpoint_objective=0.95))
    assert (mon.trials["m"].checkpoint, mon.trials["m"].checkpoint_epoch) == ("/c6", 6)


def test_error_is_failed_with_a_one_line_message_even_before_start():
    mon, sink = make_monitor()
    started = FakeTrial(
        "s", error="Traceback (most recent call last):\n  ...\nFloatingPointError: training loss is nan"
    )
    mon.on_trial_start(0, [], started)
    mon.on_trial_error(0, [], started)
    never = FakeTrial("n", {"lr": 1.0}, error="ray.exceptions.RayActorError: The actor died unexpectedly")
    mon.on_trial_error(0, [], never)
    recs = {r.trial_id: r for r in mon.records()}
    assert recs["s"].status == "FAILED" and recs["s"].error == "FloatingPointError: training loss is nan"
    assert recs["n"].status == "FAILED" and recs["n"].params == {"lr": 1.0}
    assert mon.trials["s"].error_text.startswith("Traceback")
    assert ("started", "n") in sink.events and ("ended", "n", "FAILED") in sink.events


def test_trials_cut_off_by_the_time_budget_are_finished_and_stopped_early():
    mon, sink = make_monitor()
    t = FakeTrial("t")
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 1.0))
    mon.on_experiment_end([])
    assert mon.records()[0].status == "FINISHED" and mon.records()[0].label == "stopped early"
    assert mon.trials["t"].stopped_by == "time budget"
    mon.on_experiment_end([])  # idempotent
    assert sink.events.count(("ended", "t", "FINISHED")) == 1


def test_only_an_interruption_ends_a_trial_as_killed():
    mon, sink = make_monitor()
    t = FakeTrial("t")
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 1.0))
    mon.close_running("interrupted")
    rec = mon.records()[0]
    assert (rec.status, rec.stopped_by, rec.label) == ("KILLED", "interrupted", "interrupted")
    assert sink.events[-1] == ("ended", "t", "KILLED")


def test_a_restored_book_reads_early_stopped_trials_saved_as_killed():
    from ludwig_hpo.results.live import LiveTrial

    mon, _ = make_monitor()
    old = {  # a book saved by a sweep that ended early-stopped trials as KILLED
        "s": LiveTrial("s", {}, {}, "trial_s", status="KILLED"),
        "b": LiveTrial("b", {}, {}, "trial_b", status="KILLED", stopped_by="time budget"),
        "i": LiveTrial("i", {}, {}, "trial_i", status="KILLED", stopped_by="interrupted"),
        "f": LiveTrial("f", {}, {}, "trial_f", status="FINISHED"),
    }
    mon.set_state({"trials": old})
    assert {tid: (t.status, t.stopped_by) for tid, t in mon.trials.items()} == {
        "s": ("FINISHED", "scheduler"),
        "b": ("FINISHED", "time budget"),
        "i": ("KILLED", "interrupted"),
        "f": ("FINISHED", None),
    }


def test_monitor_pickles_without_its_sinks():
    import pickle

    mon, _ = make_monitor()
    clone = pickle.loads(pickle.dumps(mon))
    assert clone.sinks == [] and clone.epochs == 3


def _rec(tid, params, status="FINISHED", last=1.0):
    return TrialRecord(tid, status, params, last, last)


def test_kfold_jobs_train_for_the_epochs_at_which_the_search_trial_was_best():
    from ludwig_hpo.results import EpochRecord

    rec = TrialRecord(
        "a", "FINISHED", {"lr": 1}, 0.5, 0.2, history=(EpochRecord(1, 0.9), EpochRecord(2, 0.2), EpochRecord(3, 0.5))
    )
    assert {j["epochs"] for j in kfold_jobs([rec], k=2)} == {2}


def test_without_early_stopping_a_completed_trial_is_finished_whatever_its_epochs():
    mon, _ = make_monitor(epochs=10)
    mon.early_stopping = False
    t = FakeTrial("k")
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 0.3))
    mon.on_trial_complete(0, [], t)
    assert mon.records()[0].status == "FINISHED"


def test_kfold_jobs_names_and_tags():
    jobs = kfold_jobs([_rec("a", {"lr": 1}), _rec("b", {"lr": 2})], k=2)
    assert [job_name(j) for j in jobs] == [
        "config1-fold0",
        "config1-fold1",
        "config1-test",
        "config2-fold0",
        "config2-fold1",
        "config2-test",
    ]
    assert job_tags(jobs[2]) == {
        "phase": "kfold",
        "run_kind": "test",
        "kfold": "test",
        "config_rank": 1,
        "source_trial_id": "a",
    }
    assert jobs[3]["params"] == {"lr": 2}


def test_aggregate_kfold_counts_failed_folds_and_keeps_fold_order():
    jobs = kfold_jobs([_rec("a", {"lr": 1})], k=3)
    runs = [
        (job_tags(jobs[2]), _rec("x2", {"lr": 1}, last=0.3)),
        (job_tags(jobs[0]), _rec("x0", {"lr": 1}, last=0.1)),
        (job_tags(jobs[1]), _rec("x1", {"lr": 1}, status="FAILED", last=None)),
        (job_tags(jobs[3]), _rec("xt", {"lr": 1}, last=0.25)),
    ]
    (rec,) = aggregate_kfold(runs, k=3, metric="y/loss")
    assert rec.fold_scores == (0.1, 0.3) and rec.failed_folds == 1
    assert rec.test_score == 0.25 and rec.config_rank == 1 and rec.trial_id == "a"


def test_a_restored_handle_forwards_to_the_monitor_the_resuming_driver_registered():
    """Tune pickles its callbacks into the experiment folder and restores them, then hands
    them the saved callback state: the trials that ended before the interruption."""
    import pickle

    mon, _ = make_monitor(epochs=2)
    handle = mon.handle("search")
    a = FakeTrial("a", {"lr": 0.1})
    handle.on_trial_start(0, [], a)
    handle.on_trial_result(0, [], a, result(1, 0.5))
    handle.on_trial_result(0, [], a, result(2, 0.4))
    handle.on_trial_complete(0, [], a)
    saved_callback, saved_state = pickle.dumps(handle), pickle.dumps(handle.get_state())

    resumed, sink = make_monitor(epochs=2)  # a new driver process registers its own monitor
    restored = pickle.loads(saved_callback)
    resumed.handle("search")
    restored.set_state(pickle.loads(saved_state))
    assert sink.events == [("restored", ["a"])]
    b = FakeTrial("b", {"lr": 0.2})
    restored.on_trial_start(0, [], b)
    restored.on_trial_result(0, [], b, result(1, 0.3))
    restored.on_trial_complete(0, [], b)
    recs = {r.trial_id: r for r in resumed.records()}
    assert recs["a"].status == "FINISHED" and recs["a"].objective_best == 0.4
    assert (recs["b"].status, recs["b"].stopped_by) == ("FINISHED", "scheduler")


def _journal_entry(t, mon, tmp_path):
    from ludwig_hpo.driver.journal import JournalSink, read_journal

    JournalSink(tmp_path / "journal.jsonl").trial_ended(mon.trials[t.trial_id])
    return read_journal(tmp_path / "journal.jsonl")[t.trial_id]


def test_a_trial_tune_saw_end_after_the_last_saved_state_is_ended_as_the_journal_has_it(tmp_path):
    done, _ = make_monitor(epochs=2)  # the driver before the interruption: the trial ended
    t = FakeTrial("late", {"lr": 0.1})
    done.on_trial_start(0, [], t)
    done.on_trial_result(0, [], t, result(1, 0.5))
    done.on_trial_result(0, [], t, result(2, 0.25))
    done.on_trial_complete(0, [], t)
    entry = _journal_entry(t, done, tmp_path)

    mon, sink = make_monitor(epochs=2)  # the resumed driver, whose restored record has it running
    mon.replayed = {"late": entry}
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 0.5))
    t.status, t.last_result = "TERMINATED", result(2, 0.25)  # Tune's restored record
    mon.on_experiment_end([t])
    rec = mon.records()[0]
    assert rec.status == "FINISHED" and rec.objective_last == 0.25
    assert sink.events[-1] == ("ended", "late", "FINISHED")


def test_trials_tune_stopped_at_the_time_budget_are_killed_by_the_time_budget():
    mon, sink = make_monitor(epochs=4)
    cut, failed = FakeTrial("cut", {"lr": 0.1}), FakeTrial("failed", {"lr": 0.2}, error="RuntimeError: boom")
    for t in (cut, failed):
        mon.on_trial_start(0, [], t)
        mon.on_trial_result(0, [], t, result(1, 0.5))
    cut.status, failed.status = "TERMINATED", "ERROR"  # how Tune leaves them, without an event
    mon.on_experiment_end([cut, failed])
    recs = {r.trial_id: r for r in mon.records()}
    assert (recs["cut"].status, mon.trials["cut"].stopped_by) == ("FINISHED", "time budget")
    assert recs["failed"].status == "FAILED" and mon.trials["failed"].error == "RuntimeError: boom"


def test_tunes_clean_up_after_an_error_ends_no_trial():
    mon, sink = make_monitor(epochs=4)
    t = FakeTrial("t", {"lr": 0.1})
    mon.on_trial_start(0, [], t)
    t.status = "TERMINATED"  # Tune's clean-up stops the running trials
    try:
        raise RuntimeError("the store is down")
    except RuntimeError:
        mon.on_experiment_end([t])  # called by Tune inside its except block
    assert mon.trials["t"].status == "RUNNING" and sink.events == [("started", "t")]


def test_the_handle_forwards_every_tune_event_the_monitor_handles():
    from ray.tune import Callback

    from ludwig_hpo.driver.monitor import MonitorHandle

    events = {name for name in vars(SweepMonitor) if name.startswith("on_") and hasattr(Callback, name)}
    assert events >= {"on_trial_start", "on_trial_result", "on_trial_complete", "on_trial_error", "on_trial_recover"}
    assert {name for name in events if name not in vars(MonitorHandle)} == set()


def test_a_retried_trial_keeps_one_record_and_counts_its_retries():
    mon, sink = make_monitor(epochs=1)
    t = FakeTrial("r", {"lr": 0.1}, error="RuntimeError: worker died")
    mon.on_trial_start(0, [], t)
    mon.on_trial_recover(0, [], t)
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 0.2))
    mon.on_trial_complete(0, [], t)
    assert [r.status for r in mon.records()] == ["FINISHED"]
    assert mon.trials["r"].retries == 1
    assert ("retried", "r", 1) in sink.events


def test_a_write_error_met_while_tune_saves_is_raised_again_when_the_phase_ends():
    class Broken(RecordingSink):
        def wait_for_ended(self):
            raise OSError("the store is down")

        def flush(self):
            pass

    mon = SweepMonitor(
        epochs=1, goal_sign=1.0, sinks=[Broken()], describe=lambda tid, cfg: TrialDescription(dict(cfg), {}, tid)
    )
    with pytest.raises(OSError):
        mon.get_state()  # Tune's last save logs and drops it
    with pytest.raises(OSError, match="store is down"):
        mon.flush()
    mon.flush()  # raised once
