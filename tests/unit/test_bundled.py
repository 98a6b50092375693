"""The bundled datasets read from scikit-learn's files are the arrays its loaders return,
and reading them imports neither scikit-learn nor SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import datasets

from ludwig_hpo.data.bundled import FILES, load_bundled
from ludwig_hpo.data.sources import _bundled
from tests.unit.test_import_footprint import _imported_after


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_arrays_are_scikit_learns(name):
    ours, theirs = load_bundled(name), getattr(datasets, f"load_{name}")()
    np.testing.assert_array_equal(ours.data, theirs.data)
    np.testing.assert_array_equal(ours.target, theirs.target)
    assert ours.target.dtype == np.int64
    if name != "digits":
        assert list(ours.feature_names) == [str(n) for n in theirs.feature_names]


def test_the_frames_are_as_before():
    digits = _bundled("digits")
    assert digits["image"][0].shape == (8, 8) and digits["image"][0].dtype == np.float32
    np.testing.assert_array_equal(np.stack(digits["image"]), datasets.load_digits().images.astype(np.float32))
    cancer = _bundled("breast_cancer")
    assert list(cancer.columns[:2]) == ["mean_radius", "mean_texture"] and "radius_error" in cancer.columns
    assert cancer["malignant"].sum() == (datasets.load_breast_cancer().target == 0).sum()
    assert _bundled("wine")["cultivar"].iloc[0] == "cultivar_0"


def test_a_missing_data_folder_falls_back_to_scikit_learns_loaders(monkeypatch, tmp_path):
    from ludwig_hpo.data import bundled

    monkeypatch.setattr(bundled, "data_folder", lambda: tmp_path)
    np.testing.assert_array_equal(bundled.load_bundled("wine").data, datasets.load_wine().data)


def test_reading_them_imports_no_scikit_learn_or_scipy():
    code = (
        "import sys\n"
        "from ludwig_hpo.data.sources import _bundled\n"
        "for n in ('digits', 'breast_cancer', 'wine'): _bundled(n)\n"
        "assert 'scipy' not in sys.modules\n"
    )
    assert "sklearn" not in _imported_after(code)
