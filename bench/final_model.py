"""Does ``kfold.select: cv`` give a better final model than the search's best trial? On
``sweeps/breast_cancer.yaml`` (an MLP over 30 numbers, its search space, its ``kfold: {k: 3,
top_k: 2}``), over seeds 0-4 (``--seeds``): seed i splits the rows with ``dataset.split.seed``
42 + i and searches with ``search_alg.seed`` 11 + i.

Each seed runs the sweep's phases in this process without Ray (this measures the rule, not
the scheduling): the search, TPE through Optuna's ask/tell as ``OptunaSearch`` drives it
(``--trials``, default the file's 10; every trial runs the sweep's epochs: no ASHA), each
trial trained by the platform's worker loop (one worker, batch size 32) and ranked by its best
validation loss; then the k-fold phase's jobs of the top configurations (the folds, and the
run on train+validation for the search trial's best epoch count, which keeps its final weights),
and the product's rule (:func:`ludwig_hpo.results.selection.select_configuration`). Both
candidate final models are scored on the seed's test split: ``search``, the search's best
trial's best weights; ``cv``, the chosen configuration retrained on train+validation.

Prints per seed the chosen configuration, the rule's reason and both test losses; last line:
``test_delta_cv_vs_search=<x>``, the mean over seeds of the search model's test loss minus the
cv model's (``test/malignant/loss``: positive when ``select: cv`` is better), with how often the
rule chose another configuration than the search's best and the mean test ROC AUC difference
(cv − search: positive when ``cv`` is better). ``--k`` overrides the sweep's 3 folds. The figures also go to
``bench/results/final_model.json`` (see ``bench/_results.py``).
Run: ``python bench/final_model.py``.
"""

from __future__ import annotations

import io
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
from ludwig_hpo.config.paths import deep_merge
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.model import build_model
from ludwig_hpo.results import EpochRecord, KFoldRecord, TrialRecord
from ludwig_hpo.results.kfold import best_epoch
from ludwig_hpo.results.ranking import distinct_top, rank_trials
from ludwig_hpo.results.selection import select_configuration
from ludwig_hpo.search.algorithms import make_sampler
from ludwig_hpo.search.space import decode, to_optuna
from ludwig_hpo.train.data import DeviceData
from ludwig_hpo.train.evaluate import evaluate
from ludwig_hpo.train.loop import Job, train_loop
from ludwig_hpo.train.report_keys import MODEL_FILE

from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "sweeps" / "breast_cancer.yaml"
TEST_KEY = "test/malignant/loss"
ROC_AUC = "test/malignant/roc_auc"


def train(cfg: Any, data: Any, job: Job) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Run ``job`` in this process: (its reports, the ``model.pt`` of its last checkpoint)."""
    reports: list[dict[str, Any]] = []
    saved: list[bytes] = []

    def report(metrics: dict[str, Any], folder: str | None) -> None:
        reports.append(dict(metrics))
        if folder is not None:  # persisted before the next write replaces it
            saved.append((Path(folder) / MODEL_FILE).read_bytes())

    train_loop(cfg, data, job, report)
    weights = torch.load(io.BytesIO(saved[-1]), weights_only=True) if saved else None
    return reports, weights


def test_scores(cfg: Any, data: Any, weights: dict[str, Any]) -> dict[str, float]:
    """``weights`` of ``cfg``'s model scored on the test split (``{"test/malignant/<metric>": value}``)."""
    model = build_model(cfg, data.meta)
    model.load_state_dict(weights["state_dict"])
    scores = evaluate(model, cfg, DeviceData(data, torch.device("cpu")), data.splits["test"], "test", 512)
    return {k: float(v) for k, v in scores.items() if k.startswith("test/malignant/")}


