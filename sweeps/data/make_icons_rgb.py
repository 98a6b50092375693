"""Make sweeps/data/icons_rgb/ and sweeps/data/icons_rgb.csv: elementary's colour icons, 32x32
RGBA PNGs, labelled by their icon context (actions, categories, devices, mimes, places, status),
an RGB image classification task.

Reads the SVG icons Debian's ``elementary-icon-theme`` installs (/usr/share/icons/elementary/
<context>/<size>/<name>.svg; the ``symbolic`` folders and ``-symbolic`` icons are monochrome
and left out) and renders each icon's 32 px and 48 px designs at 32x32 with ``rsvg-convert``
(Debian's ``librsvg2-bin``), keeping the alpha channel (the image reader drops it). At most
``PER_CONTEXT`` icon names per context, evenly spaced in name order, so the classes are close
to balanced and the files are the same on every run. The ``split`` column (0 train,
1 validation, 2 test; Ludwig's fixed split) is drawn per icon name with a fixed seed, so both
renderings of an icon land in the same split. The theme is GPL-3 (sweeps/data/ICONS-LICENSE).

    python sweeps/data/make_icons_rgb.py [--theme /usr/share/icons/elementary] [--out FOLDER]
"""

from __future__ import annotations

import argparse
import csv
import random
import subprocess
from pathlib import Path

#: The icon contexts kept (the labels) and the designs rendered per icon.
CONTEXTS = ("actions", "categories", "devices", "mimes", "places", "status")
DESIGNS = (32, 48)
#: Pixels of each rendered image (height = width).
SIZE = 32
PER_CONTEXT = 60
#: Fractions of icon names per split (train, validation, test), per context.
FRACTIONS = (0.7, 0.15, 0.15)
SEED = 25


def icon_names(theme: Path, context: str) -> list[str]:
    """Colour icon names with every design in ``DESIGNS``, at most ``PER_CONTEXT``, evenly spaced."""
    sets = [{p.stem for p in (theme / context / str(d)).glob("*.svg") if "symbolic" not in p.stem} for d in DESIGNS]
    names = sorted(set.intersection(*sets))
    if len(names) <= PER_CONTEXT:
        return names
    return [names[i * len(names) // PER_CONTEXT] for i in range(PER_CONTEXT)]


def splits(names: list[str], rng: random.Random) -> dict[str, int]:
    """Each name's split (0, 1, 2) in ``FRACTIONS`` proportions, drawn with ``rng``."""
    shuffled = names[:]
    rng.shuffle(shuffled)
    n_train = round(FRACTIONS[0] * len(names))
    n_val = round(FRACTIONS[1] * len(names))
    return {n: 0 if i < n_train else 1 if i < n_train + n_val else 2 for i, n in enumerate(shuffled)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--theme", type=Path, default=Path("/usr/share/icons/elementary"))
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    rng = random.Random(SEED)
    rows = []
    for context in CONTEXTS:
        names = icon_names(args.theme, context)
        split = splits(names, rng)
        for name in names:
            for design in DESIGNS:
                rel = Path("icons_rgb") / context / f"{name}-{design}.png"
                (args.out / rel).parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(
                    [
                        "rsvg-convert",
                        "--width",
                        str(SIZE),
                        "--height",
                        str(SIZE),
                        "--format",
                        "png",
                        "--output",
                        str(args.out / rel),
                        str(args.theme / context / str(design) / f"{name}.svg"),
                    ],
                    check=True,
                )
                rows.append({"image_path": rel.as_posix(), "context": context, "split": split[name]})
    with (args.out / "icons_rgb.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["image_path", "context", "split"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out / 'icons_rgb.csv'}")


if __name__ == "__main__":
    main()
