"""Number features, Ludwig's order: missing values, then outliers, then normalization, every
statistic from the training split. Runs in the driver, once per sweep.

Statistics (``mean``, ``std`` with pandas' ``ddof=1``, ``min``, ``max``, quartiles ``q1`` /
``q2`` / ``q3``) are computed on the training values after missing values are filled and
before outliers are replaced, as Ludwig computes its metadata; the same mean and standard
deviation find the outliers and z-score the column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ludwig_hpo.config.preprocessing import NumberPreprocessing
from ludwig_hpo.data.missing import FilledValues, fill_missing, how_of, training_mode
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.errors import DataError

FLOAT32_MAX = float(np.finfo(np.float32).max)  # numbers are fed to the model as float32


def _rows(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask)


def parse_numbers(s: pd.Series, key: str, origin: DataOrigin) -> np.ndarray:
    """The column as (N,) float64, NaN where a value is missing.

    Raises:
        DataError: text that is not a number, an infinite value, a value beyond float32.
    """
    x = pd.to_numeric(s, errors="coerce").to_numpy(np.float64)
    bad = np.isnan(x) & s.notna().to_numpy()
    col = f"column {s.name!r}"
    if bad.any():
        rows = _rows(bad)
        raise DataError(
            f"{col}: {len(rows)} values are not numbers (e.g. {s.iloc[rows[0]]!r}; {origin.rows(rows)})",
            source=origin.source,
            key=key,
            fix="clean the column or use type: category",
        )
    infinite = np.isinf(x)
    if infinite.any():
        raise DataError(
            f"{col} holds infinite values ({origin.rows(_rows(infinite))})",
            source=origin.source,
            key=key,
            fix="clean the column",
        )
    present = x[~np.isnan(x)]
    peak = float(np.abs(present).max()) if len(present) else 0.0
    if peak > FLOAT32_MAX:
        huge = _rows(np.abs(np.nan_to_num(x)) > FLOAT32_MAX)
        raise DataError(
            f"{col}: values up to {peak:.3g} do not fit float32 (largest {FLOAT32_MAX:.3g}; {origin.rows(huge)})",
            source=origin.source,
            key=key,
            fix="rescale the column (e.g. take its log) before the sweep",
        )
    return x


def fill_value_of(strategy: str, prep: NumberPreprocessing, raw: np.ndarray, train: np.ndarray) -> float | None:
    """The value ``strategy`` fills in: ``fill_value``, or the mean / mode of the training
    split's present raw values (Ludwig computes them before filling); None for ``bfill`` /
    ``ffill`` / ``drop_row``."""
    tr = pd.Series(raw[train])
    if strategy == "fill_with_const":
        return float(prep.fill_value)
    if strategy == "fill_with_mean":
        return float(tr.mean())
    if strategy == "fill_with_mode":
        mode = training_mode(tr, np.arange(len(tr)))
        return None if mode is None else float(mode)
    return None


def statistics(x: np.ndarray) -> dict[str, float]:
    """``mean``, ``std`` (``ddof=1``, pandas' and Ludwig's), ``min``, ``max``, ``q1``, ``q2``,
    ``q3`` of (n,) present values. Pure."""
    s = pd.Series(x)
    std = float(s.std()) if len(s) > 1 else 0.0
    q1, q2, q3 = (float(np.percentile(x, q)) for q in (25, 50, 75))
    return {
        "mean": float(s.mean()),
        "std": std,
        "min": float(s.min()),
        "max": float(s.max()),
        "q1": q1,
        "q2": q2,
        "q3": q3,
    }


def outlier_mask(x: np.ndarray, stats: dict[str, float], threshold: float) -> np.ndarray:
    """(N,) True where ``|x - mean| / std > threshold`` (none when ``std`` is 0). Pure."""
    if not stats["std"]:
        return np.zeros(len(x), dtype=bool)
    return np.abs(x - stats["mean"]) / stats["std"] > threshold


def normalize(
    x: np.ndarray, how: str | None, stats: dict[str, float], key: str, column: str, origin: DataOrigin
) -> np.ndarray:
    """``x`` normalized: ``zscore`` (x - mean) / std, ``minmax`` (x - min) / (max - min),
    ``iq`` (x - q2) / (q3 - q1), ``log1p`` log(1 + x), or unchanged (None). A constant
    training column (a zero spread) is only centred.

    Raises:
        DataError: ``log1p`` of a value <= 0 (Ludwig's rule).
    """
    if how == "zscore":
        return (x - stats["mean"]) / (stats["std"] or 1.0)
    if how == "minmax":
        return (x - stats["min"]) / ((stats["max"] - stats["min"]) or 1.0)
    if how == "iq":
        return (x - stats["q2"]) / ((stats["q3"] - stats["q1"]) or 1.0)
    if how == "log1p":
        bad = x <= 0
        if bad.any():
            raise DataError(
                f"column {column!r}: log1p normalization needs positive values, but {int(bad.sum())} are <= 0 "
                f"({origin.rows(_rows(bad))})",
                source=origin.source,
                key=f"{key}.preprocessing.normalization",
                fix="use normalization: zscore, minmax, iq or null",
            )
        return np.log1p(x)
    return x


def denormalize(x: np.ndarray, how: str | None, stats: dict[str, float]) -> np.ndarray:
    """The inverse of :func:`normalize` (a prediction of a normalized number target in the
    column's units), with the same guard for a zero spread. Pure."""
    if how == "zscore":
        return x * (stats["std"] or 1.0) + stats["mean"]
    if how == "minmax":
        return x * ((stats["max"] - stats["min"]) or 1.0) + stats["min"]
    if how == "iq":
        return x * ((stats["q3"] - stats["q1"]) or 1.0) + stats["q2"]
    if how == "log1p":
        return np.expm1(x)
    return x


@dataclass
class PreparedNumber:
    """One number column, prepared: ``values`` (N,) float32, ``stats`` (see the module's
    docstring), ``filled``: what was done to missing values and outliers."""

    values: np.ndarray
    stats: dict[str, float]
    filled: list[FilledValues] = field(default_factory=list)
    fitted: FittedNumber | None = None


def fit_number(
    s: pd.Series, prep: NumberPreprocessing, key: str, train: np.ndarray, origin: DataOrigin
) -> FittedNumber:
    """The statistics of a number column's ``train`` rows that :func:`apply_number` applies
    (the ``fit`` half of :func:`prepare_number`; same args). Pure.

    ``bfill`` / ``ffill`` fill the training rows from their neighbours in the whole column
    before the statistics are taken, as Ludwig does.

    Raises:
        DataError: see :func:`parse_numbers`; every training value missing.
    """
    raw = parse_numbers(s, key, origin)
    if np.isnan(raw[train]).all():
        raise DataError(
            f"column {s.name!r}: every training value is missing",
            source=origin.source,
            key=key,
            fix="drop this feature",
        )
    strategy = prep.missing_value_strategy
    fill = fill_value_of(strategy, prep, raw, train) if strategy != "drop_row" else None
    values = raw
    if np.isnan(raw).any() and strategy != "drop_row":
        values = fill_missing(pd.Series(raw), strategy, fill).to_numpy(np.float64)
    tr = values[train]
    stats = statistics(tr[~np.isnan(tr)])
    outlier_fill, last_kept = None, None
    if prep.outlier_strategy is not None and prep.outlier_strategy != "drop_row":
        outlier_fill = fill_value_of(prep.outlier_strategy, prep, raw, train)
        kept = tr[~np.isnan(tr) & ~outlier_mask(np.nan_to_num(tr), stats, prep.outlier_threshold)]
        last_kept = float(kept[-1]) if len(kept) else None
    present = raw[train][~np.isnan(raw[train])]
    return FittedNumber(stats, fill, outlier_fill, float(present[-1]), last_kept)


@dataclass(frozen=True)
class FittedNumber:
    """What a number column keeps of its training rows (JSON-serialisable, saved as
    :attr:`~ludwig_hpo.data.preprocess.FeatureMeta.stats` and ``fitted``).

    Attributes:
        stats: see the module docstring.
        fill: the value missing cells take (constant, training mean or mode), None for
            ``bfill`` / ``ffill`` / ``drop_row``.
        outlier_fill: the value outliers take, likewise.
        last: the training split's last present raw value, which new rows prepared alone
            (a served model's) take for ``bfill`` / ``ffill`` when none of them has a
            neighbouring value (as if the training rows came first).
        last_kept: the last training value that is not an outlier, likewise for outliers.
    """

    stats: dict[str, float]
    fill: float | None
    outlier_fill: float | None
    last: float
    last_kept: float | None = None

    def record(self) -> dict[str, float | None]:
        """The JSON record (``FeatureMeta.fitted``) :meth:`of_record` reads back."""
        return {"fill": self.fill, "outlier_fill": self.outlier_fill, "last": self.last, "last_kept": self.last_kept}

    @classmethod
    def of_record(cls, stats: dict[str, float], record: dict[str, float | None]) -> FittedNumber:
        """The fitted column saved as ``stats`` and :meth:`record`."""
        last = record["last"]
        assert last is not None
        return cls(dict(stats), record["fill"], record["outlier_fill"], float(last), record.get("last_kept"))


def _fill_alone(values: np.ndarray, strategy: str, value: float | None, before: float | None) -> np.ndarray:
    """``values`` (NaN where missing) filled; ``before``: a value placed before them for
    ``bfill`` / ``ffill`` (None: the column is complete, its own neighbours suffice)."""
    if strategy in ("bfill", "ffill") and before is not None:
        filled = fill_missing(pd.Series(np.concatenate([[before], values])), strategy, value)
        return filled.to_numpy(np.float64)[1:]
    return fill_missing(pd.Series(values), strategy, value).to_numpy(np.float64)


def apply_number(
    s: pd.Series,
    prep: NumberPreprocessing,
    fitted: FittedNumber,
    name: str,
    key: str,
    origin: DataOrigin,
    *,
    alone: bool = False,
) -> PreparedNumber:
    """``s`` prepared with ``fitted`` statistics (missing values, outliers, normalization):
    the ``apply`` half of :func:`prepare_number`. ``alone``: ``s`` holds new rows only (a
    served model's), so ``bfill`` / ``ffill`` start from ``fitted.last``. Pure; its cost
    does not depend on the training split's size.

    Raises:
        DataError: see :func:`parse_numbers`; ``log1p`` of a value <= 0.
    """
    raw = parse_numbers(s, key, origin)
    out = PreparedNumber(raw.copy(), dict(fitted.stats))
    missing = np.isnan(raw)
    strategy = prep.missing_value_strategy
    if missing.any() and strategy != "drop_row":
        out.values = _fill_alone(raw, strategy, fitted.fill, fitted.last if alone else None)
        out.filled.append(FilledValues(name, str(s.name), int(missing.sum()), how_of(strategy), fitted.fill))
    if prep.outlier_strategy is not None and prep.outlier_strategy != "drop_row":
        outliers = outlier_mask(out.values, out.stats, prep.outlier_threshold)
        if outliers.any():
            masked = np.where(outliers, np.nan, out.values)
            before = fitted.last_kept if alone else None
            out.values = _fill_alone(masked, prep.outlier_strategy, fitted.outlier_fill, before)
            out.filled.append(
                FilledValues(
                    name,
                    str(s.name),
                    int(outliers.sum()),
                    how_of(prep.outlier_strategy),
                    fitted.outlier_fill,
                    "outlier",
                )
            )
    out.values = normalize(out.values, prep.normalizer, out.stats, key, str(s.name), origin).astype(np.float32)
    return out


def prepare_number(
    s: pd.Series, prep: NumberPreprocessing, name: str, key: str, train: np.ndarray, origin: DataOrigin
) -> PreparedNumber:
    """A number column as the model sees it (missing values, outliers, normalization):
    :func:`fit_number` on the ``train`` rows, then :func:`apply_number` to every row.

    Args:
        s: the column (every row; rows a ``drop_row`` strategy drops are gone already).
        prep: the feature's preprocessing (input or output).
        name: the feature's name; key: its config key, named in errors.
        train: the training rows (positions in ``s``).
        origin: the dataset file, named in errors.

    Raises:
        DataError: see :func:`parse_numbers`; every training value missing; ``log1p`` of a
            value <= 0.
    """
    fitted = fit_number(s, prep, key, train, origin)
    out = apply_number(s, prep, fitted, name, key, origin)
    out.fitted = fitted
    return out


def outlier_rows(
    s: pd.Series, prep: NumberPreprocessing, key: str, train: np.ndarray, origin: DataOrigin
) -> np.ndarray:
    """(N,) True for the rows ``outlier_strategy: drop_row`` drops: values beyond
    ``outlier_threshold`` standard deviations of the training mean (after missing values are
    filled, as :func:`prepare_number` fills them)."""
    raw = parse_numbers(s, key, origin)
    x = raw
    strategy = prep.missing_value_strategy
    if np.isnan(raw).any() and strategy != "drop_row":
        x = fill_missing(pd.Series(raw), strategy, fill_value_of(strategy, prep, raw, train)).to_numpy(np.float64)
    present = x[train][~np.isnan(x[train])]
    if len(present) == 0:
        return np.zeros(len(x), dtype=bool)
    return outlier_mask(np.nan_to_num(x, nan=float(np.mean(present))), statistics(present), prep.outlier_threshold)
