"""Ludwig's string tokenizers and vocabularies (``ludwig/utils/tokenizers.py``,
``ludwig/utils/strings_utils.py``), for set, bag, sequence and timeseries cells. Pure; runs
in the driver, once per sweep."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

_SPACE = re.compile(r"\s+")
_SPACE_PUNCT = re.compile(r"\w+|[^\w\s]")
_UNDERSCORE = re.compile(r"\s*_\s*")
_COMMA = re.compile(r"\s*,\s*")


def _ngrams(text: str, n: int) -> list[str]:
    tokens = _SPACE_PUNCT.findall(text.strip())
    grams = [" ".join(tokens[i : i + k]) for k in range(2, n + 1) for i in range(len(tokens) - k + 1)]
    return tokens + grams


def tokenizer(name: str, ngram_size: int = 2) -> Callable[[str], list[str]]:
    """Ludwig's tokenizer ``name``: a cell's text -> its tokens (empty tokens dropped).

    ``space`` splits on whitespace, ``space_punct`` keeps punctuation marks as tokens,
    ``underscore`` and ``comma`` split on those characters (and the spaces around them),
    ``characters`` gives every character, ``stripped`` the whole text stripped,
    ``untokenized`` the whole text, ``ngram`` the ``space_punct`` tokens and their
    2..``ngram_size``-grams.

    Raises:
        ValueError: an unknown name (the schema allows only these).
    """
    split: dict[str, Callable[[str], list[str]]] = {
        "space": lambda t: _SPACE.split(t.strip()),
        "space_punct": lambda t: _SPACE_PUNCT.findall(t.strip()),
        "underscore": lambda t: _UNDERSCORE.split(t.strip()),
        "comma": lambda t: _COMMA.split(t.strip()),
        "characters": list,
        "stripped": lambda t: [t.strip()],
        "untokenized": lambda t: [t],
        "ngram": lambda t: _ngrams(t, ngram_size),
    }
    if name not in split:
        raise ValueError(f"no tokenizer {name!r}")
    fn = split[name]
    return lambda text: [tok for tok in fn(text) if tok != ""]


def vocabulary(token_lists: Iterable[list[str]], most_common: int | None, *, distinct: bool = False) -> list[str]:
    """The ``most_common`` tokens of ``token_lists``, most frequent first (ties: first seen
    first, as Python's ``Counter.most_common``); all of them when ``most_common`` is None.
    ``distinct``: count a token once per list (a set's rows)."""
    counts: Counter[str] = Counter()
    for tokens in token_lists:
        counts.update(set(tokens) if distinct else tokens)
    return [tok for tok, _ in counts.most_common(most_common)]
