"""What does a trial cost beyond its training? Runs the search of ``sweeps/breast_cancer.yaml``
(2-worker DDP trials, ASHA; k-fold and report off) once per trial executor and prints, per
executor:

- trial wall time: the trial's MLflow child run, from Tune starting the trial to its end;
- in-worker time: what rank 0 spent inside the worker loop (choosing the batch size +
  the epochs' training and evaluation: ``batch_size_tuning_s + train_time_s``);
- overhead = wall - in-worker (process start-up, rendezvous, reporting, teardown);
- sweep efficiency = total in-worker time / wall time of the search phase (first trial
  start to last trial end; Tune's gaps between trials count here, not in a trial's wall).

Last line, for the default executor (``backend.trial_executor: auto``):
``overhead_s_per_trial=<x> train_s_per_trial=<y> sweep_efficiency=<z>``.

Run: ``python bench/trial_overhead.py [--num-samples 6] [--executors fresh,pooled]``
(the sweep's ``num_samples`` is capped to keep the run short; its seed is kept). On a
version without ``backend.trial_executor``, only the one executor there is runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import yaml
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]


def _supports_executor() -> bool:
    from ludwig_hpo.config.schema import BackendConfig

    return "trial_executor" in BackendConfig.model_fields


def run_search(executor: str | None, num_samples: int, work: Path) -> dict:
    """Run the capped search with ``executor`` (None: the version's default); return the figures."""
    from mlflow.tracking import MlflowClient

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.driver.sweep import Sweep

    raw = yaml.safe_load((ROOT / "sweeps" / "breast_cancer.yaml").read_text())
    raw.pop("kfold", None)
    raw["report"] = {"enabled": False}
    raw["hyperopt"]["executor"]["num_samples"] = num_samples
    if executor is not None:
        raw["backend"]["trial_executor"] = executor
    path = work / f"{executor or 'default'}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = Sweep(load_sweep(path), Console(quiet=True), output_root=work / "out").run()
    client = MlflowClient(tracking_uri=result.tracking_uri)
    exp = client.get_experiment_by_name(raw["tracking"]["experiment"])
    runs = [
        r
        for r in client.search_runs([exp.experiment_id], max_results=1000)
        if r.data.tags.get("phase") == "search" and r.info.end_time
    ]
    walls, inner, epochs = [], [], []
    for r in runs:
        m = r.data.metrics
        walls.append((r.info.end_time - r.info.start_time) / 1000)
        inner.append(m.get("train_time_s", 0.0) + m.get("batch_size_tuning_s", 0.0))
        epochs.append(len(client.get_metric_history(r.info.run_id, "train_time_s")))
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-samples", type=int, default=6, help="trials per search (the file has 10)")
    ap.add_argument("--executors", default="fresh,pooled", help="comma-separated: fresh, pooled")
    args = ap.parse_args()
    supported = _supports_executor()
    executors = args.executors.split(",") if supported else [None]
    default = None
    if supported:
        from ludwig_hpo.execution.cluster import local_resources
        from ludwig_hpo.execution.executor import choose_executor

        default = choose_executor("auto", use_gpu=local_resources()[1] > 0).executor
    figures = {}
    with tempfile.TemporaryDirectory(prefix="hpo-bench-") as tmp:
        for ex in executors:
            f = figures[ex] = run_search(ex, args.num_samples, Path(tmp))
            print(
                f"{ex or 'fresh (only executor)'}: {f['trials']} trials, {f['epochs']} epochs; per trial: "
                f"wall {f['wall']:.2f}s, in-worker {f['inner']:.2f}s, overhead {f['overhead']:.2f}s "
                f"(median {f['overhead_median']:.2f}s); search phase {f['span']:.1f}s, whole sweep "
                f"{f['sweep_wall']:.1f}s; sweep efficiency {f['efficiency']:.3f}",
                flush=True,
            )
    f = figures.get(default, next(iter(figures.values())))
    print(
        f"overhead_s_per_trial={f['overhead']:.2f} train_s_per_trial={f['inner']:.2f} "
        f"sweep_efficiency={f['efficiency']:.3f}"
    )


if __name__ == "__main__":
    main()
