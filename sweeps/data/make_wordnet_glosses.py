"""Make sweeps/data/wordnet_glosses.csv: WordNet 3.0 noun glosses labelled by their
lexicographer file (noun.animal, noun.plant, ...), a text classification task.

Reads the WordNet database files (Debian's ``wordnet-base`` installs them in
/usr/share/wordnet), keeps the synsets of the eight lexicographer files in ``LABELS``, takes
each synset's definition (the gloss before its quoted examples) and its first lemma, and
draws ``PER_LABEL`` synsets per label with a fixed seed, so the file is the same on every
run. WordNet's licence (sweeps/data/WORDNET-LICENSE) allows redistribution with its notice.

    python sweeps/data/make_wordnet_glosses.py [--wordnet /usr/share/wordnet] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

#: WordNet's lexicographer file numbers (the second field of a data.noun line) -> names.
LEXNAMES = {
    5: "noun.animal",
    6: "noun.artifact",
    8: "noun.body",
    13: "noun.food",
    15: "noun.location",
    18: "noun.person",
    20: "noun.plant",
    27: "noun.substance",
}
LABELS = tuple(LEXNAMES.values())
PER_LABEL = 500
SEED = 25


def synsets(data_noun: Path) -> list[tuple[str, str, str]]:
    """(gloss, lemma, label) of every synset of ``data_noun`` in a file of ``LEXNAMES``."""
    out = []
    for line in data_noun.read_text(encoding="utf-8").splitlines():
        if line.startswith("  ") or "|" not in line:  # the licence header
            continue
        fields, gloss = line.split("|", 1)
        parts = fields.split()
        label = LEXNAMES.get(int(parts[1]))
        if label is None:
            continue
        lemma = parts[4].replace("_", " ")
        definition = gloss.split('; "')[0].strip().rstrip(";").strip()
        if definition:
            out.append((definition, lemma, label))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("wordnet_glosses.csv"))
    args = parser.parse_args()
    rows = synsets(args.wordnet / "data.noun")
    rng = random.Random(SEED)
    chosen = []
    for label in LABELS:
        of_label = [r for r in rows if r[2] == label]
        chosen += rng.sample(of_label, PER_LABEL)
    rng.shuffle(chosen)
    with args.out.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["gloss", "lemma", "pos", "label"])
        for gloss, lemma, label in chosen:
            w.writerow([gloss, lemma, "noun", label])
    print(f"{args.out}: {len(chosen)} rows, {len(LABELS)} labels")


if __name__ == "__main__":
    main()
