"""``hpo``: the command line. User mistakes print one line and exit 2; ``--debug`` shows
the traceback. Heavy imports (Ray, torch, MLflow) happen inside the commands."""

from __future__ import annotations

import functools
import shutil
import signal
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from ludwig_hpo import cli_help as h
from ludwig_hpo.cli_help import DATASET, TEST_SET, TRAINING_SET, VALIDATION_SET, Command, Group, refuse_split_files
from ludwig_hpo.errors import ConfigError, UserError

if TYPE_CHECKING:
    from ludwig_hpo.driver.sweep import Sweep


app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Declarative hyperparameter sweeps for PyTorch: Optuna + Ray Tune + Ray Train DDP + MLflow.",
)
# Plain text by default: user strings (paths, keys, values) may hold "[...]", which rich
# would take for markup. Styled output passes markup=True with user parts escaped. On a
# terminal, lines wrap at its width; elsewhere (a file, a pipe) each stays one line.
out = Console(highlight=False, markup=False)
out.soft_wrap = not out.is_terminal
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


_state = {"debug": False}


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks of errors.")) -> None:
    _state["debug"] = debug


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt


def _guard(fn: Callable) -> Callable:
    """Run a command: a :class:`UserError` becomes one line on stderr and exit 2, any other
    error one line and exit 1 (with ``--debug``: the traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            if _state["debug"]:
                traceback.print_exc()
            err.print(f"[red]error:[/red] {escape(e.one_line())}", markup=True)
            raise typer.Exit(2) from None
        except (KeyboardInterrupt, SystemExit) as e:
            if isinstance(e, SystemExit) and e.code in (0, None):
                raise
            err.print("interrupted")
            raise typer.Exit(130) from None
        except typer.Exit:
            raise
        except Exception as e:
            if _state["debug"]:
                traceback.print_exc()
            first = (str(e).splitlines() or [""])[0]
            err.print(f"error: {type(e).__name__}: {first} (rerun with --debug for the traceback)", soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


def _example(command: str) -> str:
    """A command's help epilog: one command line to copy."""
    return f"Example: {command}"


_ADDRESS_HELP = (
    "A running Ray cluster (host:port of its head, as printed by 'ray start --head'); "
    "default: RAY_ADDRESS, else a private local cluster."
)
_WORKERS_HELP = "Workers per trial (DDP world size); overrides backend.num_workers."


def _with_cli_overrides(loaded, num_workers: int | None, sets: list[str] | None = None):
    from ludwig_hpo.config.overrides import parse_set, with_overrides

    for line in loaded.warnings:  # legacy Ludwig spellings upgraded by the loader
        err.print(f"warning: {line}")
    if num_workers is not None:
        loaded = with_overrides(loaded, [("backend.num_workers", num_workers)], source="--num-workers")
    return with_overrides(loaded, [parse_set(s) for s in sets or []])


