"""The pools actor's bookkeeping: a group's failed starts become the next run's restarts,
which only that run's first report carries, and an ended run becomes one RunRecord."""

from __future__ import annotations

from ludwig_hpo.execution.pool_records import RunResult
from ludwig_hpo.execution.pool_state import PoolGroup, PoolRun
from ludwig_hpo.train.report_keys import WORKER_GROUP_RESTARTS


def test_failed_starts_go_to_the_next_run_once_and_only_its_first_report_says_so():
    group = PoolGroup(slot=1, failed_starts=2)
    run = PoolRun("tok", "trial_1", slot=1, started=10.0)
    group.hand_restarts_to(run)
    assert (run.restarts, group.failed_starts) == (2, 0)
    run.add_report({"loss": 1.0})
    run.add_report({"loss": 0.5})
    assert run.messages == [{"loss": 1.0, WORKER_GROUP_RESTARTS: 2}, {"loss": 0.5}]
    assert run.epochs == 2 and run.event.is_set()


def test_an_ended_run_becomes_one_record():
    run = PoolRun("tok", "trial_1", slot=0, started=10.0, epochs=3, epochs_at_stop=2)
    run.result, run.ended = RunResult("stopped"), 12.5
    assert run.record(build=2) == {
        "trial_id": "trial_1",
        "slot": 0,
        "start": 10.0,
        "end": 12.5,
        "status": "stopped",
        "build": 2,
        "epochs": 3,
        "epochs_at_stop": 2,
    }
