"""Raw rows (a DataFrame with the dataset's columns) prepared for a trained model, with the
preprocessing the sweep fitted, through the very functions the sweep ran.

Number, binary and category features (:data:`~ludwig_hpo.data.preprocess.FITTED_TYPES`) are
prepared by :func:`~ludwig_hpo.data.preprocess.apply_input` /
:func:`~ludwig_hpo.data.preprocess.apply_target` with the statistics the sweep fitted on its
training split (their :class:`FeatureMeta`: fill values, normalization statistics,
vocabularies, binary labels), the apply half of the sweep's own preparation: a row gets the
values the sweep gave it, and its cost does not depend on the training split's size.
``bfill`` / ``ffill`` take neighbours among the rows prepared together; a row with none
after (before) it takes the training split's last value, as if the training rows came first.
Image pixels need no fitted statistic here (their scale is part of the model,
:mod:`ludwig_hpo.model.image_input`); images are read at the size the model was trained on.

The other types (text, set, bag, sequence, timeseries, vector, date, h3) still refit: the
model keeps the training split's raw cells of those features only (``reference``,
:func:`reference_rows`) and prepares new rows by passing those cells first, as the training
rows, then the new ones, through :func:`~ludwig_hpo.data.preprocess.prepare_input` /
:func:`~ludwig_hpo.data.preprocess.prepare_target`.

A text input whose training cells the model does not keep (a streamed sweep's model:
``reference_rows(..., text_from_record=True)``) is prepared from its fitted record alone, its
vocabulary, width and padding id, by :func:`~ludwig_hpo.data.streaming.text.apply_text`, the
function a streamed split's batches are prepared with: the ids the refit gives the same rows,
since a text input's fill is a constant there (a streamed sweep refuses ``fill_with_mode``,
``bfill`` and ``ffill`` text) and its width and vocabulary are the training rows'.

A row that cannot be prepared (a missing value a ``drop_row`` feature needs, text in a
number column, an unreadable image path, a label the model never saw) is a :class:`BadRow`
with a one-line reason; the other rows are prepared without it. Runs in whatever process
serves the model (the CLI, MLflow's scoring server); no Ray, no sweep folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import (
    FITTED_TYPES,
    FeatureMeta,
    PreparedData,
    apply_input,
    apply_target,
    prepare_input,
    prepare_target,
)
from ludwig_hpo.data.rows import preprocessing_of
from ludwig_hpo.data.streaming.text import apply_text
from ludwig_hpo.errors import DataError

#: The config sections of inputs and targets, as keys and errors name them.
INPUTS, OUTPUTS = "input_features", "output_features"


@dataclass(frozen=True)
class BadRow:
    """A row that cannot be prepared: ``row`` its 0-based position in the DataFrame given,
    ``where`` the row as its file counts it (``line 7``, ``data row 3``), ``reason`` one line."""

    row: int
    where: str
    reason: str


@dataclass(frozen=True)
class RawRows:
    """Rows prepared for the model: ``data`` (its ``inputs``, ``targets`` when asked for, the
    split ``"rows"`` over every prepared row, the model's ``meta``), ``kept`` (each prepared
    row's position in the DataFrame given, ascending) and the ``bad`` rows left out."""

    data: PreparedData
    kept: np.ndarray
    bad: tuple[BadRow, ...]


class BadRowsError(DataError):
    """Rows that cannot be prepared, one line each (``hpo predict`` / ``hpo evaluate`` exit 2
    on it unless ``--skip-bad-rows``; the scoring server answers it as a bad request).

    Args:
        bad: the rows, in order.
        source: the dataset file, when known.
    """

    def __init__(self, bad: tuple[BadRow, ...], source: str | None = None) -> None:
        self.bad = bad
        head = f"{len(bad)} row{'s' if len(bad) != 1 else ''} cannot be scored"
        super().__init__(head, source=source, fix="fix or remove them, or pass --skip-bad-rows to leave them out")

    def lines(self) -> list[str]:
        """One line per bad row: ``<where>: <reason>``."""
        return [f"{b.where}: {b.reason}" for b in self.bad]

    def __reduce__(self):
        return (type(self), (self.bad, self.source))


def columns_needed(cfg: SweepConfig, *, targets: bool) -> list[tuple[str, Any]]:
    """``(section, feature)`` of every feature whose column the rows must hold: the inputs,
    and the outputs when ``targets`` (to score them)."""
    feats = [(INPUTS, f) for f in cfg.input_features]
    return feats + ([(OUTPUTS, f) for f in cfg.output_features] if targets else [])


def check_columns(df: pd.DataFrame, cfg: SweepConfig, *, targets: bool, source: str | None) -> None:
    """Refuse rows without a column the model reads, before any row is prepared.

    Raises:
        DataError: one line naming the first missing column, its feature's key and the fix.
    """
    for section, feat in columns_needed(cfg, targets=targets):
        if feat.source_column not in df.columns:
            what = "scores" if section == OUTPUTS else "reads"
            raise DataError(
                f"column {feat.source_column!r} is not in the rows (the model {what} it; they have "
                f"{len(df.columns)} columns)",
                source=source,
                key=f"{section}[{feat.name}]",
                fix=f"add the column {feat.source_column!r}",
            )


class RowPreparer:
    """Prepares raw rows with a fitted model's preprocessing (see the module docstring).

    Args:
        cfg: the model's resolved config (its features and their ``preprocessing``).
        meta: the model's :class:`FeatureMeta` per feature (``preprocessing.json``).
        reference: the training split's raw cells of the features that refit, one column
            per ``source_column`` (:func:`reference_rows`; no column when none does).
    """

    def __init__(self, cfg: SweepConfig, meta: dict[str, FeatureMeta], reference: pd.DataFrame) -> None:
        self.cfg, self.meta, self.reference = cfg, meta, reference

    def prepare(
        self, df: pd.DataFrame, *, targets: bool = False, data_dir: Path | None = None, skip_bad_rows: bool = False
    ) -> RawRows:
        """``df``'s rows prepared for the model (its inputs, and its targets when ``targets``).

        Args:
            df: raw rows with the dataset's columns (a :func:`~ludwig_hpo.data.load_dataframe`
                frame names its file in errors); image cells are paths (relative to
                ``data_dir``, else the current folder) or arrays.
            skip_bad_rows: leave bad rows out (``RawRows.bad`` lists them) instead of raising.

        Raises:
            DataError: a column the model needs is missing; no rows.
            BadRowsError: some rows cannot be prepared (without ``skip_bad_rows``), or none can.
        """
        origin = DataOrigin.of(df)
        check_columns(df, self.cfg, targets=targets, source=origin.source)
        if len(df) == 0:
            raise DataError("there are no rows to score", source=origin.source, fix="pass at least one row")
        df = df.reset_index(drop=True)
        feats = columns_needed(self.cfg, targets=targets)
        reasons: dict[int, str] = {}
        for section, feat in feats:
            for row, why in self._missing_drops(df, section, feat, origin).items():
                reasons.setdefault(row, why)
        keep = np.array([i for i in range(len(df)) if i not in reasons], dtype=np.int64)
        arrays = self._prepare_all(df, keep, feats, data_dir, origin)
        if arrays is None:  # a feature refused some rows: find them one by one
            for section, feat in feats:
                for row, why in self._refused_rows(df, keep, section, feat, data_dir, origin).items():
                    reasons.setdefault(row, why)
            keep = np.array([i for i in range(len(df)) if i not in reasons], dtype=np.int64)
        bad = tuple(BadRow(r, origin.rows(r), reasons[r]) for r in sorted(reasons))
        if (bad and not skip_bad_rows) or len(keep) == 0:
            raise BadRowsError(bad, origin.source)
        if arrays is None:  # the rows left prepare in parts; together too, else that error (a third binary label)
            arrays = self._prepare_all(df, keep, feats, data_dir, origin, catch=False)
        assert arrays is not None  # catch=False returns arrays or raises
        inputs, target_arrays = arrays
        data = PreparedData(
            inputs=inputs,
            targets=target_arrays,
            splits={"rows": np.arange(len(keep))},
            folds=(),
            meta=self.meta,
        )
        return RawRows(data, keep, bad)

    # ------------------------------------------------------------------ one feature
    def _missing_drops(self, df: pd.DataFrame, section: str, feat: Any, origin: DataOrigin) -> dict[int, str]:
        """Rows whose cell is missing where the feature's ``missing_value_strategy`` is
        ``drop_row`` (the sweep dropped such rows before preparing; a target's default)."""
        prep = preprocessing_of(feat, section)
        if getattr(prep, "missing_value_strategy", None) != "drop_row":
            return {}
        col = feat.source_column
        missing = np.flatnonzero(df[col].isna().to_numpy())
        why = (
            f"column {col!r} has no value, and {section}[{feat.name}] drops such rows "
            "(missing_value_strategy: drop_row)"
        )
        return {int(r): why for r in missing}

    def _prepare_all(
        self,
        df: pd.DataFrame,
        keep: np.ndarray,
        feats: list[tuple[str, Any]],
        data_dir: Path | None,
        origin: DataOrigin,
        catch: bool = True,
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None:
        """Every feature of the ``keep`` rows; None when a feature refuses one of them (with
        ``catch``; else its DataError)."""
        inputs: dict[str, np.ndarray] = {}
        targets: dict[str, np.ndarray] = {}
        for section, feat in feats:
            try:
                x = self._feature(df, keep, section, feat, data_dir, origin)
            except DataError:
                if not catch:
                    raise
                return None
            (inputs if section == INPUTS else targets)[feat.name] = x
        return inputs, targets

    def _refused_rows(
        self, df: pd.DataFrame, keep: np.ndarray, section: str, feat: Any, data_dir: Path | None, origin: DataOrigin
    ) -> dict[int, str]:
        """The ``keep`` rows the feature refuses, each with the line of the error it raises
        alone: halves that prepare are cleared at once, so k bad rows among n cost about
        k log n preparations, not n."""
        out: dict[int, str] = {}

        def search(rows: np.ndarray) -> None:
            try:
                self._feature(df, rows, section, feat, data_dir, origin)
                return
            except DataError as e:
                if len(rows) == 1:
                    # the file the error is about when it is not the rows' own (an image file)
                    about = f"{e.source}: " if e.source and e.source != origin.source else ""
                    out[int(rows[0])] = about + " ".join(e.message.split()) + (f"; fix: {e.fix}" if e.fix else "")
                    return
            half = len(rows) // 2
            search(rows[:half])
            search(rows[half:])

        if len(keep):
            search(keep)
        return out

    def _feature(
        self, df: pd.DataFrame, rows: np.ndarray, section: str, feat: Any, data_dir: Path | None, origin: DataOrigin
    ) -> np.ndarray:
        """One feature's prepared array of ``df``'s ``rows``: the fitted statistics applied to
        them (a number, binary, category; a text input without reference cells), an image's
        cells read alone, or the reference cells first as the training rows, then these rows.
        Raises DataError as the sweep's preparation does."""
        col = feat.source_column
        key = f"{section}[{feat.name}]"
        new = df[col].iloc[rows].reset_index(drop=True)
        positions = rows if origin.kept is None else origin.kept[rows]
        if feat.type == "image":
            at = DataOrigin(origin.source, origin.separator, np.asarray(positions))
            x, _, _ = prepare_input(self._fitted_image(feat), new, key, np.arange(len(new)), data_dir, at)
            return x
        if feat.type in FITTED_TYPES and self.meta[feat.name].fitted:  # else saved before fits were recorded
            at = DataOrigin(origin.source, origin.separator, np.asarray(positions))
            apply = apply_input if section == INPUTS else apply_target
            x, _ = apply(feat, new, self.meta[feat.name], key, at, alone=True)
            return x
        if feat.type == "text" and section == INPUTS and col not in self.reference.columns:
            at = DataOrigin(origin.source, origin.separator, np.asarray(positions))
            return apply_text(feat, new, self.meta[feat.name], key, at)
        ref = self.reference[col]
        cells = pd.concat([ref, new], ignore_index=True).rename(new.name)
        at = DataOrigin(origin.source, origin.separator, np.concatenate([np.zeros(len(ref), np.int64), positions]))
        train = np.arange(len(ref))
        if section == INPUTS:
            x, _, _ = prepare_input(feat, cells, key, train, data_dir, at)
        else:
            classes = self.meta[feat.name].vocab if feat.type == "category" else None
            x, _, _ = prepare_target(feat, cells, key, train, at, classes=classes)  # set, vector
        return x[len(ref) :]

    def binary_labels(self) -> dict[str, tuple[str, str]]:
        """Per binary output whose training column holds text labels, ``(false label, true
        label)`` as the sweep read them (:func:`~ludwig_hpo.data.preprocess.apply_target` on
        the column's two fitted labels), as Ludwig's ``bool2str``; numbers and booleans read
        as ``False`` / ``True`` and have none."""
        out: dict[str, tuple[str, str]] = {}
        for feat in self.cfg.output_features:
            meta = self.meta.get(feat.name)
            if feat.type != "binary" or meta is None or len(meta.fitted.get("labels", ())) != 2:
                continue
            labels = pd.Series(list(meta.fitted["labels"]), name=feat.source_column)
            values, _ = apply_target(feat, labels, meta, f"output_features[{feat.name}]", DataOrigin())
            if sorted(values.tolist()) == [0.0, 1.0]:
                out[feat.name] = (str(labels[values == 0].iloc[0]), str(labels[values == 1].iloc[0]))
        return out

    def _fitted_image(self, feat: Any) -> Any:
        """The image feature read at the size and channels the model was trained on (its
        ``FeatureMeta.shape``, (C, H, W)): sizes the sweep inferred from its own images
        (``infer_image_dimensions``) are not inferred again from new ones."""
        shape = self.meta[feat.name].shape
        if len(shape) != 3:
            return feat
        c, h, w = (int(v) for v in shape)
        prep = feat.preprocessing.model_copy(update={"num_channels": c, "height": h, "width": w})
        return feat.model_copy(update={"preprocessing": prep})


def reference_rows(train_rows: pd.DataFrame, cfg: SweepConfig, *, text_from_record: bool = False) -> pd.DataFrame:
    """The raw cells a :class:`RowPreparer` refits on: the training split's rows
    (:func:`~ludwig_hpo.data.preprocess.kept_rows`), one column per ``source_column`` of a
    feature that refits (inputs and outputs not in ``FITTED_TYPES``, not images), in the
    split's order; no rows when no feature refits (the model holds no training cells).
    ``text_from_record``: text inputs are prepared from their fitted record and keep no cell
    (a streamed sweep's model, whose text fill is a constant). Pure."""
    feats = columns_needed(cfg, targets=True)
    applied = FITTED_TYPES | {"image"}

    def refits(section: str, feat: Any) -> bool:
        return feat.type not in applied and not (text_from_record and feat.type == "text" and section == INPUTS)

    cols = list(dict.fromkeys(f.source_column for section, f in feats if refits(section, f)))
    if not cols:
        return train_rows[cols].iloc[:0].reset_index(drop=True)
    return train_rows[cols].reset_index(drop=True)