@app.command(cls=Command, epilog=_example("hpo sweep sweeps/breast_cancer_tiny.yaml --output results"))
@_guard
def sweep(
    sweep_file: Path = typer.Argument(..., metavar="SWEEP_FILE", help="The sweep YAML file."),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="DIR", help="Root folder of results (default: hpo_results)."
    ),
    restart: bool = typer.Option(
        False, "--restart", help="Discard an unfinished sweep of this name instead of resuming it."
    ),
    dataset: Path | None = DATASET,
    training_set: Path | None = TRAINING_SET,
    validation_set: Path | None = VALIDATION_SET,
    test_set: Path | None = TEST_SET,
    num_workers: int | None = typer.Option(None, "--num-workers", metavar="N", help=_WORKERS_HELP),
    address: str | None = typer.Option(
        None, "--address", envvar="RAY_ADDRESS", metavar="HOST:PORT", help=_ADDRESS_HELP
    ),
    retune_batch_size: bool = typer.Option(
        False,
        "--retune-batch-size",
        help="Probe batch_size: auto again instead of reusing the sizes earlier sweeps tuned on this device.",
    ),
) -> None:
    """Run a sweep: search, k-fold re-evaluation of the best configurations, report.

    An unfinished sweep of this file in the output folder is resumed: finished trials are kept, the rest run."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.paths import SweepPaths, default_output_dir
    from ludwig_hpo.driver.state import decide, read_state
    from ludwig_hpo.driver.sweep import Sweep

    refuse_split_files(training_set, validation_set, test_set)
    loaded = _with_cli_overrides(load_sweep(sweep_file, dataset=dataset), num_workers)
    target = default_output_dir(loaded, output)
    decision, state = decide(target, loaded.text, loaded.raw, restart=restart)
    if restart and decision == "new" and SweepPaths(target).state.is_file():
        if (old := read_state(target)) is not None and old.phase != "finished":
            shutil.rmtree(target)
            out.print(f"--restart: removed the unfinished sweep in {target}", highlight=False)
    _run_sweep(
        Sweep(
            loaded,
            out,
            output_root=output,
            resume=state,
            resume_dir=target if state else None,
            dataset=dataset,
            address=address or None,
            retune_batch_size=retune_batch_size,
        ),
        f"{loaded.config.name} ({sweep_file})",
    )


@app.command(cls=Command, epilog=_example("hpo resume results/breast-cancer-tiny"))
@_guard
def resume(
    results_dir: Path = typer.Argument(..., metavar="RESULTS_DIR", help="The output folder of an unfinished sweep."),
) -> None:
    """Resume the unfinished sweep in RESULTS_DIR (same as rerunning its `hpo sweep` command)."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.paths import SweepPaths
    from ludwig_hpo.driver.state import fingerprint, read_state
    from ludwig_hpo.driver.sweep import Sweep

    paths = SweepPaths(results_dir)
    state = read_state(results_dir)
    if state is None:
        raise ConfigError(
            f"no sweep state ({paths.state}) in this folder",
            source=str(results_dir),
            fix=f"pass the output folder of a sweep (it holds {paths.state.name})",
        )
    if state.phase == "finished":
        raise ConfigError(
            "this sweep has finished; there is nothing to resume",
            source=str(results_dir),
            fix=f"rebuild its report with `hpo report {results_dir}` or start a new sweep",
        )
    sweep_file = Path(state.sweep_file)
    loaded = load_sweep(sweep_file, dataset=state.dataset) if sweep_file.is_file() else None
    if loaded is None or fingerprint(loaded.text, loaded.raw) != state.fingerprint:
        # the file moved or changed since: run the copy the sweep started with, as if from its
        # old place (relative dataset paths start there)
        import dataclasses

        loaded = dataclasses.replace(load_sweep(paths.sweep_file, dataset=state.dataset), path=sweep_file)
    _run_sweep(
        Sweep(loaded, out, resume=state, resume_dir=results_dir, dataset=state.dataset),
        f"{loaded.config.name} ({results_dir})",
    )


def _run_sweep(sweep_: Sweep, title: str) -> None:
    from ludwig_hpo.driver.summary import failure_summary, print_sweep_summary

    _handle_signals()
    out.print(f"[bold]hpo sweep[/bold] {escape(title)}", markup=True)
    result = sweep_.run()
    if not print_sweep_summary(out, result):
        err.print(f"error: no trial produced a result; {failure_summary(result.trials)}")
        raise typer.Exit(1)


def _handle_signals() -> None:
    signal.signal(signal.SIGTERM, _terminate)  # SIGTERM stops the sweep like Ctrl-C
    # A process started in the background by a script inherits SIGINT ignored; `kill -INT`
    # must still stop a sweep cleanly.
    signal.signal(signal.SIGINT, signal.default_int_handler)


