"""How long does the report take to build for a big sweep, and how big is it? Prints, for a
synthetic sweep of N trials (default 1,000: four parameters (log-uniform, integer, uniform,
a choice with a dict and a list), 10-epoch learning curves, 5 % failed and ~30 % stopped
early, k-fold of the top 3 configurations with 5 folds):

- the time to build each figure's data and figure (parallel coordinates, importance,
  history, learning curves, k-fold), and the whole ``build_report`` call (both pages
  written);
- the size of ``report.html`` and ``hiplot.html``.

Last line: ``trials=<n> build_s=<s> report_mb=<MB> hiplot_mb=<MB> importance_s=<s>``; the
figures also go to ``bench/results/report_build.json`` (see ``bench/_results.py``).
Run: ``python bench/report_build.py [N]``.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from dashboards import build_report
from dashboards.curves import curves_figure, curves_info
from dashboards.history import history_figure, history_info
from dashboards.importance import importance_figure, importance_info
from dashboards.kfold import kfold_figure, kfold_info
from dashboards.parallel import parallel_coordinates_figure, parallel_coordinates_info
from ludwig_hpo.results import EpochRecord, KFoldRecord, ParamInfo, SweepResult, TrialRecord

from _results import BenchRun, Figure, parser

PARAMS = (
    ParamInfo("trainer.learning_rate", "loguniform", log=True, lower=1e-4, upper=1e-1),
    ParamInfo("image.encoder.num_layers", "randint", lower=1, upper=4),
    ParamInfo("image.encoder.dropout", "uniform", lower=0.0, upper=0.5),
    ParamInfo("trainer.optimizer", "choice", categories=("adam", {"type": "sgd", "momentum": 0.9}, [1, 2])),
)
EPOCHS = 10


def synthetic_sweep(n: int, seed: int = 0) -> SweepResult:
    """A minimized-loss sweep of ``n`` trials whose loss depends mostly on the learning rate."""
    rng = random.Random(seed)
    trials = []
    for i in range(n):
        lr = 10 ** rng.uniform(-4, -1)
        params = {
            PARAMS[0].path: lr,
            PARAMS[1].path: rng.randint(1, 3),
            PARAMS[2].path: rng.uniform(0, 0.5),
            PARAMS[3].path: rng.choice(PARAMS[3].categories),
        }
        tid = f"bench_{i:05d}"
        if rng.random() < 0.05:
            trials.append(TrialRecord(tid, "FAILED", params, None, None, error="RuntimeError: diverged"))
            continue
        final = 0.1 + abs(lr - 3e-3) * 8 + 0.03 * params[PARAMS[1].path] + rng.uniform(0, 0.1)
        epochs = 2 if rng.random() < 0.3 else EPOCHS
        history = tuple(
            EpochRecord(
                e,
                final + 1.5 / e,
                {"validation/label/loss": final + 1.5 / e, "validation/label/accuracy": 1 - final / 3},
            )
            for e in range(1, epochs + 1)
        )
        values = [h.objective for h in history]
        trials.append(
            TrialRecord(
                tid,
                "FINISHED" if epochs == EPOCHS else "KILLED",
                params,
                values[-1],
                min(values),
                history,
                batch_size=64,
                wall_time_s=rng.uniform(15, 60),
            )
        )
    ranked = sorted((t for t in trials if t.objective_best is not None), key=lambda t: t.objective_best)
    kfold = tuple(
        KFoldRecord(
            r,
            t.trial_id,
            t.params,
            tuple(t.objective_best + rng.gauss(0.02, 0.01) for _ in range(5)),
            t.objective_best + rng.gauss(0.03, 0.01),
            "label/loss",
        )
        for r, t in enumerate(ranked[:3], start=1)
    )
    return SweepResult(
        "bench-sweep",
        "validation/label/loss",
        "minimize",
        PARAMS,
        tuple(trials),
        kfold,
        ranked[0].trial_id if ranked else None,
        3600.0 * n / 100,
        "",
        "",
    )


def _timed(label: str, fn, timings: dict[str, float]):
    """``(fn(), seconds)``; prints the seconds and records them in ``timings[label]``."""
    t = time.perf_counter()
    out = fn()
    seconds = timings[label] = time.perf_counter() - t
    print(f"  {label:<28} {seconds:7.2f} s")
    return out, seconds


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("trials", type=int, nargs="?", default=1000, help="trials of the synthetic sweep (default 1000)")
    args = ap.parse_args()
    run = BenchRun("report_build", args)
    n = args.trials
    timings: dict[str, float] = {}
    sweep = synthetic_sweep(n)
    print(f"synthetic sweep: {n} trials, {sum(len(t.history) for t in sweep.trials)} epoch records")
    print("figure data + figure:")
    importance, importance_s = _timed("importance (fANOVA)", lambda: importance_info(sweep), timings)
    _timed("importance figure", lambda: importance_figure(importance), timings)
    _timed(
        "parallel coordinates",
        lambda: parallel_coordinates_figure(parallel_coordinates_info(sweep, importance.params)),
        timings,
    )
    _timed("optimization history", lambda: history_figure(history_info(sweep)), timings)
    _timed("learning curves", lambda: curves_figure(curves_info(sweep)), timings)
    _timed("k-fold vs test", lambda: kfold_figure(kfold_info(sweep)), timings)
    with tempfile.TemporaryDirectory() as tmp:
        path, build_s = _timed(
            "build_report (both pages)",
            lambda: build_report(sweep, Path(tmp) / "report.html", Path(tmp) / "hiplot.html"),
            timings,
        )
        report_mb = path.stat().st_size / 1e6
        hiplot_mb = (Path(tmp) / "hiplot.html").stat().st_size / 1e6
    print(f"report.html {report_mb:.2f} MB, hiplot.html {hiplot_mb:.2f} MB")
    run.finish(
        {
            "trials": Figure(n),
            "build_s": Figure(build_s, ".2f"),
            "report_mb": Figure(report_mb, ".2f"),
            "hiplot_mb": Figure(hiplot_mb, ".2f"),
            "importance_s": Figure(importance_s, ".2f"),
        },
        {"seconds": timings},
    )


if __name__ == "__main__":
    main()
