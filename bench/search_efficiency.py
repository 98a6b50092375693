"""Does TPE find good configurations with fewer trials than random search? On a cheap real
objective: the MLP of ``sweeps/breast_cancer.yaml`` over its search space (learning rate,
layers, width, dropout, weight decay), each trial trained by the platform's worker loop
(:func:`ludwig_hpo.train.loop.train_loop`, one worker in this process, batch size 32, the
sweep's 12 epochs) and scored by its best validation loss over the epochs, as a sweep
ranks trials.

The samplers are driven through Optuna's ask/tell (what Tune's ``OptunaSearch`` does, without
Ray: this measures the sampler, not the scheduling): TPE as the sweep file configures it
(``make_sampler``, ``n_startup_trials: 4``) against Optuna's random sampler, each with 5
seeds (random search's seed offset by 1000, so that it does not repeat TPE's random start-up
trials). Random search runs 32 trials, TPE ``--tpe-trials``. Prints, per sampler, the median over
seeds of the best validation loss after 4, 8, 16 and 32 trials; then, per seed, how many trials
TPE needed to reach the best loss random search found in 32 trials (seed pair i, 1000 + i).

Last line: ``tpe_trials_to_random_best32=<n>`` (median over seeds; ``>K`` when TPE did not get
there within its ``K`` trials for most seeds). Run: ``python bench/search_efficiency.py``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import numpy as np
import optuna
import torch

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.search.algorithms import make_sampler
from ludwig_hpo.search.space import decode, to_optuna
from ludwig_hpo.train.loop import Job, train_loop

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (0, 1, 2, 3, 4)
RANDOM_TRIALS = 32
CHECKPOINTS = (4, 8, 16, 32)
RANDOM_SEED_OFFSET = 1000


def best_so_far(losses: list[float]) -> list[float]:
    """Running minimum: entry i is the best loss among the first i + 1 trials."""
    return list(np.minimum.accumulate(np.asarray(losses, dtype=float)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tpe-trials", type=int, default=48, help="trials TPE may use (default 48)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.set_num_threads(1)
    loaded = load_sweep(ROOT / "sweeps" / "breast_cancer.yaml")
    hp = loaded.config.hyperopt
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    dists = {p: to_optuna(s) for p, s in hp.parameters.items()}
    raw = {**loaded.raw, "backend": {**loaded.raw["backend"], "num_workers": 1}}
    fixed = {"trainer.batch_size": 32}
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
    for seed in SEEDS:
        # TPE's start-up trials come from a random sampler seeded like TPE: offset random search's
        # seed so the two do not share their first trials.
        rnd = best_so_far(run(optuna.samplers.RandomSampler(seed=RANDOM_SEED_OFFSET + seed), RANDOM_TRIALS))
        tpe_hp = hp.model_copy(update={"search_alg": hp.search_alg.model_copy(update={"seed": seed})})
        tpe = best_so_far(run(make_sampler(tpe_hp), args.tpe_trials))
        curves["random"].append(rnd)
        curves["tpe"].append(tpe)
        target = rnd[RANDOM_TRIALS - 1]
        reached = next((i + 1 for i, v in enumerate(tpe) if v <= target), math.inf)
        needed.append(reached)
        print(
            f"seed {seed}: random best after {RANDOM_TRIALS} = {target:.4f}; TPE best after "
            f"{args.tpe_trials} = {tpe[-1]:.4f}; TPE reached random's best32 after "
            f"{reached if math.isfinite(reached) else f'>{args.tpe_trials}'} trials",
            flush=True,
        )
    for name, runs in curves.items():
        cells = ", ".join(
            f"{k}: {statistics.median(r[k - 1] for r in runs):.4f}" for k in CHECKPOINTS if k <= len(runs[0])
        )
        print(f"{name}: median best validation loss after N trials {{{cells}}}")
    print(
        f"{len(seconds)} trials, {statistics.median(seconds):.3f}s median per trial "
        f"(train_loop wall time), {time.perf_counter() - t0:.0f}s in all"
    )
    med = statistics.median(needed)
    print(
        f"tpe_trials_to_random_best32={med:g}"
        if math.isfinite(med)
        else f"tpe_trials_to_random_best32=>{args.tpe_trials}"
    )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
