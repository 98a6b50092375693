"""How good and how cheap is ``batch_size: auto``? Prints, per model of ``sweeps/digits.yaml``
and ``sweeps/breast_cancer.yaml`` (one worker process, the sweep's base configuration):

- throughput at the chosen size / the best throughput over an exhaustive sweep of the
  admissible sizes (1, 2, 4, ... up to the cap), each measured with the same probe but
  more steps;
- tuning time / the trial's training time (a real ``train_loop`` run of the sweep's epochs);
- the cache hit rate over a 16-trial sweep: 16 configurations sampled from the sweep's search
  space (Optuna TPE, the file's seed, no feedback), each looked up in a shared cache by the
  same key the trials use.

Last line: ``throughput_ratio=<x> tuning_fraction=<y> cache_hit_rate=<z>`` (worst model's);
the figures also go to ``bench/results/batch_size.json`` (see ``bench/_results.py``).
Run: ``python bench/batch_size.py`` (``--epochs``, ``--steps``, ``--repeats``, ``--cache-trials``
shrink it; the defaults are the measured configuration).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.model import build_model
from ludwig_hpo.search.space import decode, to_optuna
from ludwig_hpo.train.autobatch import MIN_STEPS_PER_EPOCH, describe_model
from ludwig_hpo.train.batch_size import MemoryCache, cache_key
from ludwig_hpo.train.data import DeviceData
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.probe import make_train_probe
from ludwig_hpo.train.step import combined_loss, make_optimizer

from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ("digits.yaml", "breast_cancer.yaml")


def exhaustive(cfg, data, cap: int, also: int, *, steps: int, repeats: int) -> dict[int, float]:
    """samples/s at every power of two up to ``cap``, ``cap`` and ``also``: median of ``repeats``
    probes of ``steps`` steps each (after 3 warm-up steps)."""
    torch.manual_seed(cfg.trainer.seed)
    dd = DeviceData(data, torch.device("cpu"))
    model = build_model(cfg, data.meta)
    opt = make_optimizer(cfg, model.parameters(), cfg.trainer.learning_rate)
    probe = make_train_probe(
        model,
        opt,
        lambda x, y: combined_loss(cfg, model(x), y),
        dd,
        data.splits["train"],
        seed=0,
        warmup=3,
        steps=steps,
    )
    sizes = sorted({2**i for i in range(int(math.log2(cap)) + 1)} | {cap, also})
    return {b: statistics.median(probe(b) for _ in range(repeats)) for b in sizes}


def hit_rate(loaded, data, n: int) -> tuple[float, int]:
    """(hit rate, misses) of the batch-size cache over ``n`` trials sampled from the search space."""
    hp = loaded.config.hyperopt
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=hp.search_alg.seed))
    dists = {p: to_optuna(s) for p, s in hp.parameters.items()}
    cache, hits = MemoryCache(), 0
    for _ in range(n):
        trial = study.ask(dists)
        cfg = resolve_trial_config(loaded.raw, decode(hp.parameters, trial.params))
        study.tell(trial, 0.0)
        model = build_model(cfg, data.meta)
        cap = max(
            1,
            min(
                cfg.trainer.max_batch_size,
                math.ceil(len(data.splits["train"]) / cfg.backend.num_workers) // MIN_STEPS_PER_EPOCH,
            ),
        )
        key = cache_key(
            architecture=describe_model(model),
            input_shapes={k: tuple(v.shape[1:]) for k, v in data.inputs.items()},
            device="cpu",
            device_memory=0,
            world_size=cfg.backend.num_workers,
            precision="fp32",
            strategy=cfg.backend.strategy,
            max_size=cap,
            optimizer=cfg.trainer.optimizer.type,
        )
        hits += cache.get(key) is not None
        cache.put(key, {"batch_size": 1})
    return hits / n, n - hits


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument(
        "--epochs", type=int, default=None, help="epochs of the trial's training run (default: the sweep's)"
    )
    ap.add_argument(
        "--steps", type=int, default=20, help="measured steps per probe of the exhaustive sweep (default 20)"
    )
    ap.add_argument("--repeats", type=int, default=3, help="probes per size of the exhaustive sweep (default 3)")
    ap.add_argument("--cache-trials", type=int, default=16, help="sampled trials of the cache hit rate (default 16)")
    args = ap.parse_args()
    run = BenchRun("batch_size", args)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.set_num_threads(1)
    ratios, fractions, rates = [], [], []
    details: dict[str, Any] = {}
    n = args.cache_trials
    for name in SWEEPS:
        loaded = load_sweep(ROOT / "sweeps" / name)
        cfg = loaded.config
        data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
        reports: list[dict] = []
        train_loop(cfg, data, Job(epochs=args.epochs), lambda m, c, out=reports: out.append(m))
        chosen = reports[0]["batch_size"]
        tuning_s, train_s = reports[0]["batch_size_tuning_s"], reports[-1]["train_time_s"]
        cap = max(1, min(cfg.trainer.max_batch_size, len(data.splits["train"]) // MIN_STEPS_PER_EPOCH))
        speeds = exhaustive(cfg, data, cap, also=chosen, steps=args.steps, repeats=args.repeats)
        best_size = max(speeds, key=speeds.get)
        ratio = speeds[chosen] / speeds[best_size]
        rate, misses = hit_rate(loaded, data, n)
        print(
            f"{name}: chosen batch size {chosen} (tried {reports[0].get('batch_size_tried', '-')}); "
            f"exhaustive samples/s {{{', '.join(f'{b}: {s:.0f}' for b, s in speeds.items())}}}; "
            f"best {best_size}; throughput ratio {ratio:.3f}; tuning {tuning_s:.3f}s / training "
            f"{train_s:.3f}s = {tuning_s / train_s:.3f} per tuned trial; cache hit rate over {n} trials "
            f"{rate:.2f}, so tuning / training over those {n} trials = {misses * tuning_s / (n * train_s):.3f}",
            flush=True,
        )
        ratios.append(ratio)
        fractions.append(tuning_s / train_s)
        rates.append(rate)
        details[name] = {
            "chosen_batch_size": chosen,
            "batch_size_tried": reports[0].get("batch_size_tried"),
            "samples_per_s_by_size": speeds,
            "best_batch_size": best_size,
            "throughput_ratio": ratio,
            "tuning_s": tuning_s,
            "train_s": train_s,
            "tuning_fraction": tuning_s / train_s,
            "cache_hit_rate": rate,
        }
    run.finish(
        {
            "throughput_ratio": Figure(min(ratios), ".3f"),
            "tuning_fraction": Figure(max(fractions), ".3f"),
            "cache_hit_rate": Figure(min(rates), ".2f"),
        },
        details,
    )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
