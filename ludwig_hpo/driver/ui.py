"""``hpo ui``: the MLflow UI on a sweep's embedded store, opened on the sweep's runs.

MLflow 3's UI opens on its GenAI overview (traces, token usage) unless told otherwise; a
sweep's runs are shown by the experiment's run list in its machine-learning view, which the
URL names (:func:`runs_url`). Plain ``hpo ui`` serves the current folder's store, else the
newest sweep's under ``hpo_results/`` (:func:`newest_sweep`; folders of ``hpo train`` runs are
not sweeps). Driver process (the command's own), before it becomes the MLflow server.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path

from rich.console import Console

from ludwig_hpo.driver.paths import DEFAULT_OUTPUT_ROOT, SweepPaths
from ludwig_hpo.driver.state import read_state
from ludwig_hpo.errors import DataError

#: The UI's query naming its machine-learning view (runs, metrics, models) rather than GenAI's.
ML_VIEW_QUERY = "workflowType=machine_learning"
#: Seconds the browser opener waits for the server to listen before it gives up.
BROWSER_WAIT_S = 120.0


def runs_url(host: str, port: int, experiment_id: str | None, view: str | None = None) -> str:
    """The UI's page of an experiment's run list in the machine-learning view, e.g.
    ``http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning``; the UI's
    experiment list without ``experiment_id``. ``view``: a further query, the shared view that
    opens the list on the sweep's columns (:func:`ludwig_hpo.tracking.ui_view.write_sweep_view`).
    An IPv6 ``host`` is bracketed. Pure."""
    shown = f"[{host}]" if ":" in host else host
    page = f"/experiments/{experiment_id}/runs" if experiment_id else "/experiments"
    query = f"{ML_VIEW_QUERY}&{view}" if view and experiment_id else ML_VIEW_QUERY
    return f"http://{shown}:{port}/#{page}?{query}"


def sweep_view(paths: SweepPaths, experiment_id: str | None) -> str | None:
    """Write the sweep's run-list view (its metric and searched parameters as columns) on its
    experiment and return its URL query; None for a folder without a sweep's parent run, or when
    the store refuses the write (the UI then opens on its own columns)."""
    from mlflow.exceptions import MlflowException

    from ludwig_hpo.tracking.ui_view import write_sweep_view

    state = read_state(paths.root)
    if experiment_id is None or state is None:
        return None
    try:
        return write_sweep_view(paths.tracking_uri, experiment_id, state.parent_run_id)
    except MlflowException:
        return None


def is_sweep_folder(root: Path) -> bool:
    """Whether ``root`` is a sweep's output folder with its embedded store (not an ``hpo
    train`` run's: its ``state.json`` says ``kind: train``)."""
    paths = SweepPaths(root)
    if not paths.mlflow_db.is_file():
        return False
    state = read_state(root)
    return state is None or state.kind == "sweep"


def newest_sweep(output_root: Path = DEFAULT_OUTPUT_ROOT) -> Path | None:
    """The sweep folder under ``output_root`` whose store was written last (None when there is
    none); folders of ``hpo train`` runs are skipped."""
    found = [p for p in output_root.glob("*") if p.is_dir() and is_sweep_folder(p)]
    if not found:
        return None
    return max(found, key=lambda p: SweepPaths(p).mlflow_db.stat().st_mtime)


def choose_folder(results_dir: Path | None, here: Path = Path(".")) -> tuple[Path, str | None]:
    """The folder ``hpo ui`` serves and, when it was not named, the line saying which one was
    chosen and how to choose another: ``results_dir``; else ``here`` when it holds a store; else
    the newest sweep under ``here``'s ``hpo_results/``.

    Raises:
        DataError: none of these holds a store.
    """
    if results_dir is not None:
        return results_dir, None
    if SweepPaths(here).mlflow_db.is_file():
        return here, None
    root = here / DEFAULT_OUTPUT_ROOT
    newest = newest_sweep(root)
    if newest is None:
        raise DataError(
            f"no {SweepPaths(here).mlflow_db.name} here nor in any sweep under {DEFAULT_OUTPUT_ROOT}/",
            source=str(here.resolve()),
            fix="pass the output folder printed by 'hpo sweep' (hpo ui DIR)",
        )
    others = sum(1 for p in root.glob("*") if p.is_dir() and is_sweep_folder(p)) - 1
    more = f" ({others} other sweep(s) there)" if others else ""
    return newest, f"newest sweep in {DEFAULT_OUTPUT_ROOT}/: {newest.name}{more}; another one: hpo ui DIR"


