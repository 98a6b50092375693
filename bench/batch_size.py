"""How good and how cheap is ``batch_size: auto``? Prints, per model of ``sweeps/digits.yaml``
and ``sweeps/breast_cancer.yaml`` (one worker process, the sweep's base configuration):

- throughput at the chosen size / the best throughput over an exhaustive sweep of the
  admissible sizes (1, 2, 4, ... up to the cap), each measured with the same probe but
  more steps;
- tuning time / the trial's training time (a real ``train_loop`` run of the sweep's epochs);
- the cache hit rate over a 16-trial sweep: 16 configurations sampled from the sweep's search
  space (Optuna TPE, the file's seed, no feedback), each looked up in a shared cache by the
  same key the trials use.

Last line: ``throughput_ratio=<x> tuning_fraction=<y> cache_hit_rate=<z>`` (worst model's).
Run: ``python bench/batch_size.py``.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

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
from ludwig_hpo.train.loop import Job, _combined_loss, _make_optimizer, train_loop
from ludwig_hpo.train.probe import make_train_probe

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ("digits.yaml", "breast_cancer.yaml")
REPEATS = 3


def exhaustive(cfg, data, cap: int, also: int) -> dict[int, float]:
    """samples/s at every power of two up to ``cap``, ``cap`` and ``also``: median of REPEATS probes of 20 steps."""
    torch.manual_seed(cfg.trainer.seed)
    dd = DeviceData(data, torch.device("cpu"))
    model = build_model(cfg, data.meta)
    opt = _make_optimizer(cfg, model.parameters())
    probe = make_train_probe(
        model, opt, lambda x, y: _combined_loss(cfg, model(x), y), dd, data.splits["train"], seed=0, warmup=3, steps=20
    )
    sizes = sorted({2**i for i in range(int(math.log2(cap)) + 1)} | {cap, also})
    return {b: statistics.median(probe(b) for _ in range(REPEATS)) for b in sizes}


def hit_rate(loaded, data, n: int = 16) -> tuple[float, int]:
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
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.set_num_threads(1)
    ratios, fractions, rates = [], [], []
    for name in SWEEPS:
        loaded = load_sweep(ROOT / "sweeps" / name)
        cfg = loaded.config
        data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
        reports: list[dict] = []
        train_loop(cfg, data, Job(), lambda m, c, out=reports: out.append(m))
        chosen = reports[0]["batch_size"]
        tuning_s, train_s = reports[0]["batch_size_tuning_s"], reports[-1]["train_time_s"]
        cap = max(1, min(cfg.trainer.max_batch_size, len(data.splits["train"]) // MIN_STEPS_PER_EPOCH))
        speeds = exhaustive(cfg, data, cap, also=chosen)
        best_size = max(speeds, key=speeds.get)
        ratio = speeds[chosen] / speeds[best_size]
        rate, misses = hit_rate(loaded, data)
        print(
            f"{name}: chosen batch size {chosen} (tried {reports[0].get('batch_size_tried', '-')}); "
            f"exhaustive samples/s {{{', '.join(f'{b}: {s:.0f}' for b, s in speeds.items())}}}; "
            f"best {best_size}; throughput ratio {ratio:.3f}; tuning {tuning_s:.3f}s / training "
            f"{train_s:.3f}s = {tuning_s / train_s:.3f} per tuned trial; cache hit rate over 16 trials "
            f"{rate:.2f}, so tuning / training over those 16 trials = {misses * tuning_s / (16 * train_s):.3f}"
        )
        ratios.append(ratio)
        fractions.append(tuning_s / train_s)
        rates.append(rate)
    print(f"throughput_ratio={min(ratios):.3f} tuning_fraction={max(fractions):.3f} cache_hit_rate={min(rates):.2f}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
