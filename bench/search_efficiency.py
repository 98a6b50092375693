"""Does TPE find good configurations with fewer trials than random search? On a cheap real
objective: the MLP of ``sweeps/breast_cancer.yaml`` over its search space (learning rate,
layers, width, dropout, weight decay), each trial trained by the platform's worker loop
(:func:`ludwig_hpo.train.loop.train_loop`, one worker in this process, batch size 32, the
sweep's 12 epochs, ``--epochs``) and scored by its best validation loss over the epochs, as a sweep
ranks trials.

The samplers are driven through Optuna's ask/tell (what Tune's ``OptunaSearch`` does, without
Ray: this measures the sampler, not the scheduling): TPE as the sweep file configures it
(``make_sampler``, ``n_startup_trials: 4``) against Optuna's random sampler, each with seeds
0-4 (``--seeds``; random search's seed offset by 1000, so that it does not repeat TPE's random
start-up trials). Random search runs 32 trials (``--random-trials``), TPE ``--tpe-trials``.
Prints, per sampler, the median over seeds of the best validation loss after 4, 8, 16 and 32
trials; then, per seed, how many trials TPE needed to reach the best loss random search found in
its 32 trials (seed pair i, 1000 + i).

Last line: ``tpe_trials_to_random_best32=<n>`` (median over seeds; ``>K`` when TPE did not get
there within its ``K`` trials for most seeds; the name carries ``--random-trials``). The figures
also go to ``bench/results/search_efficiency.json`` (see ``bench/_results.py``).
Run: ``python bench/search_efficiency.py``.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.search.algorithms import make_sampler
from ludwig_hpo.search.space import decode, to_optuna
from ludwig_hpo.train.loop import Job, train_loop

from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = (4, 8, 16, 32)
RANDOM_SEED_OFFSET = 1000


def best_so_far(losses: list[float]) -> list[float]:
    """Running minimum: entry i is the best loss among the first i + 1 trials."""
    return list(np.minimum.accumulate(np.asarray(losses, dtype=float)))


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--tpe-trials", type=int, default=48, help="trials TPE may use (default 48)")
    ap.add_argument("--random-trials", type=int, default=32, help="trials of random search (default 32)")
    ap.add_argument("--seeds", type=int, default=5, help="seed pairs 0..N-1 (default 5)")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per trial (default: the sweep's)")
    args = ap.parse_args()
    run_record = BenchRun("search_efficiency", args)
    random_trials = args.random_trials
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.set_num_threads(1)
    loaded = load_sweep(ROOT / "sweeps" / "breast_cancer.yaml")
    hp = loaded.config.hyperopt
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    dists = {p: to_optuna(s) for p, s in hp.parameters.items()}
    raw = {**loaded.raw, "backend": {**loaded.raw["backend"], "num_workers": 1}}
    fixed: dict[str, Any] = {"trainer.batch_size": 32}
    if args.epochs is not None:
        fixed["trainer.epochs"] = args.epochs
    seconds: list[float] = []

    def objective(params: dict) -> float:
        cfg = resolve_trial_config(raw, {**decode(hp.parameters, params), **fixed})
        losses: list[float] = []
        t = time.perf_counter()
        try:
            train_loop(cfg, data, Job(), lambda m, _ckpt: losses.append(m["objective"]))
        except FloatingPointError:  # a diverged trial: the worst possible score, as a failed trial
            return math.inf
        seconds.append(time.perf_counter() - t)
        return min(losses)

    def run(sampler: optuna.samplers.BaseSampler, n: int) -> list[float]:
        study = optuna.create_study(direction="minimize", sampler=sampler)
        out = []
        for _ in range(n):
            trial = study.ask(dists)
            value = objective(trial.params)
            study.tell(trial, value)
            out.append(value)
        return out

    curves: dict[str, list[list[float]]] = {"random": [], "tpe": []}
    needed: list[float] = []
    t0 = time.perf_counter()
    per_seed: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        # TPE's start-up trials come from a random sampler seeded like TPE: offset random search's
        # seed so the two do not share their first trials.
        rnd = best_so_far(run(optuna.samplers.RandomSampler(seed=RANDOM_SEED_OFFSET + seed), random_trials))
        tpe_hp = hp.model_copy(update={"search_alg": hp.search_alg.model_copy(update={"seed": seed})})
        tpe = best_so_far(run(make_sampler(tpe_hp), args.tpe_trials))
        curves["random"].append(rnd)
        curves["tpe"].append(tpe)
        target = rnd[random_trials - 1]
        reached = next((i + 1 for i, v in enumerate(tpe) if v <= target), math.inf)
        needed.append(reached)
        print(
            f"seed {seed}: random best after {random_trials} = {target:.4f}; TPE best after "
            f"{args.tpe_trials} = {tpe[-1]:.4f}; TPE reached random's best{random_trials} after "
            f"{reached if math.isfinite(reached) else f'>{args.tpe_trials}'} trials",
            flush=True,
        )
        per_seed.append(
            {"seed": seed, "random_best": target, "tpe_best": tpe[-1], "tpe_trials_to_random_best": reached}
        )
    medians: dict[str, dict[int, float]] = {}
    for name, runs in curves.items():
        medians[name] = {k: statistics.median(r[k - 1] for r in runs) for k in CHECKPOINTS if k <= len(runs[0])}
        cells = ", ".join(f"{k}: {v:.4f}" for k, v in medians[name].items())
        print(f"{name}: median best validation loss after N trials {{{cells}}}")
    median_trial_s = statistics.median(seconds) if seconds else math.nan
    print(
        f"{len(seconds)} trials, {median_trial_s:.3f}s median per trial "
        f"(train_loop wall time), {time.perf_counter() - t0:.0f}s in all"
    )
    med = statistics.median(needed)
    run_record.finish(
        {
            f"tpe_trials_to_random_best{random_trials}": Figure(med, "g")
            if math.isfinite(med)
            else Figure(f">{args.tpe_trials}")
        },
        {"per_seed": per_seed, "median_best_loss_after": medians, "median_trial_s": median_trial_s},
    )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
