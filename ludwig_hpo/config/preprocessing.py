"""Preprocessing sections, with Ludwig's keys, values and defaults: the top-level
``preprocessing`` (the split, sampling, class balancing) and each feature type's
``preprocessing`` (missing values, normalization, outliers, vocabularies). Typed, frozen; no I/O.

What each key does to the rows is in :mod:`ludwig_hpo.data` (statistics come from the training
split, see docs/sweep-file.md).
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field, model_validator

from ludwig_hpo.config.base import KeyedValueError, RuleError, _Base

#: Ludwig's unknown-value symbol: a category's index 0 and its default ``fill_value``.
UNKNOWN_SYMBOL = "<UNK>"

#: Ludwig's missing-value strategies every type has (``fill_with_mean`` is for numbers only,
#: ``fill_with_false`` / ``fill_with_true`` for binary features only).
CommonStrategy = Literal["fill_with_const", "fill_with_mode", "bfill", "ffill", "drop_row"]
NumberStrategy = Literal["fill_with_const", "fill_with_mode", "fill_with_mean", "bfill", "ffill", "drop_row"]
BinaryStrategy = Literal[
    "fill_with_const", "fill_with_mode", "bfill", "ffill", "drop_row", "fill_with_false", "fill_with_true"
]


class _FeaturePreprocessing(_Base):
    """A feature type's ``preprocessing`` (older spellings such as ``backfill`` are upgraded
    by :mod:`ludwig_hpo.config.upgrade` before validation)."""


class NumberPreprocessing(_FeaturePreprocessing):
    """A number input's ``preprocessing``, in this order: missing values
    (``missing_value_strategy``: ``fill_with_const`` with ``fill_value``, ``fill_with_mean`` /
    ``fill_with_mode`` of the training split, ``bfill`` / ``ffill`` from the neighbouring rows,
    ``drop_row``), then outliers (values more than ``outlier_threshold`` standard deviations from
    the training mean, handled by ``outlier_strategy``; null keeps them), then ``normalization``
    (``zscore``, ``minmax``, ``iq`` with the training split's statistics, ``log1p``, or null)."""

    missing_value_strategy: NumberStrategy = "fill_with_const"
    fill_value: float = 0.0
    #: Ludwig computes this itself from the data; a value written here has no effect, as in Ludwig.
    computed_fill_value: float | None = None
    normalization: Literal["zscore", "minmax", "log1p", "iq", "none"] | None = "zscore"
    outlier_strategy: NumberStrategy | None = None
    outlier_threshold: float = Field(default=3.0, ge=0)
    #: Ludwig computes this itself from the data; a value written here has no effect, as in Ludwig.
    computed_outlier_fill_value: float | None = None

    @property
    def normalizer(self) -> str | None:
        """The normalization applied: ``zscore``, ``minmax``, ``log1p``, ``iq`` or None
        (``none`` is this platform's older spelling of null)."""
        return None if self.normalization in (None, "none") else self.normalization


class NumberOutputPreprocessing(NumberPreprocessing):
    """A number output's ``preprocessing``: as an input's, but rows without a target are
    dropped (``drop_row``) and the target is not normalized unless asked, Ludwig's defaults."""

    missing_value_strategy: NumberStrategy = "drop_row"
    normalization: Literal["zscore", "minmax", "log1p", "iq", "none"] | None = None


class BinaryPreprocessing(_FeaturePreprocessing):
    """A binary input's ``preprocessing``: missing values become false (``fill_with_false``,
    Ludwig's default) or follow ``missing_value_strategy``; ``fill_value`` (0/1, true/false or
    a boolean word) for ``fill_with_const``. Values other than Ludwig's boolean words
    (true/false, yes/no, y/n, t/f, 1/0) read as true when they equal ``fallback_true_label``
    (default: the first of the two values in sorted order, Ludwig's choice)."""

    missing_value_strategy: BinaryStrategy = "fill_with_false"
    fill_value: Union[bool, float, str] | None = None
    computed_fill_value: Union[bool, float, str] | None = None
    fallback_true_label: str | None = None

    @model_validator(mode="after")
    def _const_needs_value(self) -> BinaryPreprocessing:
        if self.missing_value_strategy == "fill_with_const" and self.fill_value is None:
            raise RuleError(
                "missing_value_strategy fill_with_const needs fill_value",
                fix="add fill_value: true (or false), or use missing_value_strategy: fill_with_false",
            )
        return self


class BinaryOutputPreprocessing(BinaryPreprocessing):
    """A binary output's ``preprocessing``: rows without a target are dropped (``drop_row``)."""

    missing_value_strategy: BinaryStrategy = "drop_row"


class CategoryPreprocessing(_FeaturePreprocessing):
    """A category input's ``preprocessing``: missing values become ``fill_value`` (``<UNK>``,
    the unknown index 0) or follow ``missing_value_strategy``; the vocabulary holds the
    ``most_common`` most frequent training values (rarer and unseen values read as unknown);
    ``lowercase`` folds case first."""

    missing_value_strategy: CommonStrategy = "fill_with_const"
    fill_value: str = UNKNOWN_SYMBOL
    computed_fill_value: str | None = None
    lowercase: bool = False
    most_common: int | None = Field(default=10000, ge=1)


class CategoryOutputPreprocessing(CategoryPreprocessing):
    """A category output's ``preprocessing``: rows without a target are dropped (``drop_row``)."""

    missing_value_strategy: CommonStrategy = "drop_row"


class ImagePreprocessing(_Base):
    """How image cells become (channels, height, width) arrays, with Ludwig's key names.

    A row without an image (no path, or an empty one) takes, by ``missing_value_strategy``,
    the next row's image (``bfill``, Ludwig's default), the previous row's (``ffill``), the
    training split's most frequent one (``fill_with_mode``), or is dropped (``drop_row``).

    ``num_channels``: 1 (grayscale) or 3 (RGB); colour files are converted to grayscale for 1,
    grayscale files repeat their channel for 3, and an alpha channel is dropped. Unset, every
    image must have the first image's channels (1 for grayscale files and 2-D arrays, 3 for
    colour files; Ludwig would convert them to the majority's). Pixels are kept as read (8-bit
    images as uint8) and divided on each batch by the training split's maximum pixel value
    (``scale: auto``) or by a given number; ``standardize_image: imagenet1k`` then subtracts
    ImageNet's per-channel mean and divides by its standard deviation (3 channels only: as in
    Ludwig, other channel counts are left unstandardized, and ``hpo validate`` says so).
    ``height`` and ``width`` (set both or neither) resize every image, by ``resize_method``:
    ``interpolate`` (bilinear) or ``crop_or_pad`` (centred). Unset, with
    ``infer_image_dimensions`` (Ludwig's default) every image is resized to the average size of
    the first ``infer_image_sample_size`` images, at most ``infer_image_max_height`` x
    ``infer_image_max_width``; without it, every image must have the first image's size. Ludwig's ``in_memory`` and
    ``num_processes`` only say how Ludwig reads the files; here every image is read once, in the
    driver, so they change nothing.
    """

    missing_value_strategy: Literal["bfill", "ffill", "fill_with_mode", "drop_row", "fill_with_const"] = "bfill"
    fill_value: float | str | None = None
    #: Ludwig computes this itself from the data; a value written here has no effect, as in Ludwig.
    computed_fill_value: float | str | None = None
    scale: Union[Literal["auto"], float] = "auto"
    height: int | None = Field(default=None, ge=1, le=4096)
    width: int | None = Field(default=None, ge=1, le=4096)
    num_channels: int | None = None
    resize_method: Literal["interpolate", "crop_or_pad"] = "interpolate"
    in_memory: bool = True
    num_processes: int = Field(default=1, ge=1)
    standardize_image: Literal["imagenet1k"] | None = None
    infer_image_dimensions: bool = True
    infer_image_max_height: int = Field(default=256, ge=1, le=4096)
    infer_image_max_width: int = Field(default=256, ge=1, le=4096)
    infer_image_sample_size: int = Field(default=100, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _none_spelling(cls, data: Any) -> Any:
        # Ludwig's docs list the option ``None``; YAML reads it as the string "None".
        if isinstance(data, dict) and data.get("standardize_image") in ("None", "none"):
            return {**data, "standardize_image": None}
        return data

    @model_validator(mode="after")
    def _size_and_channels(self) -> ImagePreprocessing:
        if (self.height is None) != (self.width is None):
            given, other = ("height", "width") if self.height is not None else ("width", "height")
            raise RuleError(f"{given} is set but {other} is not", fix=f"set {other} too (or remove {given})")
        if self.missing_value_strategy == "fill_with_const":
            raise RuleError(
                "missing_value_strategy fill_with_const is not supported for images (there is no constant image)",
                fix="use bfill (Ludwig's default), ffill, fill_with_mode or drop_row",
            )
        if self.fill_value is not None:
            raise RuleError(
                "fill_value applies to missing_value_strategy fill_with_const, which images do not support",
                fix="remove fill_value",
            )
        if self.num_channels is not None and self.num_channels not in (1, 3):
            alpha = " (alpha channels are dropped)" if self.num_channels in (2, 4) else ""
            raise RuleError(
                f"num_channels {self.num_channels} is not supported{alpha}",
                fix="set num_channels: 3 (RGB) or 1 (grayscale), or remove it",
            )
        return self


#: Ludwig's split types that read a column of the dataset.
_COLUMN_SPLITS = ("fixed", "stratify", "datetime", "hash")


class LudwigSplitConfig(_Base):
    """Ludwig's ``preprocessing.split``: ``random`` (shuffled, then cut by ``probabilities``
    train/validation/test), ``fixed`` (``column``, default ``split``, holds 0 = train,
    1 = validation, 2 = test), ``stratify`` (random, with each value of ``column`` in the same
    proportions in every split), ``datetime`` (rows ordered by the dates of ``column``, read
    with ``datetime_format`` if given: the earliest train, the latest test) or ``hash`` (a hash
    of ``column``, a row id, picks the split: the same id always lands in the same split)."""

    type: Literal["random", "fixed", "stratify", "datetime", "hash"] = "random"
    column: str | None = None
    probabilities: tuple[float, float, float] = (0.7, 0.1, 0.2)
    datetime_format: str | None = None
    #: A datetime split's date for a row without one (else such a row is refused).
    fill_value: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _fixed_column(cls, data: Any) -> Any:
        # Ludwig's fixed split reads the column named ``split`` unless told otherwise.
        if isinstance(data, dict) and data.get("type") == "fixed" and data.get("column") is None:
            return {**data, "column": "split"}
        return data

    @model_validator(mode="after")
    def _fits(self) -> LudwigSplitConfig:
        if self.type in _COLUMN_SPLITS and not self.column:
            raise RuleError(f"split type {self.type!r} needs column", fix="add column: <the column's name>")
        if self.type == "random" and self.column:
            raise RuleError("column does not apply to a random split", fix="remove column, or use type: fixed")
        if self.type != "datetime" and (self.datetime_format is not None or self.fill_value is not None):
            key = "datetime_format" if self.datetime_format is not None else "fill_value"
            raise RuleError(f"{key} applies to a datetime split only", fix=f"remove {key}, or use type: datetime")
        if self.type == "fixed" and "probabilities" in self.model_fields_set:
            raise RuleError("probabilities do not apply to a fixed split", fix="remove probabilities")
        if abs(sum(self.probabilities) - 1) > 1e-6 or min(self.probabilities) < 0:
            raise RuleError(
                f"probabilities must be three positive fractions summing to 1, got {list(self.probabilities)}",
                fix="use e.g. [0.7, 0.1, 0.2]",
            )
        if min(self.probabilities) == 0:
            raise RuleError(
                f"probabilities {list(self.probabilities)}: an empty split is not supported yet (the search "
                "scores the validation split and the re-evaluation the test split)",
                fix="give every split a positive fraction, e.g. [0.7, 0.1, 0.2]",
            )
        return self


class GlobalPreprocessing(_Base):
    """Ludwig's top-level ``preprocessing``: ``split``; ``sample_ratio`` / ``sample_size``
    (a seeded sample of the rows, taken before the split); ``oversample_minority`` /
    ``undersample_majority`` (the training split of a binary output rebalanced so that the
    minority class is that fraction of the majority class); ``global_max_sequence_length``
    (``model_type: llm``: each row, prompt + target + EOS, is cut to it; an ecd model does not
    read it, as in Ludwig);
    ``eval_steps`` is not supported yet."""

    split: LudwigSplitConfig = LudwigSplitConfig()
    sample_ratio: float = Field(default=1.0, gt=0, le=1)
    sample_size: int | None = Field(default=None, ge=1)
    oversample_minority: float | None = Field(default=None, gt=0)
    undersample_majority: float | None = Field(default=None, gt=0, le=1)
    global_max_sequence_length: int | None = Field(default=None, ge=1)
    eval_steps: int | None = None

    @model_validator(mode="after")
    def _fits(self) -> GlobalPreprocessing:
        if self.sample_size is not None and self.sample_ratio < 1:
            raise RuleError(
                "sample_size and sample_ratio < 1 are both set", fix="keep only one of them (Ludwig's rule)"
            )
        if self.oversample_minority is not None and self.undersample_majority is not None:
            raise RuleError("oversample_minority and undersample_majority are both set", fix="keep only one of them")
        if self.eval_steps is not None:
            raise RuleError(
                "eval_steps is not supported yet (every evaluation reads the whole split)", fix="remove eval_steps"
            )
        return self


def check_balancing(prep: GlobalPreprocessing | None, output_types: list[str]) -> None:
    """Ludwig's rule for ``oversample_minority`` / ``undersample_majority``: one output
    feature, a binary one (the minority and majority classes are its two values).

    Args:
        prep: the top-level ``preprocessing`` (None: nothing to check).
        output_types: the output features' types, in file order.

    Raises:
        KeyedValueError: at the key set, naming the outputs.
    """
    if prep is None:
        return
    key = "oversample_minority" if prep.oversample_minority is not None else "undersample_majority"
    if getattr(prep, key) is None:
        return
    if output_types != ["binary"]:
        raise KeyedValueError(
            f"{key} balances one binary output feature, but the outputs are {output_types}",
            ("preprocessing", key),
            fix=f"remove preprocessing.{key} (class balancing of other outputs is not supported yet, as in Ludwig)",
        )
