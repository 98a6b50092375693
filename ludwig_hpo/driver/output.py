"""A sweep's output folder and tracking store: created with the parent run (or reopened by a
resume), and closed with the parent run's final status. Driver process only."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.driver.journal import read_journal
from ludwig_hpo.driver.paths import SweepPaths, choose_output_dir
from ludwig_hpo.driver.provenance import start_parent_run
from ludwig_hpo.driver.state import SweepKind, SweepState, fingerprint
from ludwig_hpo.driver.sweep_run import SweepOutput
from ludwig_hpo.errors import ConfigError, DataError, one_line_error
from ludwig_hpo.results.records import TrialStatus, ended_status
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.resolve import resolve_tracking

if TYPE_CHECKING:
    from ludwig_hpo.tracking.process import PendingStore

#: Tags of a resumed sweep's child runs that were still RUNNING when the sweep finished.
LOST_RUN_TAGS = {
    layout.STATUS_TAG: "KILLED",
    layout.STOPPED_BY_TAG: layout.STOPPED_BY_INTERRUPTED,
    layout.NOTE_TAG: "lost with the interrupted sweep; ran again under a new trial id",
}
#: The error of the child runs that were running when the sweep stopped on an error (then its error).
FAILED_WITH_SWEEP = "the sweep stopped on an error while this run was running"


def create_output(
    loaded: LoadedSweep,
    output_root: Path | None,
    dataset: Path | None,
    console: Console,
    *,
    nest_under: str | None = None,
    kind: SweepKind = "sweep",
    pending: PendingStore | None = None,
) -> SweepOutput:
    """A new output folder (:func:`~ludwig_hpo.driver.paths.choose_output_dir`) holding
    ``sweep.yaml`` and ``state.json``, the tracking store (in a process of its own, see
    :mod:`ludwig_hpo.tracking.resolve` for which) and the parent run. On any error nothing of
    it is left: the folders this call created are removed and the store is closed. ``kind``
    is in ``state.json`` from the start (an ``hpo train`` run stopped early is no sweep).
    ``pending``: the store's process, started ahead (it imported MLflow meanwhile).

    Raises:
        DataError: the output folder cannot be created.
        TrackingError: the store cannot be reached.
    """
    from ludwig_hpo.tracking.process import StoreProcess

    cfg = loaded.config
    paths = SweepPaths(choose_output_dir(loaded, output_root))
    created = paths.root
    while not created.parent.exists():  # the outermost folder this sweep creates
        created = created.parent
    try:
        paths.root.mkdir(parents=True)
    except OSError as e:
        raise DataError(
            f"cannot create the output folder ({e.strerror or e})",
            source=str(paths.root),
            fix="pass a writable folder with --output",
        ) from None
    target = resolve_tracking(cfg.tracking, cfg.name, os.environ, paths.root)
    store = None
    try:
        store = StoreProcess(target.uri, target.experiment, artifact_location=target.artifact_location, pending=pending)
        paths.sweep_file.write_text(loaded.text)
        parent = start_parent_run(store, loaded, paths, nest_under=nest_under)
        state = SweepState(
            fingerprint=fingerprint(loaded.text, loaded.raw),
            sweep_file=str(Path(loaded.path).resolve()),
            parent_run_id=parent,
            tracking_uri=store.uri,
            dataset=str(dataset) if dataset else None,
            kind=kind,
        )
        output = SweepOutput(paths, store, parent, state, resumed=False)
        output.enter(state.phase)
    except BaseException:
        if store is not None:
            store.close()
        shutil.rmtree(created, ignore_errors=True)  # nothing half-written
        raise
    origin = "" if target.embedded else f", from {target.origin}"
    console.print(
        f"output: {paths.root}\nmlflow: {store.uri} (experiment {target.experiment!r}{origin}, parent run {parent})",
        highlight=False,
    )
    return output


def reopen_output(
    loaded: LoadedSweep, state: SweepState, root: Path, console: Console, pending: PendingStore | None = None
) -> SweepOutput:
    """The interrupted sweep's output folder ``root``, its store (the one ``state`` names)
    and its parent run, marked RUNNING again. ``pending``: the store's process, started ahead.

    Raises:
        TrackingError: the store cannot be reached.
    """
    from ludwig_hpo.tracking.process import StoreProcess

    cfg = loaded.config
    store = StoreProcess(state.tracking_uri, cfg.tracking.experiment or cfg.name, pending=pending)
    try:
        store.reopen_run(state.parent_run_id)
    except BaseException:
        store.close()
        raise
    console.print(
        f"resuming the unfinished sweep in {root} (it stopped during its "
        f"{state.phase} phase)\nmlflow: {store.uri} (parent run {state.parent_run_id})",
        highlight=False,
    )
    return SweepOutput(SweepPaths(root), store, state.parent_run_id, state, resumed=True)


def end_running_children(
    output: SweepOutput, status: TrialStatus, tags: dict[str, Any], *, journal: bool = True
) -> list[str]:
    """End every child run of the sweep still RUNNING, so none is left RUNNING when the sweep
    stops: a trial the journal holds as ended ends as it recorded (its end was still queued),
    the others as ``status`` (``FAILED``, ``KILLED``) with ``tags``. Returns the trial ids
    ended as ``status``. Driver only; a resume reopens the runs of the trials it continues.

    Raises:
        Exception: the store's error.
    """
    store, parent = output.store, output.parent
    recorded = read_journal(output.paths.journal) if journal else {}
    running = store.children_by_tag(parent, layout.TRIAL_ID_TAG, status="RUNNING")
    closed = []
    for tid, run_id in sorted(running.items()):
        entry = recorded.get(tid)
        if entry is not None:
            ended, stopped_by = ended_status(entry["status"], entry.get("stopped_by"))
            store.set_tags(
                run_id, {layout.STATUS_TAG: ended, **({layout.STOPPED_BY_TAG: stopped_by} if stopped_by else {})}
            )
            store.end_run(run_id, ended)
            continue
        store.set_tags(run_id, {layout.STATUS_TAG: status, **tags})
        store.end_run(run_id, status)
        closed.append(tid)
    return closed


def _next_step(error: BaseException, root: Path) -> str:
    """What a user does after the sweep stopped on ``error``: resume it, or, when the sweep
    file must change (resuming the same file meets the same error), start it again."""
    if isinstance(error, ConfigError):
        return (
            "the sweep file must change to get past this error, and a changed file cannot resume: "
            f"fix it, then rerun with --restart (or change 'name:'); {root} keeps what ran"
        )
    return f"once the cause is fixed, rerun the same command (or hpo resume {root}) to continue from its last state"


@contextlib.contextmanager
def closing_parent_run(output: SweepOutput, console: Console) -> Iterator[None]:
    """Run the body, then end the parent run (FINISHED, KILLED after Ctrl-C or SIGTERM, else
    FAILED) and close the store. A resumed sweep that finished marks the child runs still
    RUNNING (trials lost with the interruption, which ran again) KILLED and says so. After an
    interruption or an error no child run is left RUNNING either (KILLED, or FAILED with the
    error): ``state.json`` and the journal keep the phase the sweep was in, so a rerun of the
    same command resumes it; a line says what to do next."""
    store, parent = output.store, output.parent
    status = "FAILED"
    try:
        yield
        status = "FINISHED"
        if output.resumed:
            lost = store.close_running_children(parent, LOST_RUN_TAGS)
            if lost:
                console.print(
                    f"note: {len(lost)} run(s) of trials that started after the sweep's last "
                    f"saved state were lost and ran again: {', '.join(lost)} (marked KILLED)",
                    highlight=False,
                )
    except (KeyboardInterrupt, SystemExit):
        status = "KILLED"
        with contextlib.suppress(Exception):  # the interruption is what is shown
            end_running_children(output, "KILLED", {layout.STOPPED_BY_TAG: layout.STOPPED_BY_INTERRUPTED})
        console.print(
            f"interrupted: the sweep's MLflow runs are marked KILLED ({store.uri}); "
            f"resume it with: hpo resume {output.paths.root}",
            highlight=False,
        )
        raise
    except Exception as e:
        closed: list[str] = []
        with contextlib.suppress(Exception):  # the sweep's error is what is shown
            tags = {layout.ERROR_TAG: f"{FAILED_WITH_SWEEP}: {one_line_error(f'{type(e).__name__}: {e}')}"}
            closed = end_running_children(output, "FAILED", tags)
        ended = f" ({len(closed)} trial run(s) that were running: FAILED)" if closed else ""
        console.print(
            f"the sweep stopped on an error: its MLflow parent run is marked FAILED{ended}; {_next_step(e, output.paths.root)}",
            highlight=False,
        )
        raise
    finally:
        try:
            store.end_run(parent, status)
        finally:
            store.close()
