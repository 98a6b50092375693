"""``hpo evaluate DIR|MODEL --dataset DATA [--split S] [-o OUT]``: the metrics the sweep reports
(``<split>/<output>/<metric>``, ``<split>/combined/loss``), of a raw-row model on labelled rows,
computed by the sweep's own scoring (:func:`ludwig_hpo.train.evaluate.evaluate`).

``--split``, as Ludwig's ``evaluate`` takes it: ``full`` (default) scores every row;
``training``, ``validation`` or ``test`` score the rows the model's config puts in that split
(its ``dataset.split`` / ``preprocessing.split``: a split column, or the seeded random split,
so the sweep's own file gives the sweep's own test rows); ``each`` scores the three splits in
turn. The metrics are printed and written as JSON (``{"<split>/<output>/<metric>": value}``).
The CLI process, CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from rich.console import Console

from ludwig_hpo.errors import DataError

if TYPE_CHECKING:  # torch and MLflow load with the model, not with the CLI
    import pandas as pd

    from ludwig_hpo.model.llm_pyfunc import ServedLLM
    from ludwig_hpo.model.pyfunc import ServedModel
    from ludwig_hpo.model.raw_rows import BadRow

#: ``--split`` values: Ludwig's split names -> the sweep's.
SPLITS = {"training": "train", "validation": "validation", "test": "test"}
#: ``--split`` values besides those.
FULL, EACH = "full", "each"


def split_names(split: str) -> list[str]:
    """The ``--split`` value as the splits to score, in Ludwig's names.

    Raises:
        DataError: an unknown split.
    """
    if split == EACH:
        return list(SPLITS)
    if split == FULL or split in SPLITS:
        return [split]
    raise DataError(
        f"unknown split {split!r}",
        key="--split",
        fix=f"use one of {', '.join([FULL, *SPLITS, EACH])}",
    )


class Evaluation(NamedTuple):
    """One split's scores: ``{"<split>/<output>/<metric>": value}``, the ``rows`` scored and
    the ``bad_rows`` left out."""

    scores: dict[str, float]
    rows: int
    bad_rows: tuple[BadRow, ...]


def evaluate_rows(
    served: ServedModel | ServedLLM, df: pd.DataFrame, split: str, *, skip_bad_rows: bool, data_dir: Path | None
) -> Evaluation:
    """The scores of ``served`` on ``df``'s rows of ``split`` (one name of :func:`split_names`);
    an llm's are its text output's teacher-forced and generated-output metrics.

    Raises:
        DataError / BadRowsError: as :meth:`~ludwig_hpo.model.pyfunc.ServedModel.prepare_labelled`;
            a split without rows.
    """
    import torch

    from ludwig_hpo.data.preprocess import kept_rows
    from ludwig_hpo.driver.holdout import EVAL_BATCH_SIZE
    from ludwig_hpo.train.data import DeviceData
    from ludwig_hpo.train.evaluate import evaluate

    cfg = served.cfg
    if split != FULL:
        kept = kept_rows(df, cfg)  # the sweep's own row selection and split, on these rows
        rows = kept.splits.get(SPLITS[split])
        if rows is None or len(rows) == 0:
            raise DataError(f"the {split} split of these rows is empty", key="--split", fix="choose another split")
        df = kept.df.iloc[rows]
    prepared = served.prepare_labelled(df, skip_bad_rows=skip_bad_rows, data_dir=data_dir)
    size = cfg.trainer.eval_batch_size
    batch = size if isinstance(size, int) else EVAL_BATCH_SIZE
    name = SPLITS.get(split, FULL)
    scores = evaluate(
        served.model, cfg, DeviceData(prepared.data, torch.device("cpu")), prepared.data.splits["rows"], name, batch
    )
    return Evaluation(scores, len(prepared.kept), prepared.bad)


def evaluate_command(
    source: str,
    dataset: Path,
    output: Path,
    *,
    split: str,
    skip_bad_rows: bool,
    tracking_uri: str | None,
    out: Console,
    err: Console,
) -> dict[str, float]:
    """Score ``dataset``'s rows of ``split`` with the model, print one line per metric and write
    them to ``output`` (JSON, renamed into place); returns them.

    Raises:
        DataError: the model or the dataset cannot be read, a column is missing, an empty split.
        BadRowsError: bad rows (listed on ``err`` first) without ``skip_bad_rows``; with it,
            a DataError when no row of a split can be scored.
    """
    from ludwig_hpo.driver.model_source import resolve_source
    from ludwig_hpo.driver.predict import check_output, read_rows, refuse_bad_rows, say_bad_rows, write_atomically
    from ludwig_hpo.model.raw_rows import BadRowsError

    names = split_names(split)
    model = resolve_source(source, tracking_uri)
    check_output(output)
    df, data_dir = read_rows(dataset)
    served = model.load()
    scores: dict[str, float] = {}
    for name in names:
        try:
            result = evaluate_rows(served, df, name, skip_bad_rows=skip_bad_rows, data_dir=data_dir)
        except BadRowsError as e:
            raise refuse_bad_rows(err, e, skip_bad_rows=skip_bad_rows) from None
        if result.bad_rows:
            say_bad_rows(err, result.bad_rows, "left out")
        out.print(f"{name}: {result.rows} rows", highlight=False)
        for key, value in result.scores.items():
            out.print(f"  {key} = {value:.6g}", highlight=False)
        scores.update(result.scores)
    write_atomically(json.dumps(scores, indent=2), output)
    out.print(f"metrics -> {output}", highlight=False)
    return scores