def one_seed(seed: int, n_trials: int, k: int | None) -> dict[str, Any]:
    loaded = load_sweep(SWEEP)
    raw = deep_merge(
        loaded.raw,
        {
            "kfold": {"k": k or loaded.raw["kfold"]["k"]},
            "dataset": {"split": {"seed": 42 + seed}},
            "backend": {"num_workers": 1},
            "trainer": {"batch_size": 32},
            "hyperopt": {"search_alg": {"seed": 11 + seed}},
        },
    )
    base = resolve_trial_config(raw, {})
    hp, kf = base.hyperopt, base.kfold
    assert kf is not None and kf.select == "cv"
    data = prepare(load_dataframe(base.dataset.source, loaded.base_dir), base)
    dists = {p: to_optuna(s) for p, s in hp.parameters.items()}
    study = optuna.create_study(direction="minimize", sampler=make_sampler(hp))
    records: list[TrialRecord] = []
    weights: dict[str, dict[str, Any] | None] = {}
    for i in range(n_trials):
        trial = study.ask(dists)
        params = decode(hp.parameters, trial.params)
        tid = f"trial{i}"
        try:
            reports, weights[tid] = train(resolve_trial_config(raw, params), data, Job())
        except FloatingPointError:  # diverged: a failed trial
            study.tell(trial, math.inf)
            records.append(TrialRecord(tid, "FAILED", params, None, None))
            continue
        history = tuple(EpochRecord(r["epoch"], r["objective"]) for r in reports)
        best = min(h.objective for h in history)
        study.tell(trial, best)
        records.append(TrialRecord(tid, "FINISHED", params, history[-1].objective, best, history))
    top = distinct_top(rank_trials(tuple(records), 1.0), kf.top_k)
    kfold, retrained = [], {}
    for rank, rec in enumerate(top, 1):
        cfg, epochs = resolve_trial_config(raw, rec.params), best_epoch(rec)
        folds = [train(cfg, data, Job("fold", f, epochs))[0][-1]["objective"] for f in range(kf.k)]
        reports, retrained[rank] = train(cfg, data, Job("test", None, epochs))
        kfold.append(
            KFoldRecord(rank, rec.trial_id, rec.params, tuple(folds), reports[-1]["objective"], "malignant/loss")
        )
    sel = select_configuration(kfold, hp.goal, "cv")
    assert sel is not None and retrained[sel.config_rank] is not None
    search_weights = weights[top[0].trial_id]
    assert search_weights is not None
    search_all = test_scores(resolve_trial_config(raw, top[0].params), data, search_weights)
    chosen = top[sel.config_rank - 1]
    cv_all = test_scores(resolve_trial_config(raw, chosen.params), data, retrained[sel.config_rank])  # type: ignore[arg-type]
    search, cv = search_all[TEST_KEY], cv_all[TEST_KEY]
    print(
        f"seed {seed}: config #{sel.config_rank} chosen ({sel.chosen_by}: {sel.reason}); "
        f"{TEST_KEY}: search {search:.4f}, cv {cv:.4f}; roc_auc: search {search_all[ROC_AUC]:.4f}, "
        f"cv {cv_all[ROC_AUC]:.4f}",
        flush=True,
    )
    return {
        "seed": seed,
        "config_rank": sel.config_rank,
        "chosen_by": sel.chosen_by,
        "p_value": sel.p_value,
        "cv_means": list(sel.cv_means),
        "search_test_loss": search,
        "cv_test_loss": cv,
        "search_test_scores": search_all,
        "cv_test_scores": cv_all,
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    ap.add_argument("--trials", type=int, default=None, help="search trials per seed (default: the sweep's)")
    ap.add_argument("--k", type=int, default=None, help="folds (default: the sweep's kfold.k, 3)")
    args = ap.parse_args()
    run_record = BenchRun("final_model", args)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.set_num_threads(1)
    n_trials = args.trials or load_sweep(SWEEP).config.hyperopt.num_trials
    t0 = time.perf_counter()
    per_seed = [one_seed(seed, n_trials, args.k) for seed in range(args.seeds)]
    deltas = [s["search_test_loss"] - s["cv_test_loss"] for s in per_seed]
    auc = statistics.mean(s["cv_test_scores"][ROC_AUC] - s["search_test_scores"][ROC_AUC] for s in per_seed)
    other = sum(s["config_rank"] != 1 for s in per_seed)
    print(
        f"{len(per_seed)} seeds, {n_trials} trials each, {time.perf_counter() - t0:.0f}s; another configuration "
        f"than the search's best chosen for {other}; test loss difference per seed (search - cv): "
        + ", ".join(f"{d:+.4f}" for d in deltas)
        + f"; mean {ROC_AUC} difference (cv - search) {auc:+.4f}"
    )
    run_record.finish(
        {
            "test_delta_cv_vs_search": Figure(statistics.mean(deltas), ".4f"),
            "other_config_chosen": Figure(other, "d"),
            "roc_auc_delta_cv_vs_search": Figure(auc, ".4f"),
        },
        {"per_seed": per_seed, "metric": TEST_KEY, "sweep": "sweeps/breast_cancer.yaml", "trials": n_trials},
    )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
