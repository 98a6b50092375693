"""Make sweeps/data/wordnet_definitions.csv: WordNet lemma -> gloss pairs for generation
(``sweeps/llm_lora.yaml``), derived from sweeps/data/wordnet_glosses.csv.

Keeps the rows with a lemma, one row per lemma (the first), glosses of ``MIN_WORDS`` to
``MAX_WORDS`` words (a short answer a small model can learn to write on a CPU), and draws
``ROWS`` of them with a fixed seed, so the file is the same on every run. Columns: ``lemma``,
``pos`` (WordNet's part of speech; every row is a noun), ``gloss`` (the target), ``label``
(the lexicographer file, kept for reading the outputs). WordNet's licence
(sweeps/data/WORDNET-LICENSE) allows redistribution with its notice.

    python sweeps/data/make_wordnet_definitions.py [--source FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROWS = 600
MIN_WORDS, MAX_WORDS = 3, 12
SEED = 27


def derive(glosses: pd.DataFrame) -> pd.DataFrame:
    """The generation rows of a ``wordnet_glosses.csv`` frame (see the module docstring)."""
    rows = glosses.dropna(subset=["lemma", "gloss"]).drop_duplicates("lemma")
    words = rows["gloss"].str.split().str.len()
    rows = rows[(words >= MIN_WORDS) & (words <= MAX_WORDS)]
    return rows.sample(n=ROWS, random_state=SEED)[["lemma", "pos", "gloss", "label"]].reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=HERE / "wordnet_glosses.csv")
    ap.add_argument("--out", type=Path, default=HERE / "wordnet_definitions.csv")
    args = ap.parse_args()
    derive(pd.read_csv(args.source)).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