def sweep_experiment_id(paths: SweepPaths) -> str | None:
    """The MLflow experiment id of the sweep whose embedded store is in ``paths`` (from its
    parent run), else of the store's newest experiment with runs; None when it has none."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=paths.tracking_uri)
    state = read_state(paths.root)
    if state is not None:
        try:
            return str(client.get_run(state.parent_run_id).info.experiment_id)
        except Exception:  # noqa: BLE001 - the sweep's runs are in another store: take this one's newest
            pass
    experiments = [e for e in client.search_experiments() if e.name != "Default"]
    if not experiments:
        return None
    return str(max(experiments, key=lambda e: e.last_update_time or 0).experiment_id)


def check_port(host: str, port: int) -> None:
    """Fail in one line when ``host:port`` cannot be listened on (a taken port would fail
    inside MLflow with a page of logs).

    Raises:
        DataError: the port is out of range or taken.
    """
    if not 0 < port < 65536:
        raise DataError(f"port {port} is out of range", key="--port", fix="use a port between 1 and 65535")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as e:
            raise DataError(
                f"cannot listen on {host}:{port} ({e.strerror or e})",
                key="--port",
                fix="choose a free port, e.g. --port 5001",
            ) from None


def _open_when_listening(url: str, host: str, port: int) -> None:
    """In a forked child: wait until the server listens, open ``url`` in the browser, exit."""
    import webbrowser

    deadline = time.monotonic() + BROWSER_WAIT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                break
        except OSError:
            time.sleep(0.5)
    else:
        os._exit(0)
    try:
        webbrowser.open(url)
    finally:
        os._exit(0)


#: MLflow's server imports Starlette's WSGI middleware, which warns (a file path and a source
#: line on the console) that Starlette will drop it: MLflow's matter, nothing the user can act on.
_MLFLOW_IMPORT_WARNING = "ignore:starlette.middleware.wsgi is deprecated:UserWarning"


def _ui_warnings() -> str:
    """PYTHONWARNINGS for the MLflow UI process: the user's own filters, then
    :data:`_MLFLOW_IMPORT_WARNING` (later entries win)."""
    own = os.environ.get("PYTHONWARNINGS", "")
    return f"{own},{_MLFLOW_IMPORT_WARNING}" if own else _MLFLOW_IMPORT_WARNING


def serve(results_dir: Path | None, *, host: str, port: int, browser: bool, out: Console) -> None:
    """Print the sweep's runs URL, open it in the browser (unless ``browser`` is False or
    stdout is no terminal: a script or a test starts no browser), and
    become the MLflow UI process (``mlflow ui`` on the folder's embedded store): Ctrl-C and
    SIGTERM reach it directly, and its exit code is the command's. Does not return.

    Raises:
        DataError: no store to serve, or the port cannot be listened on.
    """
    folder, chosen = choose_folder(results_dir)
    paths = SweepPaths(folder)
    if not paths.mlflow_db.is_file():
        raise DataError(
            f"no {paths.mlflow_db.name} in this folder",
            source=str(paths.root),
            fix="pass the output folder printed by 'hpo sweep'",
        )
    check_port(host, port)
    experiment_id = sweep_experiment_id(paths)
    url = runs_url(host, port, experiment_id, sweep_view(paths, experiment_id))
    if chosen:
        out.print(chosen, highlight=False)
    out.print(f"MLflow UI for {paths.tracking_uri}\n  {url}\n(Ctrl-C stops it)", highlight=False, soft_wrap=True)
    mlflow = shutil.which("mlflow") or str(Path(sys.executable).parent / "mlflow")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "PYTHONWARNINGS": _ui_warnings()}
    sys.stdout.flush()
    if browser and sys.stdout.isatty() and os.fork() == 0:  # a person at a terminal, not a script
        _open_when_listening(url, "127.0.0.1" if host in ("0.0.0.0", "::") else host, port)
    args = [mlflow, "ui", "--backend-store-uri", paths.tracking_uri, "--host", host, "--port", str(port)]
    os.execve(mlflow, [*args, "--workers", "1"], env)
