"""The longest rows of a trial's token inputs (sequence and text features), which every
batch-size probe batch includes: a batch is then as long as any training batch can be, so the
size chosen cannot run out of memory later on a batch of long rows (Ludwig probes a synthetic
batch at the maximum sequence length for the same reason).

Token inputs are prepared as (rows, L) ids padded to one width L, the longest row's length (or
``max_sequence_length``): an encoder that trims each batch to its longest row sees width L only
when a row of that length is in the batch. Images are prepared at one (H, W), so every batch is
already as large as any. Pure numpy; runs on every rank with the same result.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ludwig_hpo.data.preprocess import FeatureMeta

#: Feature types whose inputs are padded token ids.
TOKEN_TYPES = frozenset({"sequence", "text"})
#: Padding symbols a vocabulary may hold (Ludwig's, Hugging Face's).
PADDING_SYMBOLS = ("<PAD>", "[PAD]", "<pad>")


def padding_id(meta: FeatureMeta) -> int:
    """The id that pads ``meta``'s rows: ``stats["padding_id"]`` when the preparation recorded
    one (a Hugging Face tokenizer's), else the vocabulary's padding symbol, else 0 (Ludwig's)."""
    if "padding_id" in meta.stats:
        return int(meta.stats["padding_id"])
    for symbol in PADDING_SYMBOLS:
        if symbol in meta.vocab:
            return meta.vocab.index(symbol)
    return 0


def longest_rows(inputs: Mapping[str, np.ndarray], meta: Mapping[str, FeatureMeta], rows: np.ndarray) -> np.ndarray:
    """For each token input (in ``inputs`` order), the first of ``rows`` with the most
    non-padding ids; each row once. Empty without token inputs or rows.

    Args:
        inputs: prepared arrays by feature (see :class:`~ludwig_hpo.data.PreparedData`).
        meta: their :class:`FeatureMeta` (the feature type and vocabulary).
        rows: candidate row indices (a split's), int.
    """
    found: list[int] = []
    if len(rows) == 0:
        return np.asarray(found, dtype=np.int64)
    for name, values in inputs.items():
        m = meta.get(name)
        if m is None or m.type not in TOKEN_TYPES or values.ndim != 2:
            continue
        lengths = (values[rows] != padding_id(m)).sum(axis=1)
        row = int(rows[int(np.argmax(lengths))])
        if row not in found:
            found.append(row)
    return np.asarray(found, dtype=np.int64)
