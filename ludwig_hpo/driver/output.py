"""A sweep's output folder and tracking store: created with the parent run (or reopened by a
resume), and closed with the parent run's final status. Driver process only."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.driver.paths import SweepPaths, choose_output_dir
from ludwig_hpo.driver.provenance import start_parent_run
from ludwig_hpo.driver.state import SweepState, fingerprint
from ludwig_hpo.driver.sweep_run import SweepOutput
from ludwig_hpo.errors import DataError
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.resolve import resolve_tracking

#: Tags of a resumed sweep's child runs that were still RUNNING when the sweep finished.
LOST_RUN_TAGS = {
    layout.STATUS_TAG: "KILLED",
    layout.STOPPED_BY_TAG: layout.STOPPED_BY_INTERRUPTED,
    layout.NOTE_TAG: "lost with the interrupted sweep; ran again under a new trial id",
}


def create_output(loaded: LoadedSweep, output_root: Path | None, dataset: Path | None, console: Console) -> SweepOutput:
    """A new output folder (:func:`~ludwig_hpo.driver.paths.choose_output_dir`) holding
    ``sweep.yaml`` and ``state.json``, the tracking store (in a process of its own, see
    :mod:`ludwig_hpo.tracking.resolve` for which) and the parent run. On any error nothing of
    it is left: the folders this call created are removed and the store is closed.

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
        store = StoreProcess(target.uri, target.experiment, artifact_location=target.artifact_location)
        paths.sweep_file.write_text(loaded.text)
        parent = start_parent_run(store, loaded, paths)
        state = SweepState(
            fingerprint=fingerprint(loaded.text, loaded.raw),
            sweep_file=str(Path(loaded.path).resolve()),
            parent_run_id=parent,
            tracking_uri=store.uri,
            dataset=str(dataset) if dataset else None,
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


def reopen_output(loaded: LoadedSweep, state: SweepState, root: Path, console: Console) -> SweepOutput:
    """The interrupted sweep's output folder ``root``, its store (the one ``state`` names)
    and its parent run, marked RUNNING again.

    Raises:
        TrackingError: the store cannot be reached.
    """
    from ludwig_hpo.tracking.process import StoreProcess

    cfg = loaded.config
    store = StoreProcess(state.tracking_uri, cfg.tracking.experiment or cfg.name)
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


@contextlib.contextmanager
def closing_parent_run(output: SweepOutput, console: Console) -> Iterator[None]:
    """Run the body, then end the parent run (FINISHED, KILLED after Ctrl-C or SIGTERM, else
    FAILED) and close the store. A resumed sweep that finished marks the child runs still
    RUNNING (trials lost with the interruption, which ran again) KILLED and says so."""
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
        console.print(
            f"interrupted: the sweep's MLflow runs are marked KILLED ({store.uri}); "
            f"resume it with: hpo resume {output.paths.root}",
            highlight=False,
        )
        raise
    finally:
        try:
            store.end_run(parent, status)
        finally:
            store.close()
