"""The sweep's journal (``journal.jsonl`` in its output folder): one line per trial that ended,
written by the driver the moment it ends, with the results it reported.

Tune saves its experiment state every few seconds; a trial that ends after the last save and
before a crash would run again on resume. With the journal, it reports its recorded results
instead (the same values reach the searcher, the scheduler and MLflow), so nothing that ended
is trained twice.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from ludwig_hpo.results.records import TrialStatus, ended_status
from ludwig_hpo.train.report_keys import CHECKPOINT_PATH, OBJECTIVE, TIME_ATTR

if TYPE_CHECKING:
    from ludwig_hpo.results.live import LiveTrial

#: Tune's own saved experiment states in an experiment folder (the newest sorts last).
TUNE_STATE_GLOB = "experiment_state-*.json"


class _EntryKeys(TypedDict):
    trial_id: str
    experiment: str
    status: TrialStatus
    results: list[dict[str, Any]]


class JournalEntry(_EntryKeys, total=False):
    """One line of the journal: a trial that ended (FINISHED; KILLED in older journals, for a
    trial stopped early: :func:`ended_status` reads both).

    Keys: ``trial_id``; ``experiment`` (``search`` or ``kfold``); ``config`` (the searcher's
    encoded values, scalars only); ``status``; ``stopped_by`` (what stopped a trial before its
    last epoch: ``scheduler``, ``time budget``; None when it ran every epoch);
    ``started``/``ended`` (seconds since the epoch; absent from entries written without times);
    ``checkpoint`` (the folder holding its best weights) and ``checkpoint_epoch``; ``results``
    (what it reported per epoch, in order, with :data:`OBJECTIVE` and :data:`TIME_ATTR`).
    """

    config: dict[str, Any]
    stopped_by: str | None
    started: float | None
    ended: float | None
    checkpoint: str | None
    checkpoint_epoch: int | None


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, bool, int)) or (isinstance(v, float) and math.isfinite(v))


class JournalSink:
    """A :class:`~ludwig_hpo.driver.monitor.SweepMonitor` sink appending each ended trial (driver only).

    Args:
        path: the journal file (appended to; created on the first ended trial).
        experiment: the Tune experiment the trials belong to (``search`` or ``kfold``).
    """

    def __init__(self, path: Path, experiment: str = "search") -> None:
        self.path = path
        self.experiment = experiment

    def trials_restored(self, trials: list[LiveTrial]) -> None:
        pass

    def trial_started(self, t: LiveTrial) -> None:
        pass

    def trial_result(self, t: LiveTrial, result: dict[str, Any]) -> None:
        pass

    def trial_retried(self, t: LiveTrial) -> None:
        pass

    def trial_ended(self, t: LiveTrial) -> None:
        if t.status != "FINISHED" or not t.history:
            return  # failed or interrupted (KILLED) trials run again on resume
        base = {k: v for k, v in t.last.items() if _scalar(v) and "/" not in k}
        best = t.checkpoint_epoch
        results = []
        for h in t.history:
            r: dict[str, Any] = {
                **base,
                **{k: v for k, v in h.metrics.items() if _scalar(v)},
                OBJECTIVE: h.objective,
                TIME_ATTR: h.epoch,
            }
            r.pop(CHECKPOINT_PATH, None)
            if t.checkpoint and best is not None and h.epoch == best:
                r[CHECKPOINT_PATH] = t.checkpoint
            results.append(r)
        line = json.dumps(
            {
                "trial_id": t.trial_id,
                "experiment": self.experiment,
                "config": {k: v for k, v in t.config.items() if _scalar(v) or v is None},
                "status": t.status,
                "stopped_by": t.stopped_by,
                "started": t.started,
                "ended": t.ended,
                "checkpoint": t.checkpoint,
                "checkpoint_epoch": t.checkpoint_epoch,
                "results": results,
            }
        )
        with self.path.open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def read_journal(path: Path) -> dict[str, JournalEntry]:
    """``{trial id: entry}`` of the trials the journal holds (the last line of a trial wins).
    A torn last line, from a crash mid-write, is ignored."""
    out: dict[str, JournalEntry] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        out[entry["trial_id"]] = cast(JournalEntry, entry)
    return out


def restore_trial(t: LiveTrial, entry: JournalEntry) -> None:
    """Make the monitor's record of a replayed trial what the journal says it was: the
    scheduler of a resumed sweep may cut a replay short, but the trial had ended."""
    from ludwig_hpo.results import EpochRecord

    t.history = [
        EpochRecord(
            epoch=int(r[TIME_ATTR]), objective=float(r[OBJECTIVE]), metrics={k: v for k, v in r.items() if "/" in k}
        )
        for r in entry["results"]
    ]
    t.status, t.stopped_by = ended_status(entry["status"], entry.get("stopped_by"))
    t.checkpoint, t.checkpoint_epoch = entry.get("checkpoint"), entry.get("checkpoint_epoch")
    if entry["results"]:
        t.last = dict(entry["results"][-1])
    started, ended = entry.get("started"), entry.get("ended")
    if started is not None and ended:  # an entry without times
        t.started, t.ended = started, ended
    t.replayed = True


def _saved_trial_data(experiment_dir: Path) -> list[list[str]] | None:
    """``trial_data`` of Tune's last saved experiment state under ``experiment_dir``: a
    ``[trial json, run metadata json]`` pair per trial (None when there is none or it
    cannot be read)."""
    states = sorted(experiment_dir.glob(TUNE_STATE_GLOB))
    if not states:
        return None
    try:
        return list(json.loads(states[-1].read_text())["trial_data"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def saved_trial_ids(experiment_dir: Path) -> set[str] | None:
    """Ids of the trials in Tune's last saved experiment state under ``experiment_dir``
    (None when there is none). Driver only."""
    data = _saved_trial_data(experiment_dir)
    try:
        return None if data is None else {json.loads(t[0])["trial_id"] for t in data}
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def restore_missing_checkpoints(experiment_dir: Path) -> list[str]:
    """Make every checkpoint that Tune's last saved state restores a trial from exist again;
    returns the ids of the trials whose checkpoint was put back. Driver only, before
    ``Tuner.restore``.

    Tune keeps one checkpoint per trial (``CheckpointConfig(num_to_keep=1)``): a trial's new
    checkpoint deletes the previous one at once, and Tune saves its state, which names the
    new one, at the end of that step of its loop. A driver killed in between leaves a saved
    state naming a deleted checkpoint, and the resumed Tune fails that trial before it runs
    ("does not exist on storage anymore"). The trial's newer checkpoint (the one that replaced
    it, the newest ``checkpoint_*`` in its folder) is copied under the missing name: a trial
    the journal holds as ended replays its results whatever it restores, and any other one
    continues from its latest epoch.
    """
    import shutil

    import cloudpickle

    repaired = []
    for trial_json, meta_json in _saved_trial_data(experiment_dir) or []:
        try:
            trial, meta = json.loads(trial_json), json.loads(meta_json)
            if trial.get("status") in ("TERMINATED", "ERROR"):  # not restored
                continue
            manager = cloudpickle.loads(bytes.fromhex(meta["checkpoint_manager"]["value"]))
            latest = manager.latest_checkpoint_result
        except Exception:  # noqa: BLE001 - a state this version cannot read: Tune reports it
            continue
        if latest is None or latest.checkpoint is None or Path(latest.checkpoint.path).exists():
            continue
        missing = Path(latest.checkpoint.path)
        newer = sorted(p for p in missing.parent.glob("checkpoint_*") if p.is_dir())
        if newer:
            shutil.copytree(newer[-1], missing)
            repaired.append(trial["trial_id"])
    return repaired


def ended_outside_state(
    journal: dict[str, JournalEntry], experiment: str, experiment_dir: Path
) -> dict[str, JournalEntry]:
    """The journal's search trials of ``experiment`` that Tune's saved state does not hold:
    they started and ended after its last save (Tune saves at intervals in large sweeps).
    A resumed sweep counts them as ended instead of running new trials in their place."""
    saved = saved_trial_ids(experiment_dir)
    if saved is None:
        return {}
    return {
        tid: e for tid, e in journal.items() if e.get("experiment") == experiment and "config" in e and tid not in saved
    }
