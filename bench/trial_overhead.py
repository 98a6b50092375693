"""What does a trial cost beyond its training? Runs the search of ``sweeps/breast_cancer.yaml``
(2-worker DDP trials, ASHA; k-fold and report off) once per trial executor and prints, per
executor:

- trial wall time: the trial's MLflow child run, from Tune starting the trial to its end;
- in-worker time: what rank 0 spent inside the worker loop (choosing the batch size +
  the epochs' training and evaluation: ``batch_size_tuning_s + train_time_s``);
- overhead = wall - in-worker (process start-up, rendezvous, reporting, teardown);
- sweep efficiency = total in-worker time / wall time of the search phase (first trial
  start to last trial end; Tune's gaps between trials count here, not in a trial's wall).

Last line, for the default executor (``backend.trial_executor: auto``; the first one run
when it is not among ``--executors``):
``overhead_s_per_trial=<x> train_s_per_trial=<y> sweep_efficiency=<z>``; the figures also go
to ``bench/results/trial_overhead.json`` (see ``bench/_results.py``).

Run: ``python bench/trial_overhead.py [--num-samples 6] [--executors fresh,pooled] [--epochs N]``
(the sweep's ``num_samples`` is capped to keep the run short; its seed is kept; ``--epochs``
caps the trials' epochs, at least the scheduler's grace period). Each search starts and stops
its own local Ray cluster.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
EXECUTORS = ("fresh", "pooled")


def run_search(executor: str, num_samples: int, epochs: int | None, work: Path) -> dict[str, Any]:
    """Run the capped search with ``executor`` in a local cluster of its own; return the figures
    (seconds; ``trials`` and ``epochs`` are counts)."""
    from mlflow.tracking import MlflowClient

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.sweep import Sweep
    from ludwig_hpo.tracking import layout
    from ludwig_hpo.train.report_keys import TRAIN_TIME_S

    raw = yaml.safe_load((ROOT / "sweeps" / "breast_cancer.yaml").read_text())
    raw.pop("kfold", None)
    raw["report"] = {"enabled": False}
    raw["hyperopt"]["executor"]["num_samples"] = num_samples
    raw["backend"]["trial_executor"] = executor
    if epochs is not None:
        raw["trainer"]["epochs"] = epochs
    path = work / f"{executor}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = Sweep(load_sweep(path), Console(quiet=True), output_root=work / "out").run()
    client = MlflowClient(tracking_uri=result.tracking_uri)
    exp = client.get_experiment_by_name(raw["tracking"]["experiment"])
    runs = [
        r
        for r in client.search_runs([exp.experiment_id], max_results=1000)
        if r.data.tags.get(layout.PHASE_TAG) == layout.PHASE_SEARCH and r.info.end_time
    ]
    walls, inner, epochs = [], [], []
    for r in runs:
        m = r.data.metrics
        walls.append((r.info.end_time - r.info.start_time) / 1000)
        inner.append(m.get(TRAIN_TIME_S, 0.0) + float(r.data.tags.get(layout.TIME_BATCH_SIZE_TUNING_S, 0.0)))
        epochs.append(len(client.get_metric_history(r.info.run_id, TRAIN_TIME_S)))
    span = (max(r.info.end_time for r in runs) - min(r.info.start_time for r in runs)) / 1000
    over = [w - i for w, i in zip(walls, inner, strict=True)]
    return {
        "trials": len(runs),
        "epochs": sum(epochs),
        "wall": statistics.mean(walls),
        "inner": statistics.mean(inner),
        "overhead": statistics.mean(over),
        "overhead_median": statistics.median(over),
        "span": span,
        "sweep_wall": result.wall_time_s,
        "efficiency": sum(inner) / span,
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--num-samples", type=int, default=6, help="trials per search (the file has 10)")
    ap.add_argument("--executors", default="fresh,pooled", help="comma-separated: fresh, pooled")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per trial (default: the sweep's 12)")
    args = ap.parse_args()
    executors = args.executors.split(",")
    unknown = sorted(set(executors) - set(EXECUTORS))
    if unknown:
        ap.error(f"--executors takes {', '.join(EXECUTORS)}, but got {', '.join(unknown)}")
    run = BenchRun("trial_overhead", args)

    from ludwig_hpo.execution.cluster import local_resources
    from ludwig_hpo.execution.executor import choose_executor

    default = choose_executor("auto", use_gpu=local_resources()[1] > 0).executor
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="hpo-bench-") as tmp:
        for ex in executors:
            f = figures[ex] = run_search(ex, args.num_samples, args.epochs, Path(tmp))
            print(
                f"{ex}: {f['trials']} trials, {f['epochs']} epochs; per trial: "
                f"wall {f['wall']:.2f}s, in-worker {f['inner']:.2f}s, overhead {f['overhead']:.2f}s "
                f"(median {f['overhead_median']:.2f}s); search phase {f['span']:.1f}s, whole sweep "
                f"{f['sweep_wall']:.1f}s; sweep efficiency {f['efficiency']:.3f}",
                flush=True,
            )
    shown = default if default in figures else executors[0]
    f = figures[shown]
    run.finish(
        {
            "overhead_s_per_trial": Figure(f["overhead"], ".2f"),
            "train_s_per_trial": Figure(f["inner"], ".2f"),
            "sweep_efficiency": Figure(f["efficiency"], ".3f"),
        },
        {"last_line_executor": shown, "executors": figures},
    )


if __name__ == "__main__":
    main()
