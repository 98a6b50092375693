"""``hpo serve DIR|MODEL [--port P]``: a raw-row model behind MLflow's scoring server on
127.0.0.1 (``mlflow models serve --env-manager local``: this environment, no new one), so the
requests are MLflow's: ``POST /invocations`` with ``{"dataframe_records": [{column: value}, ...]}``
(or ``dataframe_split``), answered ``{"predictions": [{"<output>_predictions": ...}, ...]}``;
``GET /ping`` answers when it is up. ``"params": {"skip_bad_rows": true}`` leaves bad rows
out; otherwise a bad row is HTTP 400 with each bad row's reason.

The model is loaded here first, so a bad DIR or URI is one line before any server starts;
then the command becomes the server process (Ctrl-C and SIGTERM stop it). The CLI process.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

from ludwig_hpo.driver.ui import check_port

#: The only interface the server binds: this machine.
HOST = "127.0.0.1"
#: Default port (``hpo ui`` takes MLflow's 5000).
DEFAULT_PORT = 5001


def server_args(model_uri: str, port: int) -> list[str]:
    """The scoring server's command line. Pure."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "models",
        "serve",
        "--model-uri",
        model_uri,
        "--env-manager",
        "local",
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def serve_command(source: str, *, port: int, tracking_uri: str | None, out: Console) -> None:
    """Check the model loads, print the endpoint, and become MLflow's scoring server for it.
    Does not return.

    Raises:
        DataError: the model cannot be loaded (see
            :func:`~ludwig_hpo.driver.model_source.resolve_source`), or the port is taken.
    """
    from ludwig_hpo.driver.model_source import resolve_source

    model = resolve_source(source, tracking_uri)
    check_port(HOST, port)
    served = model.load()
    columns = ", ".join(served.input_columns())
    out.print(
        f"serving {model.uri} on http://{HOST}:{port}/invocations (MLflow's scoring server; Ctrl-C stops it)\n"
        f'  rows: {{"dataframe_records": [{{...}}]}} with the columns {columns}',
        highlight=False,
        soft_wrap=True,
    )
    # the server copies the model's artifacts once: no progress bar among its log lines
    env = {**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    if model.tracking_uri is not None:
        env["MLFLOW_TRACKING_URI"] = model.tracking_uri  # where the server resolves runs:/ and models:/
    args = server_args(model.uri, port)
    sys.stdout.flush()
    os.execve(args[0], args, env)