@app.command(
    cls=Command,
    epilog=_example("hpo train sweeps/breast_cancer_tiny.yaml --set trainer.learning_rate=0.01 --num-workers 2"),
)
@_guard
def train(
    sweep_file: Path = typer.Argument(
        ..., metavar="CONFIG", help="A Ludwig config or a sweep file (its base configuration is trained)."
    ),
    dataset: Path | None = DATASET,
    training_set: Path | None = TRAINING_SET,
    validation_set: Path | None = VALIDATION_SET,
    test_set: Path | None = TEST_SET,
    num_workers: int | None = typer.Option(None, "--num-workers", metavar="N", help=_WORKERS_HELP),
    set_: list[str] | None = typer.Option(
        None,
        "--set",
        metavar="KEY=VALUE",
        help="A dotted key and a YAML value, e.g. trainer.learning_rate=0.01; repeatable.",
    ),
    from_sweep: Path | None = typer.Option(
        None,
        "--from-sweep",
        metavar="DIR",
        help="Train the best configuration of this finished sweep's output folder instead of the base configuration.",
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="DIR", help="Root folder of results (default: hpo_results)."
    ),
    address: str | None = typer.Option(
        None, "--address", envvar="RAY_ADDRESS", metavar="HOST:PORT", help=_ADDRESS_HELP
    ),
) -> None:
    """Train one configuration once as a Ray Train job (validated each epoch, scored on the test split at the end),
    tracked in MLflow, model saved. CONFIG needs no hyperopt section."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.single_run import best_config_of, train_once
    from ludwig_hpo.driver.summary import print_train_summary

    refuse_split_files(training_set, validation_set, test_set)
    loaded = load_sweep(sweep_file, dataset=dataset, search=False)
    if from_sweep is not None:
        loaded = best_config_of(from_sweep, loaded)
    loaded = _with_cli_overrides(loaded, num_workers, set_)
    _handle_signals()
    cfg = loaded.config
    origin = f"best configuration of {from_sweep}" if from_sweep else "base configuration"
    out.print(f"[bold]hpo train[/bold] {escape(cfg.name)} ({escape(str(sweep_file))}, {escape(origin)})", markup=True)
    result = train_once(loaded, out, output_root=output, address=address or None, from_sweep=from_sweep)
    failure = print_train_summary(out, result, cfg)
    if failure is not None:
        err.print(f"error: {failure}")
        raise typer.Exit(1)


@app.command(cls=Command, epilog=_example("hpo validate sweeps/breast_cancer_tiny.yaml"))
@_guard
def validate(
    sweep_file: Path = typer.Argument(..., metavar="SWEEP_FILE", help="The sweep YAML file (or a Ludwig config)."),
    dataset: Path | None = DATASET,
    training_set: Path | None = TRAINING_SET,
    validation_set: Path | None = VALIDATION_SET,
    test_set: Path | None = TEST_SET,
    model: bool = typer.Option(False, "--model", help=h.VALIDATE_MODEL),
) -> None:
    """Check a sweep file (or a Ludwig config, for hpo train) and its dataset without starting Ray; say what it does."""
    from ludwig_hpo.driver.validate import validate_lines

    refuse_split_files(training_set, validation_set, test_set)
    for line in validate_lines(sweep_file, dataset, model=model):
        out.print(line)


@app.command(cls=Command, epilog=_example("hpo schema > sweep.schema.json"))
@_guard
def schema() -> None:
    """Print the JSON Schema of the sweep file (for editor completion and checks)."""
    import json

    from ludwig_hpo.config.schema import SweepConfig

    doc = SweepConfig.model_json_schema()
    # `name` defaults to the file's stem, `dataset` may come from --dataset, and a model config
    # without `hyperopt` is trained by `hpo train` (Ludwig configs)
    doc["required"] = [k for k in doc.get("required", []) if k not in ("name", "dataset", "hyperopt")]
    doc = {"$schema": "https://json-schema.org/draft/2020-12/schema", **doc, "title": "ludwig_hpo sweep file"}
    out.print(json.dumps(doc, indent=2), soft_wrap=True)


@app.command(cls=Command, epilog=_example("hpo report results/breast-cancer-tiny"))
@_guard
def report(
    results_dir: Path | None = typer.Argument(
        None, metavar="RESULTS_DIR", help="A sweep's output folder (holding mlflow.db)."
    ),
    experiment: str | None = typer.Option(
        None, "--experiment", "-e", metavar="NAME", help="MLflow experiment: report its latest sweep."
    ),
    run_id: str | None = typer.Option(None, "--run-id", metavar="RUN_ID", help="The sweep's MLflow parent run id."),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", metavar="URI", help="MLflow store (default: DIR/mlflow.db, else MLFLOW_TRACKING_URI)."
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        metavar="DIR",
        help="Folder for report.html (default: DIR, else hpo_reports/<sweep name>).",
    ),
    mlflow_ui: str | None = typer.Option(
        None,
        "--mlflow-ui",
        metavar="URL",
        help="The MLflow UI's address (as 'hpo ui' prints it): trials link to their runs.",
    ),
) -> None:
    """Rebuild a sweep's report.html from MLflow alone (finished or still running)."""
    from ludwig_hpo.driver.rebuild import rebuild_report

    page = rebuild_report(
        results_dir,
        experiment=experiment,
        run_id=run_id,
        tracking_uri=tracking_uri,
        output=output,
        mlflow_ui=mlflow_ui,
        out=out,
    )
    out.print(f"report: {page}")


