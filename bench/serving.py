"""What a raw-row request to the served model costs, and how it grows with the training split.

The served model (:class:`ludwig_hpo.model.pyfunc.ServedModel`, what ``hpo predict``, the pyfunc
model and ``hpo serve`` run) prepares each request's rows by applying the statistics the sweep
fitted on its training split (``docs/serving.md``), so a request's cost should not grow with
the training split; ``kept_cells`` counts the training cells the model still carries (features
whose type refits), 0 for this model. This bench builds a tabular model (``--numbers`` number inputs, a category
and a binary input, a category target; random rows, an untrained model: only the time counts)
for each training-split size of ``--train-rows``, and times one request of ``--request-rows``
rows through ``ServedModel.predict`` (median of ``--repeats``, after one warm-up), and the
model's forward pass alone on the same prepared rows.

Last line: ``request_ms=<x> forward_ms=<y> prepare_share=<z>`` at the largest training split
(``prepare_share``: the fraction of the request spent outside the forward pass); per size the
figures go to ``bench/results/serving.json`` (see ``bench/_results.py``). Run:
``python bench/serving.py [--train-rows 1000,10000,100000] [--request-rows 1]``.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pandas as pd
import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.data.preprocess import PreparedData, kept_rows
from ludwig_hpo.model import build_model
from ludwig_hpo.model.predictions import output_values
from ludwig_hpo.model.pyfunc import ServedModel
from ludwig_hpo.model.raw_rows import reference_rows

from _results import BenchRun, Figure, parser


def frame(rows: int, numbers: int, seed: int = 0) -> pd.DataFrame:
    """``rows`` random rows: ``x0..`` numbers, ``city`` (20 labels), ``pets`` (yes/no), ``kind`` (3 labels)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, object] = {f"x{i}": rng.normal(size=rows) for i in range(numbers)}
    cols["city"] = rng.choice([f"c{i}" for i in range(20)], size=rows)
    cols["pets"] = rng.choice(["yes", "no"], size=rows)
    cols["kind"] = rng.choice(["a", "b", "c"], size=rows)
    return pd.DataFrame(cols)


def config(numbers: int) -> SweepConfig:
    inputs = [{"name": f"x{i}", "type": "number"} for i in range(numbers)]
    inputs += [{"name": "city", "type": "category"}, {"name": "pets", "type": "binary"}]
    return SweepConfig.model_validate(
        {
            "name": "serving-bench",
            "dataset": {"source": "rows.csv", "split": {"train": 0.8, "validation": 0.1, "test": 0.1}},
            "input_features": inputs,
            "output_features": [{"name": "kind", "type": "category"}],
            "hyperopt": {"parameters": {"trainer.learning_rate": {"space": "choice", "categories": [0.001]}}},
        }
    )


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def measure(total_rows: int, numbers: int, request_rows: int, repeats: int) -> dict[str, float]:
    cfg = config(numbers)
    df = frame(total_rows, numbers)
    data = prepare(df, cfg)
    kept = kept_rows(df, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta).eval()
    served = ServedModel(model, cfg, data.meta, reference_rows(kept.df.iloc[kept.splits["train"]], cfg))
    rows = data.splits["test"][:request_rows]
    request = kept.df.iloc[rows].drop(columns=["kind"])
    prepared = PreparedData({k: v[rows] for k, v in data.inputs.items()}, {}, {}, (), data.meta)
    request_ms = median_ms(lambda: served.predict(request), repeats)
    forward_ms = median_ms(lambda: output_values(model, prepared), repeats)
    return {
        "train_rows": float(len(kept.splits["train"])),
        "kept_cells": float(served.preparer.reference.size),
        "request_ms": request_ms,
        "forward_ms": forward_ms,
        "prepare_share": 1.0 - forward_ms / request_ms if request_ms else 0.0,
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--train-rows", default="1000,10000,100000", help="dataset sizes (80 %% train), comma-separated")
    ap.add_argument("--request-rows", type=int, default=1)
    ap.add_argument("--numbers", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args()
    run = BenchRun("serving", args)
    torch.set_num_threads(1)
    details = {}
    for n in (int(v) for v in args.train_rows.split(",")):
        got = measure(n, args.numbers, args.request_rows, args.repeats)
        details[str(n)] = got
        print(
            f"{int(got['train_rows'])} training rows: request of {args.request_rows} rows {got['request_ms']:.2f} ms, "
            f"forward pass {got['forward_ms']:.2f} ms"
        )
    last = details[str(max(int(v) for v in args.train_rows.split(",")))]
    run.finish(
        {
            "request_ms": Figure(last["request_ms"], ".2f"),
            "forward_ms": Figure(last["forward_ms"], ".2f"),
            "prepare_share": Figure(last["prepare_share"], ".3f"),
        },
        details=details,
    )


if __name__ == "__main__":
    main()
