"""Image features read from files (Ludwig's CSV convention): paths relative to the dataset
file's folder, (N, C, H, W) pixels as read, channel conversion, resizing to ``preprocessing.height``/``width``, and
one-line errors for missing, unreadable or differently sized images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from ludwig_hpo.data import dataset_folder, load_dataframe, prepare
from ludwig_hpo.data.images import load_images
from ludwig_hpo.errors import DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ludwig"
KEY = "input_features[img]"


def _png(path: Path, pixels: np.ndarray, mode: str = "L") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels, mode=mode).save(path)
    return path


def _images(folder: Path, n: int = 30, size: tuple[int, int] = (6, 5), seed: int = 0) -> list[np.ndarray]:
    """``n`` random 8-bit grayscale PNGs ``folder/images/<i>.png``; returns their pixels."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        px = rng.integers(0, 256, size, dtype=np.uint8)
        _png(folder / "images" / f"{i}.png", px)
        out.append(px)
    return out


def _load(paths, data_dir, **kw) -> np.ndarray:
    opts = {"height": None, "width": None, "resize_method": "interpolate", **kw}
    return load_images(pd.Series(paths), key=KEY, column="img", data_dir=data_dir, **opts)


def test_relative_paths_start_at_the_dataset_folder_not_the_current_one(tmp_path, monkeypatch, make_config):
    data_dir = tmp_path / "data"
    pixels = _images(data_dir)
    pd.DataFrame({"img": [f"images/{i}.png" for i in range(30)], "y": ["a", "b", "c"] * 10}).to_csv(
        data_dir / "rows.csv", index=False
    )
    monkeypatch.chdir(tmp_path)  # the current folder holds no images/
    cfg = make_config([{"name": "img", "type": "image"}], [{"name": "y", "type": "category"}])
    source = "data/rows.csv"
    df = load_dataframe(source, tmp_path)
    data = prepare(df, cfg, dataset_folder(source, tmp_path))
    assert data.inputs["img"].shape == (30, 1, 6, 5) and data.meta["img"].shape == (1, 6, 5)
    assert data.inputs["img"].dtype == np.uint8  # scaled on each batch, by the model
    scale = data.meta["img"].stats["scale"]
    assert scale == max(float(pixels[i].max()) for i in data.splits["train"])
    np.testing.assert_array_equal(data.inputs["img"][7, 0], pixels[7])


def test_absolute_paths_and_data_dir_none_use_the_current_folder(tmp_path, monkeypatch):
    pixels = _images(tmp_path, n=2)
    absolute = _load([str(tmp_path / "images" / "0.png"), str(tmp_path / "images" / "1.png")], data_dir=None)
    monkeypatch.chdir(tmp_path)
    relative = _load(["images/0.png", "images/1.png"], data_dir=None)
    np.testing.assert_array_equal(absolute, np.stack(pixels)[:, None])
    np.testing.assert_array_equal(relative, absolute)


def test_colour_and_alpha_images_are_converted_to_grayscale_with_num_channels_1(tmp_path):
    rgb = np.random.default_rng(1).integers(0, 256, (4, 4, 3), dtype=np.uint8)
    _png(tmp_path / "c.png", rgb, mode="RGB")
    rgba = np.dstack([rgb, np.full((4, 4), 128, np.uint8)])
    _png(tmp_path / "a.png", rgba, mode="RGBA")
    got = _load(["c.png", "a.png"], tmp_path, num_channels=1)
    want = np.asarray(Image.fromarray(rgb, mode="RGB").convert("L"))  # ITU-R 601-2 luma
    assert got.shape == (2, 1, 4, 4)
    np.testing.assert_array_equal(got[0, 0], want)
    np.testing.assert_array_equal(got[1, 0], want)


def test_16_bit_grayscale_keeps_its_values(tmp_path):
    deep = np.array([[0, 1000], [40000, 65535]], dtype=np.uint16)
    Image.fromarray(deep).save(tmp_path / "d.png")
    got = _load(["d.png"], tmp_path)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got[0, 0], deep.astype(np.float32))


def test_height_and_width_resize_every_image(tmp_path):
    _png(tmp_path / "small.png", np.full((4, 4), 200, np.uint8))
    _png(tmp_path / "wide.png", np.full((6, 10), 50, np.uint8))
    got = _load(["small.png", "wide.png"], tmp_path, height=8, width=8)
    assert got.shape == (2, 1, 8, 8) and got.dtype == np.uint8
    np.testing.assert_array_equal(got[0], 200)  # bilinear keeps a flat image flat
    np.testing.assert_array_equal(got[1], 50)


def test_crop_or_pad_centres_the_image(tmp_path):
    px = np.arange(1, 17, dtype=np.uint8).reshape(4, 4)
    _png(tmp_path / "p.png", px)
    padded = _load(["p.png"], tmp_path, height=6, width=6, resize_method="crop_or_pad")[0, 0]
    assert padded.sum() == px.sum() and (padded[1:5, 1:5] == px).all() and padded[0].sum() == 0
    cropped = _load(["p.png"], tmp_path, height=2, width=2, resize_method="crop_or_pad")[0, 0]
    np.testing.assert_array_equal(cropped, px[1:3, 1:3])


