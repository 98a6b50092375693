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
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from ludwig_hpo.errors import ConfigError, UserError

if TYPE_CHECKING:
    from ludwig_hpo.driver.sweep import Sweep

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Declarative hyperparameter sweeps for PyTorch: Optuna + Ray Tune + Ray Train DDP + MLflow.",
)
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


_ADDRESS_HELP = (
    "A running Ray cluster (host:port of its head, as printed by 'ray start --head'); "
    "default: RAY_ADDRESS, else a private local cluster."
)
_WORKERS_HELP = "Workers per trial (DDP world size); overrides backend.num_workers."


def _with_cli_overrides(loaded, num_workers: int | None, sets: list[str] | None = None):
    from ludwig_hpo.config.overrides import parse_set, with_overrides

    if num_workers is not None:
        loaded = with_overrides(loaded, [("backend.num_workers", num_workers)], source="--num-workers")
    return with_overrides(loaded, [parse_set(s) for s in sets or []])


@app.command()
@_guard
def sweep(
    sweep_file: Path = typer.Argument(..., help="The sweep YAML file."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Root folder of results (default: hpo_results)."),
    restart: bool = typer.Option(
        False, "--restart", help="Discard an unfinished sweep of this name instead of resuming it."
    ),
    dataset: Path | None = typer.Option(
        None, "--dataset", help="CSV/Parquet file replacing dataset.source (runs a Ludwig config unchanged)."
    ),
    num_workers: int | None = typer.Option(None, "--num-workers", min=1, help=_WORKERS_HELP),
    address: str | None = typer.Option(None, "--address", envvar="RAY_ADDRESS", help=_ADDRESS_HELP),
) -> None:
    """Run a sweep: search, k-fold re-evaluation of the best configurations, report.

    If the output folder holds an unfinished sweep of the same file (interrupted or crashed),
    it is resumed: finished trials are kept, the rest run."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.state import decide
    from ludwig_hpo.driver.sweep import Sweep, default_output_dir

    loaded = _with_cli_overrides(load_sweep(sweep_file, dataset=dataset), num_workers)
    target = default_output_dir(loaded, output)
    decision, state = decide(target, loaded.text, loaded.raw, restart=restart)
    if restart and decision == "new" and (target / "state.json").is_file():
        from ludwig_hpo.driver.state import read_state

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
        ),
        f"{loaded.config.name} ({sweep_file})",
    )


@app.command()
@_guard
def resume(results_dir: Path = typer.Argument(..., help="The output folder of an unfinished sweep.")) -> None:
    """Resume the unfinished sweep in RESULTS_DIR (same as rerunning its `hpo sweep` command)."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.state import fingerprint, read_state
    from ludwig_hpo.driver.sweep import Sweep

    state = read_state(results_dir)
    if state is None:
        raise ConfigError(
            f"no sweep state ({results_dir / 'state.json'}) in this folder",
            source=str(results_dir),
            fix="pass the output folder of a sweep (it holds state.json)",
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

        loaded = dataclasses.replace(load_sweep(results_dir / "sweep.yaml", dataset=state.dataset), path=sweep_file)
    _run_sweep(
        Sweep(loaded, out, resume=state, resume_dir=results_dir, dataset=state.dataset),
        f"{loaded.config.name} ({results_dir})",
    )


def _run_sweep(sweep_: Sweep, title: str) -> None:
    _handle_signals()
    out.print(f"[bold]hpo sweep[/bold] {escape(title)}", markup=True)
    _print_sweep_summary(sweep_.run())


def _handle_signals() -> None:
    signal.signal(signal.SIGTERM, _terminate)  # SIGTERM stops the sweep like Ctrl-C
    # A process started in the background by a script inherits SIGINT ignored; `kill -INT`
    # must still stop a sweep cleanly.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _print_sweep_summary(result) -> None:
    best = next((t for t in result.trials if t.trial_id == result.best_trial_id), None)
    out.print()
    counts = {s: sum(t.status == s for t in result.trials) for s in ("FINISHED", "KILLED", "FAILED")}
    out.print(
        f"[bold]done[/bold] in {result.wall_time_s:.0f}s: {counts['FINISHED']} finished, "
        f"{counts['KILLED']} stopped early, {counts['FAILED']} failed",
        markup=True,
    )
    if best is None:
        err.print(f"error: no trial produced a result; {_failure_summary(result.trials)}")
        raise typer.Exit(1)
    out.print(f"best trial {best.trial_id}: {result.metric} = {best.objective_best:.6g}")
    if result.pareto_trial_ids:
        out.print(f"pareto set on {', '.join(result.objectives)}: {', '.join(result.pareto_trial_ids)}")
    for k, v in best.params.items():
        out.print(f"  {k}: {v}")
    for k in result.kfold:
        mean = sum(k.fold_scores) / len(k.fold_scores) if k.fold_scores else float("nan")
        test = f"{k.test_score:.6g}" if k.test_score is not None else "failed"
        folds = len(k.fold_scores) + k.failed_folds
        failed = f" ({k.failed_folds} failed)" if k.failed_folds else ""
        out.print(
            f"config #{k.config_rank} ({k.trial_id}): mean {k.metric} over {len(k.fold_scores)}/{folds} "
            f"folds{failed} = {mean:.6g}, test = {test}"
        )
    root = Path(result.output_dir)
    out.print(f"report:  {root / 'report.html'}")
    out.print(f"results: {root}")
    hint = f"  (hpo ui {root})" if (root / "mlflow.db").is_file() else ""
    out.print(f"mlflow:  {result.tracking_uri}{hint}")


def _show(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return f"{v:g}" if isinstance(v, float) else str(v)


def _describe_search(cfg) -> list[str]:
    """Lines of ``hpo validate`` about the search: algorithm, scheduler, budget, space."""
    from ludwig_hpo.driver.sweep import trial_count_text

    hp = cfg.hyperopt
    sa, sch = hp.search_alg, hp.scheduler
    name = sa.effective_sampler
    opts = [f"seed {sa.seed}"]
    if name == "tpe":
        opts += [f"n_startup_trials {sa.n_startup_trials}", f"multivariate {str(sa.multivariate).lower()}"]
    for option in ("n_startup_trials", "population_size", "qmc_type"):
        if option in sa.model_fields_set and name != "tpe":
            opts.append(f"{option} {getattr(sa, option)}")
    algo = "grid search" if name == "grid" else f"optuna {name} sampler"
    if sa.type in ("variant_generator", "random"):
        algo = f"random search ({sa.type})"
    lines = [f"search: {trial_count_text(hp)}; {algo}" + ("" if name == "grid" else f" ({', '.join(opts)})")]
    if sa.points_to_evaluate:
        lines.append(f"points_to_evaluate: {len(sa.points_to_evaluate)} configuration(s) run first")
    if sch.type == "fifo":
        lines.append(f"scheduler: fifo (every trial runs all {cfg.trainer.epochs} epochs)")
    else:
        unit = "epochs" if sch.in_epochs else "s"
        shown = {
            k: v for k, v in sch.model_dump().items() if k not in ("type", "time_attr", "max_t", "hyperparam_mutations")
        }
        max_t = getattr(sch, "max_t", None)
        if hasattr(sch, "max_t"):
            shown["max_t"] = (
                f"{max_t} {unit}"
                if max_t is not None and not sch.in_epochs
                else f"{cfg.trainer.epochs} epochs (trainer.epochs)"
            )
        lines.append(
            f"scheduler: {sch.type} on {sch.time_attr} (" + ", ".join(f"{k} {_show(v)}" for k, v in shown.items()) + ")"
        )
        if sch.type == "pbt":
            from ludwig_hpo.search.schedulers import pbt_checkpoints

            first, every = pbt_checkpoints(hp)
            lines.append(
                "pbt perturbs: "
                + ", ".join(f"{p} ({'its own space' if v is None else _show(v)})" for p, v in hp.pbt_mutated.items())
                + f"; the rest stays as sampled; trials checkpoint at epoch {first} and every {every} after"
            )
    budget = hp.executor.time_budget_s
    lines.append(f"time budget: {f'{budget:g} s (no trial starts after it)' if budget else 'none (all trials run)'}")
    lines.append(f"search space ({len(hp.parameters)} parameter(s)):")
    width = max(len(p) for p in hp.parameters)
    lines += [f"  {p:<{width}}  {s.describe()}" for p, s in hp.parameters.items()]
    return lines


def _tracking_location(cfg, results: Path) -> str:
    """Where the sweep's MLflow data will go (mirrors :meth:`Sweep._open_tracking`)."""
    experiment = cfg.tracking.experiment or cfg.name
    if cfg.tracking.uri:
        return f"{cfg.tracking.uri} (tracking.uri), experiment {experiment!r}"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return f"{os.environ['MLFLOW_TRACKING_URI']} (MLFLOW_TRACKING_URI), experiment {experiment!r}"
    return f"{results / 'mlflow.db'} (embedded SQLite store), experiment {experiment!r}"


def _failure_summary(trials) -> str:
    """``"4 failed: 3x TrialError: ...; 1x ..."``: the distinct one-line errors, most frequent first."""
    from collections import Counter

    errors = Counter(t.error or "no error message" for t in trials if t.status == "FAILED")
    if not errors:
        return f"{len(trials)} trial(s) ended without reporting a metric"
    distinct = "; ".join(f"{n}x {e}" for e, n in errors.most_common())
    return f"{sum(errors.values())} of {len(trials)} trial(s) failed: {distinct}"


@app.command()
@_guard
def train(
    sweep_file: Path = typer.Argument(..., help="The sweep YAML file (its base configuration is trained)."),
    num_workers: int | None = typer.Option(None, "--num-workers", min=1, help=_WORKERS_HELP),
    set_: list[str] | None = typer.Option(
        None, "--set", help="PATH=VALUE (YAML), e.g. trainer.learning_rate=0.01; repeatable."
    ),
    from_sweep: Path | None = typer.Option(
        None,
        "--from-sweep",
        help="Train the best configuration of this finished sweep's output folder instead of the base configuration.",
    ),
    output: Path | None = typer.Option(None, "--output", "-o", help="Root folder of results (default: hpo_results)."),
    address: str | None = typer.Option(None, "--address", envvar="RAY_ADDRESS", help=_ADDRESS_HELP),
) -> None:
    """Train one configuration once as a Ray Train job, tracked in MLflow, model saved."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.config.overrides import best_config_of
    from ludwig_hpo.driver.single_run import train_once

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
    out.print(
        f"[bold]done[/bold] in {result.wall_time_s:.0f}s: {len(run.history)} epochs, "
        f"{cfg.backend.num_workers} worker(s), {cfg.backend.strategy}, {cfg.trainer.precision}",
        markup=True,
    )
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
def validate(
    sweep_file: Path = typer.Argument(..., help="The sweep YAML file (or a Ludwig config)."),
    dataset: Path | None = typer.Option(None, "--dataset", help="CSV/Parquet file replacing dataset.source."),
) -> None:
    """Check a sweep file and its dataset without starting Ray; print what the sweep would do."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.sweep import choose_output_dir
    from ludwig_hpo.execution.cluster import local_plan

    loaded = load_sweep(sweep_file, dataset=dataset)
    cfg = loaded.config
    hp = cfg.hyperopt
    out.print(f"{sweep_file}: valid")
    out.print(f"name: {cfg.name}   dataset: {cfg.dataset.source}")
    out.print(
        f"features: {', '.join(f'{f.name} ({f.type})' for f in cfg.input_features)} -> "
        f"{', '.join(f'{f.name} ({f.type})' for f in cfg.output_features)}"
    )
    metrics = ", ".join(f"{k} ({g})" for k, g in cfg.objectives)
    out.print(
        f"metric{'s (Pareto front)' if hp.multi_objective else ''}: {metrics}   epochs per trial: {cfg.trainer.epochs}"
    )
    for line in _describe_search(cfg):
        out.print(line)
    from ludwig_hpo.data import dataset_folder, load_dataframe, prepare

    data = prepare(
        load_dataframe(cfg.dataset.source, loaded.base_dir), cfg, dataset_folder(cfg.dataset.source, loaded.base_dir)
    )
    out.print(
        f"data: {data.num_rows} rows ({', '.join(f'{k} {len(v)}' for k, v in data.splits.items())}); "
        f"features read and preprocessed without error"
    )
    plan = local_plan(cfg)
    out.print(f"resources: {plan.describe()}")
    from ludwig_hpo.execution.executor import choose_executor

    choice = choose_executor(cfg.backend.trial_executor, use_gpu=plan.use_gpu, pbt=cfg.hyperopt.scheduler.type == "pbt")
    out.print(f"trial executor: {choice.executor} ({choice.reason})")
    if cfg.kfold:
        out.print(f"k-fold: top {cfg.kfold.top_k} configurations x {cfg.kfold.k} folds + test")
    results = choose_output_dir(loaded, None)
    out.print(f"results: {results}")
    out.print(f"mlflow: {_tracking_location(cfg, results)}")


@app.command()
@_guard
def schema() -> None:
    """Print the JSON Schema of the sweep file (for editor completion and checks)."""
    import json

    from ludwig_hpo.config.schema import SweepConfig

    doc = SweepConfig.model_json_schema()
    # `name` defaults to the file's stem and `dataset` may come from --dataset (Ludwig configs)
    doc["required"] = [k for k in doc.get("required", []) if k not in ("name", "dataset")]
    doc = {"$schema": "https://json-schema.org/draft/2020-12/schema", **doc, "title": "ludwig_hpo sweep file"}
    out.print(json.dumps(doc, indent=2), soft_wrap=True)


@app.command()
@_guard
def report(
    results_dir: Path | None = typer.Argument(None, help="A sweep's output folder (holding mlflow.db)."),
    experiment: str | None = typer.Option(
        None, "--experiment", "-e", help="MLflow experiment: report its latest sweep."
    ),
    run_id: str | None = typer.Option(None, "--run-id", help="The sweep's MLflow parent run id."),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="MLflow store (default: DIR/mlflow.db, else MLFLOW_TRACKING_URI)."
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Folder for report.html (default: DIR, else hpo_reports/<sweep name>)."
    ),
) -> None:
    """Rebuild a sweep's report.html from MLflow alone (finished or still running)."""
    from dashboards import build_report
    from dashboards.mlflow_source import load_sweep, store_uri_of_dir
    from ludwig_hpo.errors import DataError

    if results_dir is None and not (experiment or run_id):
        raise DataError(
            "nothing to report on",
            key="hpo report",
            fix="pass a sweep output folder, --experiment NAME or --run-id PARENT_RUN_ID",
        )
    if results_dir is not None and not results_dir.is_dir():
        raise DataError("no such folder", source=str(results_dir), fix="pass the output folder printed by 'hpo sweep'")
    uri = tracking_uri
    if uri is None and results_dir is not None and (results_dir / "mlflow.db").is_file():
        uri = store_uri_of_dir(results_dir)
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri is None and results_dir is not None and (results_dir / "results.json").is_file():
        result = _read_results_json(results_dir / "results.json")  # a sweep tracked on a server
    elif uri is None:
        raise DataError(
            "no MLflow store to read",
            source=str(results_dir) if results_dir else None,
            fix="pass --tracking-uri (or set MLFLOW_TRACKING_URI), or a sweep output folder",
        )
    else:
        result = load_sweep(uri, experiment=experiment, run_id=run_id, output_dir=results_dir)
    target = output or results_dir or Path("hpo_reports") / result.name
    n = len(result.trials)
    out.print(
        f"{result.name}: {n} trial{'s' if n != 1 else ''}, {len(result.kfold)} k-fold configuration(s)"
        f" from {uri or results_dir}"
    )
    out.print(f"report: {build_report(result, target)}")


def _read_results_json(path: Path):
    from ludwig_hpo.errors import DataError
    from ludwig_hpo.results.io import read_result

    try:
        return read_result(path)
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(
            f"results.json is malformed ({type(e).__name__}: {e})", source=str(path), fix="rerun the sweep"
        ) from None


def _default_ui_dir() -> Path:
    """The current folder when it holds a sweep's store, else the newest sweep under the
    default output root."""
    from ludwig_hpo.driver.sweep import DEFAULT_OUTPUT_ROOT
    from ludwig_hpo.errors import DataError

    if Path("mlflow.db").is_file():
        return Path(".")
    stores = sorted(DEFAULT_OUTPUT_ROOT.glob("*/mlflow.db"), key=lambda p: p.stat().st_mtime)
    if not stores:
        raise DataError(
            "no mlflow.db here nor in any sweep under this folder's hpo_results/",
            source=str(Path.cwd()),
            fix="pass the output folder printed by 'hpo sweep' (hpo ui DIR)",
        )
    return stores[-1].parent


@app.command()
@_guard
def ui(
    results_dir: Path | None = typer.Argument(
        None,
        help="A sweep's output folder (holding mlflow.db); default: "
        "the current folder, else the newest sweep in hpo_results/.",
    ),
    port: int = typer.Option(5000, help="Port of the MLflow UI."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind (default: this machine only)."),
) -> None:
    """Start the MLflow UI on a sweep's embedded store and print its URL."""
    import socket

    from ludwig_hpo.errors import DataError

    results_dir = results_dir if results_dir is not None else _default_ui_dir()
    db = results_dir / "mlflow.db"
    if not db.is_file():
        raise DataError(
            "no mlflow.db in this folder", source=str(results_dir), fix="pass the output folder printed by 'hpo sweep'"
        )
    if not 0 < port < 65536:
        raise DataError(f"port {port} is out of range", key="--port", fix="use a port between 1 and 65535")
    with socket.socket() as probe:  # a taken port would fail inside MLflow with a page of logs
        try:
            probe.bind((host, port))
        except OSError as e:
            raise DataError(
                f"cannot listen on {host}:{port} ({e.strerror or e})",
                key="--port",
                fix="choose a free port, e.g. --port 5001",
            ) from None
    mlflow = shutil.which("mlflow") or str(Path(sys.executable).parent / "mlflow")
    uri = f"sqlite:///{db.resolve()}"
    shown = f"[{host}]" if ":" in host else host
    out.print(f"MLflow UI for {uri}\n  http://{shown}:{port}\n(Ctrl-C stops it)")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    sys.stdout.flush()
    # Become the MLflow UI process: Ctrl-C and SIGTERM reach it directly, and its exit code is ours.
    os.execve(
        mlflow, [mlflow, "ui", "--backend-store-uri", uri, "--host", host, "--port", str(port), "--workers", "1"], env
    )


def main() -> None:
    """Console-script entry point."""
    app()
