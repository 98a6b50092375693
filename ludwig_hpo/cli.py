"""``hpo``: the command line. User mistakes print one line and exit 2; ``--debug`` shows
the traceback. Heavy imports (Ray, torch, MLflow) happen inside the commands."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from ludwig_hpo.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Declarative hyperparameter sweeps for PyTorch: Optuna + Ray Tune + Ray Train DDP + MLflow.")
# Plain text by default: user strings (paths, keys, values) may hold "[...]", which rich
# would take for markup. Styled output passes markup=True with user parts escaped.
out = Console(highlight=False, soft_wrap=True, markup=False)
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


_ADDRESS_HELP = ("A running Ray cluster (host:port of its head, as printed by 'ray start --head'); "
                 "default: RAY_ADDRESS, else a private local cluster.")
_WORKERS_HELP = "Workers per trial (DDP world size); overrides backend.num_workers."


def _with_cli_overrides(loaded, num_workers: int | None, sets: list[str] | None = None):
    from ludwig_hpo.overrides import parse_set, with_overrides

    if num_workers is not None:
        loaded = with_overrides(loaded, [("backend.num_workers", num_workers)], source="--num-workers")
    return with_overrides(loaded, [parse_set(s) for s in sets or []])


@app.command()
@_guard
def sweep(
    sweep_file: Path = typer.Argument(..., help="The sweep YAML file."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Root folder of results (default: hpo_results)."),
    num_workers: int | None = typer.Option(None, "--num-workers", min=1, help=_WORKERS_HELP),
    address: str | None = typer.Option(None, "--address", envvar="RAY_ADDRESS", help=_ADDRESS_HELP),
) -> None:
    """Run a sweep: search, k-fold re-evaluation of the best configurations, report."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.sweep import Sweep

    loaded = _with_cli_overrides(load_sweep(sweep_file), num_workers)
    _handle_signals()
    out.print(f"[bold]hpo sweep[/bold] {escape(loaded.config.name)} ({escape(str(sweep_file))})", markup=True)
    result = Sweep(loaded, out, output_root=output, address=address or None).run()
    _print_sweep_summary(result)


def _handle_signals() -> None:
    signal.signal(signal.SIGTERM, _terminate)  # SIGTERM stops the sweep like Ctrl-C
    # A process started in the background by a script inherits SIGINT ignored; `kill -INT`
    # must still stop a sweep cleanly.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _print_sweep_summary(result) -> None:
    best = next((t for t in result.trials if t.trial_id == result.best_trial_id), None)
    out.print()
    counts = {s: sum(t.status == s for t in result.trials) for s in ("FINISHED", "KILLED", "FAILED")}
    out.print(f"[bold]done[/bold] in {result.wall_time_s:.0f}s: {counts['FINISHED']} finished, "
              f"{counts['KILLED']} stopped early, {counts['FAILED']} failed", markup=True)
    if best is None:
        err.print("error: no trial produced a result (see the failed trials above)")
        raise typer.Exit(1)
    out.print(f"best trial {best.trial_id}: {result.metric} = {best.objective_best:.6g}")
    for k, v in best.params.items():
        out.print(f"  {k}: {v}")
    for k in result.kfold:
        mean = sum(k.fold_scores) / len(k.fold_scores) if k.fold_scores else float("nan")
        test = f"{k.test_score:.6g}" if k.test_score is not None else "failed"
        folds = len(k.fold_scores) + k.failed_folds
        failed = f" ({k.failed_folds} failed)" if k.failed_folds else ""
        out.print(f"config #{k.config_rank} ({k.trial_id}): mean {k.metric} over {len(k.fold_scores)}/{folds} "
                  f"folds{failed} = {mean:.6g}, test = {test}")
    root = Path(result.output_dir)
    out.print(f"report:  {root / 'report.html'}")
    out.print(f"results: {root}")
    hint = f"  (hpo ui {root})" if (root / "mlflow.db").is_file() else ""
    out.print(f"mlflow:  {result.tracking_uri}{hint}")


