"""How ``hpo``'s commands show and share their options: flags and arguments in the help
without a type column, and the dataset options every command takes, spelled as Ludwig's CLI
spells them. Imports typer only (the command line itself is :mod:`ludwig_hpo.cli`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import typer

from ludwig_hpo.errors import ConfigError


def _flags_without_type(params: list[Any]) -> list[Any]:
    """Help shows a flag as its name alone (``--restart``, not ``--restart <bool>``); every
    other option names the value a person types (its metavar: ``--workers N``); an argument
    is its name alone (``SWEEP_FILE``, not ``SWEEP_FILE <path>``), in the usage line too
    (``hpo sweep [OPTIONS] SWEEP_FILE``, ``[RESULTS_DIR]`` when it may be left out)."""
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
        elif isinstance(p, typer.core.TyperArgument):
            name = p.metavar or (p.name or "").upper()
            # in place of typer's type column and the braces around a required argument's usage
            arg: Any = p
            arg.display_type_rich = lambda ctx: None
            arg._usage_display_name = functools.partial(str, name if p.required else f"[{name}]")
    return params


class Command(typer.core.TyperCommand):
    """An ``hpo`` command (see :func:`_flags_without_type`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))


class Group(typer.core.TyperGroup):
    """The ``hpo`` group (see :func:`_flags_without_type`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))


#: ``--dataset FILE``: the rows, replacing ``dataset.source`` (Ludwig's ``--dataset``).
DATASET = typer.Option(
    None,
    "--dataset",
    metavar="FILE",
    help="CSV/Parquet file replacing dataset.source (runs a Ludwig config unchanged).",
)
#: Ludwig's separate split files (``--training_set`` ...), refused by :func:`refuse_split_files`.
TRAINING_SET = typer.Option(None, "--training-set", "--training_set", metavar="FILE", hidden=True)
VALIDATION_SET = typer.Option(None, "--validation-set", "--validation_set", metavar="FILE", hidden=True)
TEST_SET = typer.Option(None, "--test-set", "--test_set", metavar="FILE", hidden=True)
VALIDATE_MODEL = (
    "Also build the model's losses and encoders against the prepared data, as hpo sweep and hpo train do "
    "before any trial (imports torch)."
)


def refuse_split_files(training_set: Path | None, validation_set: Path | None, test_set: Path | None) -> None:
    """Ludwig's ``--training_set`` / ``--validation_set`` / ``--test_set`` are not supported
    yet: one dataset is split by ``preprocessing.split``.

    Raises:
        ConfigError: naming the first one given and how to pass the rows instead.
    """
    for flag, given in (
        ("--training-set", training_set),
        ("--validation-set", validation_set),
        ("--test-set", test_set),
    ):
        if given is not None:
            raise ConfigError(
                "separate split files are not supported yet",
                key=flag,
                fix="put the rows in one file with a split column (0 train, 1 validation, 2 test), pass it with "
                "--dataset and set preprocessing.split: {type: fixed, column: split}",
            )


#: ``DIR|MODEL`` of ``hpo predict / evaluate / serve``.
MODEL = typer.Argument(
    ...,
    metavar="DIR|MODEL",
    help="A sweep's (or hpo train's) output folder, an MLflow model folder, or runs:/<parent run id>/model "
    "(in MLFLOW_TRACKING_URI's store).",
)
#: ``--dataset FILE`` of ``hpo predict / evaluate``: the rows to score.
ROWS = typer.Option(..., "--dataset", metavar="FILE", help="CSV/Parquet file of rows with the dataset's columns.")
#: ``--skip-bad-rows``: leave rows that cannot be scored out (counted) instead of failing.
SKIP = typer.Option(
    False, "--skip-bad-rows", help="Leave out (and count) rows that cannot be scored instead of failing."
)
#: ``-o`` of ``hpo predict``.
PREDICTIONS = typer.Option(
    Path("predictions.csv"), "--output", "-o", metavar="FILE", help="Predictions file: .csv, or .parquet."
)
#: ``-o`` of ``hpo evaluate``.
METRICS = typer.Option(Path("evaluation.json"), "--output", "-o", metavar="FILE", help="Metrics file (JSON).")
#: ``--split`` of ``hpo evaluate``, Ludwig's names.
SPLIT = typer.Option(
    "full",
    "--split",
    metavar="SPLIT",
    help="full (every row), training, validation or test (the model's split of these rows), or each.",
)
#: ``--port`` of ``hpo serve``.
PORT = typer.Option(5001, "--port", metavar="PORT", help="Port on 127.0.0.1.")
