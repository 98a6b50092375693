"""What does the worker training loop cost on top of plain PyTorch? Prints, per model of
``sweeps/digits.yaml`` and ``sweeps/breast_cancer.yaml`` (one worker process, one intra-op
thread, a fixed per-worker batch size, the sweep's base configuration and epochs):

- samples/s of :func:`ludwig_hpo.train.loop.train_loop` (a search trial: per-epoch
  validation metrics and the epoch's checkpoint, as in a sweep);
- samples/s of a plain hand-written PyTorch loop on the same model, optimizer, data, batch
  size and epochs (shuffled in-memory tensors, forward/backward, the configured gradient
  clipping — Ludwig's default clips the global norm to 0.5 — and step, validation loss and
  accuracy after every epoch);
- their ratio: the median, over ``--repeats`` pairs of back-to-back runs (in alternating
  order), of each pair's samples/s ratio. Load on a shared machine drifts between pairs far
  more than within one (each run is ~0.1-0.3 s), so the pairs' ratios vary much less than
  the two loops' own figures.

samples/s = training samples stepped over (epochs x full batches x batch size) / wall
seconds of the whole run (model build to last epoch). Each samples/s figure is the median of
``--repeats`` runs, after one warm-up run of each.

Last line: ``ratio_vs_plain=<x>`` (the worse model's); the figures also go to
``bench/results/train_loop.json`` (see ``bench/_results.py``). Run: ``python bench/train_loop.py``
(``--epochs`` caps the sweeps' epochs, for a quick check).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import PreparedData, load_dataframe, prepare
from ludwig_hpo.model import build_model
from ludwig_hpo.train.loop import Job, train_loop

from _loops import epoch_batches, optimizer_step, paired_runs, ratio_quartiles
from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ("digits.yaml", "breast_cancer.yaml")


def trained_samples(cfg: SweepConfig, data: PreparedData) -> int:
    """Samples stepped over by one run: every training row, except a last batch of a single row
    (both loops leave that one out, as Ludwig's batcher does)."""
    rows = len(data.splits["train"])
    return cfg.trainer.epochs * (rows - (1 if rows % cfg.trainer.batch_size == 1 else 0))


def ours(cfg: SweepConfig, data: PreparedData) -> float:
    """Wall seconds of one search-trial run of the platform's worker loop."""
    t = time.perf_counter()
    train_loop(cfg, data, Job(), lambda metrics, checkpoint_dir: None)
    return time.perf_counter() - t


def plain(cfg: SweepConfig, data: PreparedData) -> float:
    """Wall seconds of the hand-written loop: what a user would write without the platform."""
    t = time.perf_counter()
    torch.manual_seed(cfg.trainer.seed)
    model = build_model(cfg, data.meta)
    o = cfg.trainer.optimizer
    if o.type == "sgd":
        opt = torch.optim.SGD(
            model.parameters(), lr=cfg.trainer.learning_rate, momentum=o.momentum, weight_decay=o.weight_decay
        )
    else:
        cls = torch.optim.AdamW if o.type == "adamw" else torch.optim.Adam
        opt = cls(model.parameters(), lr=cfg.trainer.learning_rate, weight_decay=o.weight_decay)
    params, clip = list(model.parameters()), cfg.trainer.gradient_clipping
    (out,) = cfg.output_features
    lossf = F.cross_entropy if out.type == "category" else F.binary_cross_entropy_with_logits
    x = {k: torch.tensor(v) for k, v in data.inputs.items()}
    y = torch.tensor(data.targets[out.name])
    train = torch.from_numpy(data.splits["train"])
    val = torch.from_numpy(data.splits["validation"])
    bs = cfg.trainer.batch_size
    ebs = cfg.trainer.eval_batch_size or bs  # Ludwig's null: the training batch size
    xv = {k: v[val] for k, v in x.items()}
    yv = y[val]
    for _ in range(cfg.trainer.epochs):
        model.train()
        for idx in epoch_batches(train, bs):
            optimizer_step(opt, params, lossf(model({k: v[idx] for k, v in x.items()})[out.name], y[idx]), clip)
        model.eval()
        with torch.no_grad():
            total, correct = 0.0, 0.0
            for i in range(0, len(val), ebs):
                logits = model({k: v[i : i + ebs] for k, v in xv.items()})[out.name]
                total += lossf(logits, yv[i : i + ebs], reduction="sum").item()
                pred = logits.argmax(-1) if out.type == "category" else (logits > 0).float()
                correct += (pred == yv[i : i + ebs]).sum().item()
        _ = (total / len(val), correct / len(val))
    return time.perf_counter() - t


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--batch-size", type=int, default=32, help="per-worker batch size (default 32)")
    ap.add_argument("--repeats", type=int, default=21, help="measured pairs of runs per model (default 21)")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per run (default: each sweep's)")
    args = ap.parse_args()
    run = BenchRun("train_loop", args)
    torch.set_num_threads(1)
    ratios = []
    details: dict[str, Any] = {}
    for name in SWEEPS:
        loaded = load_sweep(ROOT / "sweeps" / name)
        raw = {**loaded.raw, "backend": {**loaded.raw["backend"], "num_workers": 1}}
        fixed: dict[str, Any] = {"trainer.batch_size": args.batch_size}
        if args.epochs is not None:
            fixed["trainer.epochs"] = args.epochs
        cfg = resolve_trial_config(raw, fixed)
        data = prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg)
        n = trained_samples(cfg, data)
        times, pair_ratios = paired_runs(ours, plain, cfg, data, args.repeats)
        ours_sps = n / statistics.median(times["ours"])
        plain_sps = n / statistics.median(times["plain"])
        ratio, q1, q3 = ratio_quartiles(pair_ratios)
        best = min(times["plain"]) / min(times["ours"])
        ratios.append(ratio)
        print(
            f"{name}: batch size {args.batch_size}, {cfg.trainer.epochs} epochs x "
            f"{len(data.splits['train']) // args.batch_size} steps; worker loop {ours_sps:.0f} samples/s, "
            f"plain loop {plain_sps:.0f} samples/s (medians of {args.repeats}); ratio {ratio:.3f} "
            f"(median of the {args.repeats} back-to-back pairs' ratios; quartiles "
            f"{q1:.3f}..{q3:.3f}); best runs' ratio {best:.3f}",
            flush=True,
        )
        details[name] = {
            "epochs": cfg.trainer.epochs,
            "steps_per_epoch": len(data.splits["train"]) // args.batch_size,
            "worker_loop_samples_per_s": ours_sps,
            "plain_loop_samples_per_s": plain_sps,
            "ratio": ratio,
            "ratio_quartiles": [q1, q3],
            "best_runs_ratio": best,
            "pair_ratios": pair_ratios,
        }
    run.finish({"ratio_vs_plain": Figure(min(ratios), ".3f")}, details)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