@app.command(cls=Command, epilog=_example("hpo ui results/breast-cancer-tiny --port 5001"))
@_guard
def ui(
    results_dir: Path | None = typer.Argument(
        None,
        metavar="RESULTS_DIR",
        help="A sweep's output folder (holding mlflow.db); default: "
        "the current folder, else the newest sweep in hpo_results/.",
    ),
    port: int = typer.Option(5000, metavar="PORT", help="Port of the MLflow UI."),
    host: str = typer.Option("127.0.0.1", metavar="HOST", help="Interface to bind (default: this machine only)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Print the URL without opening a browser."),
) -> None:
    """Start the MLflow UI on a sweep's embedded store and open (and print) its run list."""
    from ludwig_hpo.driver.ui import serve

    serve(results_dir, host=host, port=port, browser=not no_browser, out=out)


@app.command(cls=Command, epilog=_example("hpo predict results/breast-cancer-tiny --dataset rows.csv -o out.csv"))
@_guard
def predict(model: str = h.MODEL, rows: Path = h.ROWS, output: Path = h.PREDICTIONS, skip: bool = h.SKIP) -> None:
    """Predict every row of a CSV/Parquet file with a sweep's best model (Ludwig's column names)."""
    from ludwig_hpo.driver.predict import predict_command

    predict_command(model, rows, output, skip_bad_rows=skip, tracking_uri=None, out=out, err=err)


@app.command(cls=Command, epilog=_example("hpo evaluate results/breast-cancer-tiny --dataset rows.csv --split test"))
@_guard
def evaluate(
    model: str = h.MODEL, rows: Path = h.ROWS, split: str = h.SPLIT, output: Path = h.METRICS, skip: bool = h.SKIP
) -> None:
    """Score a sweep's best model on labelled rows with the metrics the sweep reports."""
    from ludwig_hpo.driver.evaluate_cmd import evaluate_command

    evaluate_command(model, rows, output, split=split, skip_bad_rows=skip, tracking_uri=None, out=out, err=err)


@app.command(cls=Command, epilog=_example("hpo serve results/breast-cancer-tiny --port 5001"))
@_guard
def serve(model: str = h.MODEL, port: int = h.PORT) -> None:
    """Serve a sweep's best model on 127.0.0.1 with MLflow's scoring server (raw rows in, predictions out)."""
    from ludwig_hpo.driver.serve import serve_command

    serve_command(model, port=port, tracking_uri=None, out=out)


def main() -> None:
    """Console-script entry point."""
    app()
