"""The datasets that ship with scikit-learn (``sklearn:digits``, ``breast_cancer``, ``wine``),
read from scikit-learn's own data files without importing scikit-learn: its import pulls in
SciPy (~90 MB and ~0.6 s), which ``hpo validate`` and the sweep's driver otherwise never need.
The arrays are those of ``sklearn.datasets.load_<name>()`` (``tests/unit/test_bundled.py``
compares them); where the files are not where this version of scikit-learn keeps them, the
loaders of ``sklearn.datasets`` read them. Driver (and ``hpo validate``) only.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: ``load_breast_cancer().feature_names``.
BREAST_CANCER_FEATURES = tuple(
    name
    for form in ("mean {}", "{} error", "worst {}")
    for name in map(
        form.format,
        (
            "radius",
            "texture",
            "perimeter",
            "area",
            "smoothness",
            "compactness",
            "concavity",
            "concave points",
            "symmetry",
            "fractal dimension",
        ),
    )
)
#: ``load_wine().feature_names``.
WINE_FEATURES = (
    "alcohol",
    "malic_acid",
    "ash",
    "alcalinity_of_ash",
    "magnesium",
    "total_phenols",
    "flavanoids",
    "nonflavanoid_phenols",
    "proanthocyanins",
    "color_intensity",
    "hue",
    "od280/od315_of_diluted_wines",
    "proline",
)
#: The data file of each dataset in scikit-learn's ``datasets/data`` folder.
FILES = {"breast_cancer": "breast_cancer.csv", "wine": "wine_data.csv", "digits": "digits.csv.gz"}


@dataclass(frozen=True)
class Bundled:
    """One bundled dataset as scikit-learn loads it.

    Attributes:
        data: (n, features) float64; for digits (n, 64), the 8x8 images flattened.
        target: (n,) int64 class codes.
        feature_names: one per column of ``data`` (digits: none).
    """

    data: np.ndarray
    target: np.ndarray
    feature_names: tuple[str, ...]


def data_folder() -> Path | None:
    """scikit-learn's ``datasets/data`` folder, found without importing scikit-learn; None
    when scikit-learn is not installed."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    # scikit-learn's load_csv_data: a header row (rows, features, class names), then one row
    # of feature values and the class code
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        n_rows, n_features = (int(v) for v in next(rows)[:2])
        data = np.empty((n_rows, n_features))
        target = np.empty((n_rows,), dtype=np.int64)
        for i, row in enumerate(rows):
            data[i] = np.asarray(row[:-1], dtype=np.float64)
            target[i] = int(row[-1])
    return data, target


def _from_sklearn(name: str) -> Bundled:
    from sklearn import datasets

    d = getattr(datasets, f"load_{name}")()
    names = tuple(str(n) for n in d.feature_names) if name != "digits" else ()
    return Bundled(np.asarray(d.data, dtype=np.float64), np.asarray(d.target, dtype=np.int64), names)


def load_bundled(name: str) -> Bundled:
    """The bundled dataset ``name`` (a key of :data:`FILES`).

    Raises:
        KeyError: ``name`` is not one of them.
        ModuleNotFoundError: scikit-learn is not installed.
    """
    folder = data_folder()
    path = folder / FILES[name] if folder is not None else None
    if path is None or not path.is_file():
        return _from_sklearn(name)
    if name == "digits":
        with gzip.open(path, mode="rt", encoding="utf-8") as f:
            table = np.loadtxt(f, delimiter=",")
        return Bundled(table[:, :-1], table[:, -1].astype(np.int64), ())
    data, target = _read_csv(path)
    return Bundled(data, target, BREAST_CANCER_FEATURES if name == "breast_cancer" else WINE_FEATURES)
