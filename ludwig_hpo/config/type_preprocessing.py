"""The ``preprocessing`` sections of set, bag, sequence, timeseries, vector, date and h3
features, with Ludwig's keys and defaults. Typed, frozen; no I/O.

Missing values follow Ludwig's default strategy for every one of these types,
``fill_with_const`` with the type's ``fill_value``; ``fill_with_mode`` (the training split's
most frequent value), ``bfill`` / ``ffill`` (the next / previous row's value) and ``drop_row``
are accepted too (``fill_with_mean``, ``fill_with_false`` / ``fill_with_true`` are for numbers
and binaries).
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import Field, field_validator

from ludwig_hpo.config.base import RuleError, _Base

#: Ludwig's tokenizers this platform implements (see :mod:`ludwig_hpo.data.tokenize`).
TOKENIZERS = ("space", "space_punct", "underscore", "comma", "characters", "stripped", "untokenized", "ngram")

#: Ludwig's special symbols.
UNKNOWN_SYMBOL = "<UNK>"
PADDING_SYMBOL = "<PAD>"
START_SYMBOL = "<SOS>"
STOP_SYMBOL = "<EOS>"

#: Ludwig's fill value of a missing h3 cell (a resolution-0 cell, the ``base cell 0`` hexagon).
H3_FILL_VALUE = 576495936675512319


def _tokenizer(value: Any) -> Any:
    if isinstance(value, str) and value not in TOKENIZERS:
        raise RuleError(f"tokenizer {value!r} is not supported yet", fix=f"use one of: {', '.join(TOKENIZERS)}")
    return value


Strategy = Literal["fill_with_const", "fill_with_mode", "bfill", "ffill", "drop_row"]


def _strategy(value: Any) -> Any:
    if isinstance(value, str) and value not in typing.get_args(Strategy):
        raise RuleError(
            f"missing_value_strategy {value!r} is not supported yet for this feature type",
            fix="use fill_with_const (Ludwig's default, with fill_value), fill_with_mode, bfill, ffill or drop_row",
        )
    return value


class _Missing(_Base):
    missing_value_strategy: Strategy = "fill_with_const"
    _s = field_validator("missing_value_strategy", mode="before")(_strategy)


class _Tokens(_Missing):
    tokenizer: str = "space"
    lowercase: bool = False
    fill_value: str = UNKNOWN_SYMBOL
    ngram_size: int = Field(default=2, ge=1)
    _t = field_validator("tokenizer", mode="before")(_tokenizer)


class SetPreprocessing(_Tokens):
    """A cell is a string of tokens (``tokenizer``), read as the set of distinct tokens; the
    vocabulary is the ``most_common`` tokens of the training split (all of them when null)."""

    most_common: int | None = Field(default=10000, ge=1)


class BagPreprocessing(SetPreprocessing):
    """A cell is a string of tokens (``tokenizer``), read as each token's count."""


class SequencePreprocessing(_Tokens):
    """A cell is a string of tokens (``tokenizer``), read in order as ids of the ``most_common``
    training tokens between ``<SOS>`` and ``<EOS>`` (Ludwig's), cut or padded (``padding``: right
    or left) to the longest training sequence with both, at most ``max_sequence_length``
    (``sequence_length``: exactly that length)."""

    max_sequence_length: int = Field(default=256, ge=1)
    sequence_length: int | None = Field(default=None, ge=1)
    most_common: int = Field(default=20000, ge=1)
    padding_symbol: str = PADDING_SYMBOL
    unknown_symbol: str = UNKNOWN_SYMBOL
    padding: Literal["right", "left"] = "right"
    vocab_file: str | None = None
    cache_encoder_embeddings: bool = False

    @field_validator("vocab_file")
    @classmethod
    def _no_vocab_file(cls, v: str | None) -> str | None:
        if v is not None:
            raise RuleError(
                "vocab_file is not supported yet (the vocabulary is built from the training split)",
                fix="remove vocab_file",
            )
        return v


class TimeseriesPreprocessing(_Missing):
    """A cell is a string of numbers (``tokenizer``) or a list, cut or padded with
    ``padding_value`` (``padding``: right or left) to the longest training series, at most
    ``timeseries_length_limit``; a missing number inside a series is ``padding_value`` too."""

    tokenizer: str = "space"
    timeseries_length_limit: int = Field(default=256, ge=1)
    padding_value: float = 0.0
    padding: Literal["right", "left"] = "right"
    fill_value: str = ""
    _t = field_validator("tokenizer", mode="before")(_tokenizer)


class VectorPreprocessing(_Missing):
    """A cell is a string of space-separated numbers or a list; every row has the same length
    (``vector_size``, or the first training row's)."""

    vector_size: int | None = Field(default=None, ge=1)
    fill_value: str = ""


class DatePreprocessing(_Missing):
    """A cell is a date string (``datetime_format``, strptime's codes, or any form
    ``dateutil`` reads when null) or a Unix timestamp; missing dates take ``fill_value``
    (empty: the time preprocessing runs, as Ludwig does)."""

    datetime_format: str | None = None
    fill_value: str = ""


class H3Preprocessing(_Missing):
    """A cell is an h3 index as a 64-bit integer (or its hexadecimal string)."""

    fill_value: int = H3_FILL_VALUE
