"""RGB images: files read as (3, H, W) with alpha dropped, grayscale repeated into 3 channels,
(H, W, C) arrays as Ludwig takes them, mixed channel counts refused in one line, uint8 storage,
and the model-side scaling (``scale``, ``standardize_image: imagenet1k``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from ludwig_hpo.data import prepare
from ludwig_hpo.data.images import load_images
from ludwig_hpo.errors import DataError
from ludwig_hpo.model.build import build_model
from ludwig_hpo.model.image_input import IMAGENET1K_MEAN, IMAGENET1K_STD, PixelScaling

KEY = "input_features[img]"


def _save(path: Path, pixels: np.ndarray, mode: str) -> str:
    Image.fromarray(pixels, mode=mode).save(path)
    return path.name


def _load(paths, data_dir, **kw) -> np.ndarray:
    opts = {"height": None, "width": None, "resize_method": "interpolate", **kw}
    return load_images(pd.Series(paths), key=KEY, column="img", data_dir=data_dir, **opts)


def _rgb(seed: int = 0, size=(4, 5)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)


def test_rgb_and_rgba_files_are_three_uint8_channels_with_alpha_dropped(tmp_path):
    rgb = _rgb()
    names = [_save(tmp_path / "c.png", rgb, "RGB"), _save(tmp_path / "a.png", np.dstack([rgb, rgb[..., 0]]), "RGBA")]
    got = _load(names, tmp_path)
    assert got.shape == (2, 3, 4, 5) and got.dtype == np.uint8
    np.testing.assert_array_equal(got[0], rgb.transpose(2, 0, 1))
    np.testing.assert_array_equal(got[1], rgb.transpose(2, 0, 1))


def test_grayscale_files_repeat_into_three_channels_with_num_channels_3(tmp_path):
    gray = np.arange(20, dtype=np.uint8).reshape(4, 5)
    names = [_save(tmp_path / "g.png", gray, "L"), _save(tmp_path / "c.png", _rgb(), "RGB")]
    got = _load(names, tmp_path, num_channels=3)
    assert got.shape == (2, 3, 4, 5)
    assert all((got[0, c] == gray).all() for c in range(3))


def test_arrays_are_read_as_ludwig_takes_them(tmp_path):
    hwc = _rgb(1).astype(np.float64)
    got = load_images(
        pd.Series([hwc, np.dstack([hwc, hwc[..., :1]])]),
        key=KEY,
        column="img",
        height=None,
        width=None,
        resize_method="interpolate",
        data_dir=None,
    )
    assert got.shape == (2, 3, 4, 5) and got.dtype == np.uint8  # integers 0..255: stored as uint8
    np.testing.assert_array_equal(got[1], hwc.transpose(2, 0, 1))
    halves = _load([np.full((2, 2), 0.5)], None)
    assert halves.dtype == np.float32 and halves.shape == (1, 1, 2, 2)


def test_mixed_channel_counts_are_refused_with_the_file_the_key_and_the_fix(tmp_path):
    names = [_save(tmp_path / f"{i}.png", _rgb(i), "RGB") for i in range(3)]
    names.insert(2, _save(tmp_path / "gray.png", np.zeros((4, 5), np.uint8), "L"))
    with pytest.raises(DataError) as info:
        _load(names, tmp_path)
    assert info.value.one_line() == (
        f"{tmp_path}/gray.png: {KEY}: image is grayscale (1 channel; data row 3, column 'img') but the first "
        "image (0.png) is colour (3 channels); 1 of 4 images differ; fix: set preprocessing: {num_channels: 3} (RGB) or "
        "{num_channels: 1} (grayscale) on the feature to convert every image"
    )
    assert _load(names, tmp_path, num_channels=1).shape == (4, 1, 4, 5)


def test_8_bit_and_16_bit_files_in_one_column_are_refused_even_converted_to_rgb(tmp_path):
    names = [_save(tmp_path / "0.png", _rgb(0), "RGB"), "deep.png"]
    Image.fromarray(np.full((4, 5), 40000, np.uint16)).save(tmp_path / "deep.png")
    with pytest.raises(DataError) as info:
        _load(names, tmp_path, num_channels=3)
    line = info.value.one_line()
    assert line.startswith(f"{tmp_path}/deep.png: {KEY}: image is 16- or 32-bit grayscale (data row 2, column 'img')")
    assert (
        "but the first image (0.png) is 8-bit" in line
        and "fix: save every image of the column at one bit depth" in line
    )
    deep = _load(["deep.png", "deep.png"], tmp_path, num_channels=3)  # one depth: read as it is
    assert deep.dtype == np.float32 and deep.shape == (2, 3, 4, 5) and deep.max() == 40000


def test_resizing_keeps_channels_and_uint8(tmp_path):
    flat = np.zeros((6, 8, 3), np.uint8)
    flat[..., 0], flat[..., 1], flat[..., 2] = 10, 120, 250
    got = _load([_save(tmp_path / "f.png", flat, "RGB")], tmp_path, height=3, width=4)
    assert got.shape == (1, 3, 3, 4) and got.dtype == np.uint8
    assert [int(got[0, c].min()) for c in range(3)] == [10, 120, 250]
    assert [int(got[0, c].max()) for c in range(3)] == [10, 120, 250]


def test_prepared_rgb_images_are_uint8_and_the_model_scales_them(tmp_path, make_config):
    rows = 24
    names = [_save(tmp_path / f"{i}.png", _rgb(i, (12, 12)), "RGB") for i in range(rows)]
    df = pd.DataFrame({"img": names, "y": ["a", "b"] * (rows // 2)})
    cfg = make_config(
        [{"name": "img", "type": "image", "preprocessing": {"standardize_image": "imagenet1k"}}],
        [{"name": "y", "type": "category"}],
    )
    data = prepare(df, cfg, tmp_path)
    x = data.inputs["img"]
    assert x.dtype == np.uint8 and x.shape == (rows, 3, 12, 12) and data.meta["img"].shape == (3, 12, 12)
    stats = data.meta["img"].stats
    assert stats["imagenet1k"] == 1.0 and stats["scale"] == float(x[data.splits["train"]].max())
    model = build_model(cfg, data.meta)
    pixels = model.pixels["img"](torch.from_numpy(x[:2]))
    mean = torch.tensor(IMAGENET1K_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET1K_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(pixels, (torch.from_numpy(x[:2]).float() / stats["scale"] - mean) / std)
    assert not any("pixels" in k for k in model.state_dict()), "scaling adds nothing to the weights"
    out = model({"img": torch.from_numpy(x[:3])})
    assert out["y"].shape == (3, 2)


def test_imagenet1k_is_skipped_for_grayscale_as_ludwig_does(tmp_path, make_config):
    names = [_save(tmp_path / f"{i}.png", np.full((3, 3), i * 10, np.uint8), "L") for i in range(20)]
    cfg = make_config(
        [{"name": "img", "type": "image", "preprocessing": {"standardize_image": "imagenet1k"}}],
        [{"name": "y", "type": "category"}],
    )
    data = prepare(pd.DataFrame({"img": names, "y": ["a", "b"] * 10}), cfg, tmp_path)
    assert data.meta["img"].stats["imagenet1k"] == 0.0 and data.meta["img"].stats["imagenet1k_skipped"] == 1.0
    scaled = PixelScaling(data.meta["img"].stats)(torch.from_numpy(data.inputs["img"][:1]))
    torch.testing.assert_close(
        scaled, torch.from_numpy(data.inputs["img"][:1]).float() / data.meta["img"].stats["scale"]
    )


def test_hpo_validate_names_each_image_features_size_channels_and_scaling():
    from ludwig_hpo.config.describe import image_stats_line

    assert image_stats_line("img", (3, 32, 48), {"scale": 255.0, "imagenet1k": 1.0}) == (
        "image img: 32x48 pixels, 3 channel(s); pixels divided by 255, then standardized with ImageNet's mean and "
        "std (standardize_image: imagenet1k)"
    )
    assert image_stats_line("g", (1, 8, 8), {"scale": 16.0, "imagenet1k": 0.0, "imagenet1k_skipped": 1.0}) == (
        "image g: 8x8 pixels, 1 channel(s); pixels divided by 16; standardize_image imagenet1k not applied: it "
        "needs 3 channels, not 1 (as in Ludwig)"
    )


def _with_a_missing_path(tmp_path, make_config, strategy: str | None):
    names = [_save(tmp_path / f"{i}.png", np.full((4, 4, 3), i, np.uint8), "RGB") for i in range(20)]
    cells: list = [*names[:10], *["0.png"] * 3, *names[13:]]  # 0.png is the most frequent path
    cells[5] = None
    prep = {"missing_value_strategy": strategy} if strategy else {}
    cfg = make_config(
        [{"name": "img", "type": "image", "preprocessing": prep}],
        [{"name": "y", "type": "category"}],
        preprocessing={"split": {"type": "fixed", "column": "split"}},
    )
    split = [0] * 14 + [1] * 3 + [2] * 3
    return prepare(pd.DataFrame({"img": cells, "y": ["a", "b"] * 10, "split": split}), cfg, tmp_path)


def test_a_missing_image_takes_the_next_rows_by_default_as_in_ludwig(tmp_path, make_config):
    data = _with_a_missing_path(tmp_path, make_config, None)
    assert (data.inputs["img"][5] == 6).all() and (data.inputs["img"][4] == 4).all()
    (note,) = data.filled
    assert note.text() == "1 missing values in img filled with the next value in the column"


def test_ffill_mode_and_drop_row_for_a_missing_image(tmp_path, make_config):
    assert (_with_a_missing_path(tmp_path, make_config, "ffill").inputs["img"][5] == 4).all()
    assert (_with_a_missing_path(tmp_path, make_config, "fill_with_mode").inputs["img"][5] == 0).all()
    dropped = _with_a_missing_path(tmp_path, make_config, "drop_row")
    assert dropped.num_rows == 19 and (dropped.inputs["img"][5] == 6).all()


def test_a_constant_image_is_refused(make_config):
    for prep, match in (
        ({"missing_value_strategy": "fill_with_const"}, "fill_with_const is not supported for images"),
        ({"fill_value": 0.5}, "fill_value applies to missing_value_strategy fill_with_const"),
    ):
        with pytest.raises(Exception, match=match):
            make_config([{"name": "img", "type": "image", "preprocessing": prep}], [{"name": "y", "type": "category"}])