@app.command()
@_guard
def train(
    sweep_file: Path = typer.Argument(..., help="The sweep YAML file (its base configuration is trained)."),
    num_workers: int | None = typer.Option(None, "--num-workers", min=1, help=_WORKERS_HELP),
    set_: list[str] | None = typer.Option(None, "--set", help="PATH=VALUE (YAML), e.g. trainer.learning_rate=0.01; "
                                          "repeatable."),
    from_sweep: Path | None = typer.Option(None, "--from-sweep", help="Train the best configuration of this "
                                           "finished sweep's output folder instead of the base configuration."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Root folder of results (default: hpo_results)."),
    address: str | None = typer.Option(None, "--address", envvar="RAY_ADDRESS", help=_ADDRESS_HELP),
) -> None:
    """Train one configuration once as a Ray Train job, tracked in MLflow, model saved."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.overrides import best_config_of
    from ludwig_hpo.single_run import train_once

    loaded = load_sweep(sweep_file)
    if from_sweep is not None:
        loaded = best_config_of(from_sweep, loaded)
    loaded = _with_cli_overrides(loaded, num_workers, set_)
    _handle_signals()
    cfg = loaded.config
    origin = f"best configuration of {from_sweep}" if from_sweep else "base configuration"
    out.print(f"[bold]hpo train[/bold] {escape(cfg.name)} ({escape(str(sweep_file))}, {escape(origin)})", markup=True)
    result = train_once(loaded, out, output_root=output, address=address or None)
    run = result.trials[0] if result.trials else None
    if run is None or run.status == "FAILED" or run.objective_best is None:
        err.print(f"error: training failed{f': {run.error}' if run and run.error else ''}")
        raise typer.Exit(1)
    last = run.history[-1] if run.history else None
    best_epoch = min(run.history, key=lambda e: cfg.goal_sign * e.objective).epoch if run.history else None
    out.print()
    out.print(f"[bold]done[/bold] in {result.wall_time_s:.0f}s: {len(run.history)} epochs, "
              f"{cfg.backend.num_workers} worker(s), {cfg.backend.strategy}, {cfg.trainer.precision}", markup=True)
    out.print(f"{result.metric}: best {run.objective_best:.6g} (epoch {best_epoch}), last {run.objective_last:.6g}")
    if last is not None:
        shown = {k: v for k, v in last.metrics.items() if k.startswith(("validation/", "train/combined"))}
        for k, v in sorted(shown.items()):
            out.print(f"  {k}: {v:.6g}")
    root = Path(result.output_dir)
    out.print(f"model:   {root / 'best_model'}")
    out.print(f"results: {root}")
    hint = f"  (hpo ui {root})" if (root / "mlflow.db").is_file() else ""
    out.print(f"mlflow:  {result.tracking_uri}{hint}")


@app.command()
@_guard
def validate(sweep_file: Path = typer.Argument(..., help="The sweep YAML file.")) -> None:
    """Check a sweep file and its dataset without starting Ray; print what the sweep would do."""
    from ludwig_hpo.cluster import local_plan
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.sweep import choose_output_dir

    loaded = load_sweep(sweep_file)
    cfg = loaded.config
    hp = cfg.hyperopt
    out.print(f"{sweep_file}: valid")
    out.print(f"name: {cfg.name}   dataset: {cfg.dataset.source}")
    out.print(f"features: {', '.join(f'{f.name} ({f.type})' for f in cfg.input_features)} -> "
              f"{', '.join(f'{f.name} ({f.type})' for f in cfg.output_features)}")
    out.print(f"metric: {hp.metric_key} ({hp.goal})   trials: {hp.executor.num_samples}   epochs: {cfg.trainer.epochs}"
              f"   sampler: {hp.search_alg.sampler} (seed {hp.search_alg.seed})   scheduler: {hp.scheduler.type}")
    out.print("search space:")
    for path, s in hp.parameters.items():
        if s.space == "choice":
            out.print(f"  {path}: choice of {s.categories}")
        elif s.space == "randint":
            out.print(f"  {path}: randint [{s.lower}, {s.upper}) = integers {s.lower}..{s.upper - 1}")
        else:
            out.print(f"  {path}: {s.space} [{s.lower:g}, {s.upper:g}){' (log scale)' if s.space == 'loguniform' else ''}")
    from ludwig_hpo.data import load_dataframe, prepare

    data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
    out.print(f"data: {data.num_rows} rows ({', '.join(f'{k} {len(v)}' for k, v in data.splits.items())}); "
              f"features read and preprocessed without error")
    plan = local_plan(cfg)
    out.print(f"resources: {plan.describe()}")
    if cfg.kfold:
        out.print(f"k-fold: top {cfg.kfold.top_k} configurations x {cfg.kfold.k} folds + test")
    out.print(f"results: {choose_output_dir(loaded, None)}")


@app.command()
@_guard
def report(results_dir: Path = typer.Argument(..., help="A sweep's output folder (holding results.json).")) -> None:
    """Rebuild report.html of a finished sweep from its results.json."""
    from dashboards import build_report
    from ludwig_hpo.errors import DataError
    from ludwig_hpo.results_io import read_result

    path = results_dir / "results.json"
    if not path.is_file():
        raise DataError("no results.json in this folder", source=str(results_dir),
                        fix="pass the output folder printed by 'hpo sweep'")
    try:
        result = read_result(path)
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"results.json is malformed ({type(e).__name__}: {e})", source=str(path),
                        fix="rerun the sweep") from None
    out.print(f"report: {build_report(result, results_dir)}")


@app.command()
@_guard
def ui(
    results_dir: Path = typer.Argument(..., help="A sweep's output folder (holding mlflow.db)."),
    port: int = typer.Option(5000, help="Port of the MLflow UI on 127.0.0.1."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind (default: this machine only)."),
) -> None:
    """Start the MLflow UI on a sweep's embedded store."""
    from ludwig_hpo.errors import DataError

    db = results_dir / "mlflow.db"
    if not db.is_file():
        raise DataError("no mlflow.db in this folder", source=str(results_dir),
                        fix="pass the output folder printed by 'hpo sweep'")
    mlflow = shutil.which("mlflow") or str(Path(sys.executable).parent / "mlflow")
    uri = f"sqlite:///{db.resolve()}"
    out.print(f"MLflow UI for {uri} at http://{host}:{port} (Ctrl-C stops it)")
    if not 0 < port < 65536:
        raise DataError(f"port {port} is out of range", key="--port", fix="use a port between 1 and 65535")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    sys.stdout.flush()
    # Become the MLflow UI process: Ctrl-C and SIGTERM reach it directly, and its exit code is ours.
    os.execve(mlflow, [mlflow, "ui", "--backend-store-uri", uri, "--host", host, "--port", str(port),
                       "--workers", "1"], env)


def main() -> None:
    """Console-script entry point."""
    app()