def test_arrays_are_resized_like_files(tmp_path):
    arrays = [np.full((3, 3), 7.0, np.float32), np.full((5, 5), 9.0, np.float32)]
    got = load_images(
        pd.Series(arrays), key=KEY, column="img", height=4, width=4, resize_method="interpolate", data_dir=None
    )
    assert got.shape == (2, 1, 4, 4) and np.allclose(got[0], 7) and np.allclose(got[1], 9)


def test_an_image_of_another_size_names_the_file_and_the_fix(tmp_path):
    _images(tmp_path, n=3, size=(8, 8))
    _png(tmp_path / "images" / "big.png", np.zeros((10, 12), np.uint8))
    with pytest.raises(DataError) as info:
        _load(["images/0.png", "images/1.png", "images/big.png"], tmp_path)
    assert info.value.one_line() == (
        f"{tmp_path}/images/big.png: {KEY}: image is 10x12 pixels (data row 3, column 'img') but the first image "
        "(0.png) is 8x8 (height x width); fix: set preprocessing: {height: 8, width: 8} on the feature to resize "
        "every image (or remove infer_image_dimensions: false)"
    )


def test_a_missing_file_names_the_file_the_column_and_counts_the_others(tmp_path):
    _images(tmp_path, n=2)
    with pytest.raises(DataError) as info:
        _load(["images/0.png", "images/9.png", "images/1.png", "images/8.png"], tmp_path)
    assert info.value.one_line() == (
        f"{tmp_path}/images/9.png: {KEY}: image file not found (data row 2, column 'img'; 2 of 4 files missing); "
        "fix: check the paths in column 'img' (relative paths start at the dataset file's folder)"
    )


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (
            ["images/0.png", None],
            "1 rows have no image path in column 'img' (data row 2); fix: fill or drop those rows",
        ),
        (["images/0.png", " "], "1 rows have no image path in column 'img' (data row 2); fix: fill or drop those rows"),
        (
            ["images/0.png", 3],
            "column 'img' mixes image paths and other values (data row 2: int); fix: give every row an image file path",
        ),
        (
            ["https://example.org/0.png"],
            "image URLs are not downloaded ('https://example.org/0.png' in column 'img'); "
            "fix: download the images and list their file paths",
        ),
        (
            [np.zeros((2, 2, 2))],
            "image cells must be (H, W) or (H, W, C) arrays with 1, 3 or 4 channels, got shape (2, 2, 2) (data row "
            "1, column 'img'); fix: store grayscale images as (H, W) arrays and colour ones as (H, W, 3)",
        ),
    ],
)
def test_bad_cells_are_one_line(tmp_path, cells, message):
    _images(tmp_path, n=1)
    with pytest.raises(DataError) as info:
        _load(cells, tmp_path)
    assert info.value.one_line() == f"{KEY}: {message}"


def test_a_file_that_is_not_an_image(tmp_path):
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(DataError) as info:
        _load(["notes.png"], tmp_path)
    assert info.value.one_line() == (
        f"{tmp_path}/notes.png: {KEY}: cannot read the image (data row 1, column 'img'): cannot identify image file "
        f"'{tmp_path}/notes.png'; fix: replace the file with a PNG, JPEG, BMP or TIFF image, or drop the row"
    )


def test_the_fixture_pixels_are_the_digits(tmp_path):
    """The checked-in PNGs are scikit-learn's digits (0..16) scaled to 0..255."""
    from sklearn.datasets import load_digits

    df = load_dataframe(str(FIXTURES / "image_digits.csv"), tmp_path)
    arr = _load(df["image_path"].tolist(), FIXTURES)
    digits = load_digits()
    np.testing.assert_array_equal(arr[:, 0], np.round(digits.images[:150] * 255 / 16))
    assert df["digit"].tolist() == digits.target[:150].tolist()
    assert sorted(set(df["split"])) == [0, 1, 2]


def test_infer_image_dimensions_resizes_to_the_average_of_the_first_images_capped(tmp_path):
    """Ludwig's default without height/width: the rounded mean size of the first
    ``infer_image_sample_size`` images, at most ``infer_image_max_height`` x ``_width``."""
    _png(tmp_path / "a.png", np.full((4, 6), 10, np.uint8))
    _png(tmp_path / "b.png", np.full((8, 9), 20, np.uint8))
    _png(tmp_path / "c.png", np.full((30, 30), 30, np.uint8))
    got = _load(["a.png", "b.png", "c.png"], tmp_path, infer=(2, 256, 256))
    assert got.shape == (3, 1, 6, 8)  # (4 + 8) / 2, round((6 + 9) / 2) = round(7.5) = 8
    assert (got[2] == 30).all()
    assert _load(["a.png", "b.png", "c.png"], tmp_path, infer=(3, 5, 256)).shape == (3, 1, 5, 15)
