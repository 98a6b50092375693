"""Image cells to one (N, C, H, W) array: arrays ((H, W) grayscale or (H, W, C) as Ludwig
takes them: a Parquet list column, sklearn's digits) or paths to image files, as Ludwig reads a
CSV's image column.

Files are read with Pillow. ``num_channels`` 1 converts colour to 8-bit grayscale (``L``; 16-
and 32-bit grayscale keep their values), 3 converts to RGB (grayscale repeated, alpha dropped);
unset, each image keeps its own channels (alpha dropped: grayscale 1, colour 3) and every image
must have the first image's. Pixels stay as read: 8-bit images are stored as uint8 (a quarter
of float32's memory; scaled on each batch, see :mod:`ludwig_hpo.model.image_input`), deeper
ones as float32. Relative paths start at the dataset file's folder. Images are resized to
``preprocessing.height`` x ``width`` when those are set, else to the size Ludwig's
``infer_image_dimensions`` infers; without either, every image must have the first image's
size. Runs in the driver, once per sweep.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.data.missing import FilledValues, fill_from_neighbours, how_of, training_mode
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.errors import DataError

#: Threads reading image files at once (in the driver).
READ_THREADS = 8
#: Pillow modes read as they are (already one channel, deeper than 8 bits).
_DEEP_GRAY = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


#: Pillow modes without colour (read as one channel).
_GRAY = ("1", "L", "LA", "La", *_DEEP_GRAY)
#: ITU-R 601-2 luma weights, Pillow's ``convert("L")``: RGB arrays become grayscale as files do.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _resize(img: np.ndarray, size: tuple[int, int], method: str) -> np.ndarray:
    """``img`` (C, h, w) as (C, H, W) of the same dtype: bilinear with antialiasing per channel
    (``interpolate``; uint8 rounded back) or centred crop / zero padding (``crop_or_pad``)."""
    if img.shape[1:] == size:
        return img
    if method == "interpolate":
        from PIL import Image

        planes = [
            np.asarray(
                Image.fromarray(np.asarray(c, dtype=np.float32), mode="F").resize(
                    (size[1], size[0]), Image.Resampling.BILINEAR
                ),
                dtype=np.float32,
            )
            for c in img
        ]
        out = np.stack(planes)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8) if img.dtype == np.uint8 else out
    res = np.zeros((img.shape[0], *size), dtype=img.dtype)
    (h, w), (H, W) = img.shape[1:], size
    sy, sx = max(0, (h - H) // 2), max(0, (w - W) // 2)  # crop offsets in the source
    dy, dx = max(0, (H - h) // 2), max(0, (W - w) // 2)  # pad offsets in the target
    ch, cw = min(h, H), min(w, W)
    res[:, dy : dy + ch, dx : dx + cw] = img[:, sy : sy + ch, sx : sx + cw]
    return res


def _channels(img: np.ndarray, want: int | None) -> np.ndarray:
    """(c, h, w) with c in 1, 3 as ``want`` channels: 3 -> 1 by luma, 1 -> 3 repeated."""
    if want is None or img.shape[0] == want:
        return img
    if want == 3:
        return np.repeat(img, 3, axis=0)
    gray = np.tensordot(_LUMA, img.astype(np.float32), axes=1)[None]
    return np.clip(np.rint(gray), 0, 255).astype(np.uint8) if img.dtype == np.uint8 else gray


def _read(path: Path, key: str, where: str, num_channels: int | None) -> np.ndarray:
    """One image file as (C, h, w) pixel values: uint8, or float32 for deeper grayscale."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.load()
            if im.mode in _DEEP_GRAY:
                return _channels(np.asarray(im, dtype=np.float32)[None], num_channels)
            gray = im.mode in _GRAY if num_channels is None else num_channels == 1
            if gray:
                return np.asarray(im.convert("L"), dtype=np.uint8)[None]
            return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8).transpose(2, 0, 1))
    except PermissionError:
        raise DataError(
            f"permission denied ({where})", source=str(path), key=key, fix="make the image files readable"
        ) from None
    except (UnidentifiedImageError, OSError, ValueError) as e:
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DataError(
            f"cannot read the image ({where}): {text}",
            source=str(path),
            key=key,
            fix="replace the file with a PNG, JPEG, BMP or TIFF image, or drop the row",
        ) from None


def _array(v: Any, i: int, key: str, column: str, origin: DataOrigin, num_channels: int | None) -> np.ndarray:
    """One array cell, (H, W) or (H, W, C) with C in 1, 3, 4 (alpha dropped), as (C', H, W)."""
    try:
        img = np.asarray(v, dtype=np.float32)
    except (ValueError, TypeError):
        raise DataError(
            f"column {column!r}: image cells must be arrays of one shape (e.g. a Parquet list column) or "
            "image file paths",
            source=origin.source,
            key=key,
            fix="store each image as an (H, W) or (H, W, C) array or a path to an image file",
        ) from None
    if img.ndim == 3 and img.shape[2] in (1, 3, 4):
        img = img[:, :, :3].transpose(2, 0, 1) if img.shape[2] > 1 else img.transpose(2, 0, 1)
    elif img.ndim == 2:
        img = img[None]
    else:
        raise DataError(
            f"image cells must be (H, W) or (H, W, C) arrays with 1, 3 or 4 channels, got shape {img.shape} "
            f"({_cell(origin, i, column)})",
            source=origin.source,
            key=key,
            fix="store grayscale images as (H, W) arrays and colour ones as (H, W, 3)",
        )
    return _channels(img, num_channels)


def _paths(s: pd.Series, key: str, column: str, data_dir: Path | None, origin: DataOrigin) -> list[Path]:
    missing = [i for i, v in enumerate(s) if _is_missing(v) or (isinstance(v, str) and not v.strip())]
    if missing:
        raise DataError(
            f"{len(missing)} rows have no image path in column {column!r} ({origin.rows(missing)})",
            source=origin.source,
            key=key,
            fix="fill or drop those rows",
        )
    other = [i for i, v in enumerate(s) if not isinstance(v, str)]
    if other:
        raise DataError(
            f"column {column!r} mixes image paths and other values "
            f"({origin.rows(other[0])}: {type(s.iloc[other[0]]).__name__})",
            source=origin.source,
            key=key,
            fix="give every row an image file path",
        )
    base = data_dir if data_dir is not None else Path.cwd()
    out = []
    for v in s:
        text = v.strip()
        if "://" in text:
            raise DataError(
                f"image URLs are not downloaded ({text!r} in column {column!r})",
                source=origin.source,
                key=key,
                fix="download the images and list their file paths",
            )
        p = Path(text).expanduser()
        out.append(p if p.is_absolute() else base / p)
    absent = [i for i, p in enumerate(out) if not p.is_file()]
    if absent:
        first = absent[0]
        raise DataError(
            f"image file not found ({_cell(origin, first, column)}; {len(absent)} of {len(out)} files missing)",
            source=str(out[first]),
            key=key,
            fix=f"check the paths in column {column!r} (relative paths start at the dataset file's folder)",
        )
    return out


def _cell(origin: DataOrigin, row: int, column: str) -> str:
    """``line 8 of data.csv, column 'img'``: the cell a person looks for (the message's source
    is the image file, so the dataset file is named here)."""
    where = f" of {Path(origin.source).name}" if origin.source and not origin.source.startswith("sklearn:") else ""
    return f"{origin.rows(row)}{where}, column {column!r}"


def load_images(
    s: pd.Series,
    *,
    key: str,
    column: str,
    height: int | None,
    width: int | None,
    resize_method: str,
    data_dir: Path | None,
    num_channels: int | None = None,
    infer: tuple[int, int, int] | None = None,
    origin: DataOrigin | None = None,
) -> np.ndarray:
    """Every cell of an image column as one (N, C, H, W) array of raw pixel values: uint8 when
    every pixel is an integer in 0..255 (8-bit files, digits' 0..16), else float32.

    Args:
        s: the column: (H, W) / (H, W, C) arrays, or image file paths (str).
        key: the feature's key path for errors, e.g. ``"input_features[image]"``.
        column: the dataset column's name, for errors.
        height, width: the size every image is resized to; both None: the first image's
            size, which every other image must have.
        resize_method: ``interpolate`` (bilinear) or ``crop_or_pad`` (centred).
        data_dir: the folder relative paths start at (the dataset file's); None: the
            current folder.
        num_channels: 1 or 3: every image converted to it; None: the first image's, which
            every other image must have.
        infer: without ``height``/``width``, Ludwig's ``infer_image_dimensions``: (sample
            size, max height, max width): every image resized to the rounded average size of
            the first ``sample size`` images, capped; None: the first image's size, which every
            other image must have.
        origin: the dataset file, named in errors with the rows as it counts them.

    Raises:
        DataError: a missing path or file, an unreadable file, an array that is not an image,
            an image with other channels than the first (``num_channels`` unset), a file of
            another bit depth than the first (8-bit against 16- or 32-bit), or an image of another
            size when ``height``/``width`` are not set.
    """
    origin = origin or DataOrigin()
    if all(_is_missing(v) for v in s):
        raise DataError(
            f"no row has an image in column {column!r} ({len(s)} rows)",
            source=origin.source,
            key=key,
            fix="fill the column with image file paths or arrays",
        )
    paths = _paths(s, key, column, data_dir, origin) if any(isinstance(v, str) for v in s) else None
    if paths is None:
        images = [_array(v, i, key, column, origin, num_channels) for i, v in enumerate(s)]
        if all(im.dtype == np.float32 for im in images) and all(
            im.min() >= 0 and im.max() <= 255 and np.array_equal(im, np.rint(im)) for im in images
        ):
            images = [im.astype(np.uint8) for im in images]
    else:
        # Pillow decodes without holding the GIL: a few threads read a large folder faster.
        # map() yields in row order, so the first bad file raised is the first in the column.
        with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(paths))) as pool:
            images = list(
                pool.map(lambda ip: _read(ip[1], key, _cell(origin, ip[0], column), num_channels), enumerate(paths))
            )
    _same_channels(images, key, column, origin, paths)
    if paths is not None:
        _same_depth(images, key, column, origin, paths)
    if any(im.dtype != np.uint8 for im in images):
        images = [im.astype(np.float32) for im in images]
    if (height is None or width is None) and infer is not None:
        sample = images[: infer[0]]
        height = min(int(round(sum(im.shape[1] for im in sample) / len(sample))), infer[1])
        width = min(int(round(sum(im.shape[2] for im in sample) / len(sample))), infer[2])
    if height is not None and width is not None:
        return np.stack([_resize(im, (height, width), resize_method) for im in images])
    first = images[0].shape[1:]
    for i, im in enumerate(images):
        if im.shape[1:] != first:
            what = _cell(origin, i, column)
            ref = f"the first image ({paths[0].name})" if paths else "the first image"
            raise DataError(
                f"image is {im.shape[1]}x{im.shape[2]} pixels ({what}) but {ref} is "
                f"{first[0]}x{first[1]} (height x width)",
                source=str(paths[i]) if paths else None,
                key=key,
                fix=f"set preprocessing: {{height: {first[0]}, width: {first[1]}}} on the feature to "
                f"resize every image (or remove infer_image_dimensions: false)",
            )
    return np.stack(images)


def _channel_count(n: int) -> str:
    return "1 channel" if n == 1 else f"{n} channels"


def _same_channels(
    images: list[np.ndarray], key: str, column: str, origin: DataOrigin, paths: list[Path] | None
) -> None:
    """Refuse images whose channel count differs from the first image's (Ludwig's rule when
    ``num_channels`` is not set), naming the first such image and how many there are."""
    first = images[0].shape[0]
    other = [i for i, im in enumerate(images) if im.shape[0] != first]
    if not other:
        return
    i = other[0]
    kind = {1: "grayscale", 3: "colour"}
    ref = f"the first image ({paths[0].name})" if paths else "the first image"
    raise DataError(
        f"image is {kind[images[i].shape[0]]} ({_channel_count(images[i].shape[0])}; {_cell(origin, i, column)}) "
        f"but {ref} is {kind[first]} ({_channel_count(first)}); {len(other)} of {len(images)} images differ",
        source=str(paths[i]) if paths else origin.source,
        key=key,
        fix="set preprocessing: {num_channels: 3} (RGB) or {num_channels: 1} (grayscale) on the feature to "
        "convert every image",
    )


def _same_depth(images: list[np.ndarray], key: str, column: str, origin: DataOrigin, paths: list[Path]) -> None:
    """Refuse image files of another bit depth than the first file's (8-bit against 16- or
    32-bit grayscale): one divisor (``scale``) cannot bring both to the same range."""
    first = images[0].dtype
    other = [i for i, im in enumerate(images) if im.dtype != first]
    if not other:
        return
    i = other[0]
    depth = {np.dtype(np.uint8): "8-bit"}
    raise DataError(
        f"image is {depth.get(images[i].dtype, '16- or 32-bit grayscale')} ({_cell(origin, i, column)}) but the "
        f"first image ({paths[0].name}) is {depth.get(first, '16- or 32-bit grayscale')}; {len(other)} of "
        f"{len(images)} images differ, and one scale cannot bring both to the same pixel range",
        source=str(paths[i]),
        key=key,
        fix="save every image of the column at one bit depth (e.g. all 8-bit PNGs)",
    )


def fill_images(s: pd.Series, strategy: str, train: np.ndarray, name: str) -> tuple[pd.Series, list[FilledValues]]:
    """``s`` with its rows without an image (None, NaN, a blank path) filled by ``strategy``:
    ``bfill`` / ``ffill`` from the neighbouring rows (Ludwig's), ``fill_with_mode`` with the
    training rows' most frequent cell; ``drop_row`` rows are gone already. What was filled, as
    :class:`~ludwig_hpo.data.missing.FilledValues` (printed by ``hpo validate`` and the sweep).
    Rows left without an image (a column with none) are refused later. Driver. Pure."""
    missing = np.array([_is_missing(v) or (isinstance(v, str) and not v.strip()) for v in s], dtype=bool)
    if not missing.any() or strategy not in ("bfill", "ffill", "fill_with_mode"):
        return s, []
    cells = s.astype(object).where(~missing, None)
    if strategy == "fill_with_mode":
        present = cells.map(lambda v: v if isinstance(v, str) else None)  # arrays have no mode
        value = training_mode(present, train)
        filled = cells.where(~missing, value) if value is not None else cells
    else:
        value, filled = None, fill_from_neighbours(cells, strategy)
    note = FilledValues(name, str(s.name), int(missing.sum()), how_of(strategy), value)
    return filled.rename(s.name), [note]


def prepare_images(
    s: pd.Series,
    *,
    key: str,
    train: np.ndarray,
    prep: Any,
    column: str,
    data_dir: Path | None,
    origin: DataOrigin,
    scale: float | None = None,
    name: str = "",
) -> tuple[np.ndarray, dict[str, float], list[FilledValues]]:
    """An image column's missing images filled (:func:`fill_images`), the column read
    (:func:`load_images`), and its batch-time scaling: the (N, C, H, W) pixels as read,
    ``{"scale", "imagenet1k"}``: the divisor (the training split's maximum
    pixel for ``scale: auto``, else ``prep.scale``; 1 for an all-black training split) and 1.0
    when ``standardize_image: imagenet1k`` applies (3 channels; Ludwig skips it otherwise, and
    ``imagenet1k_skipped`` is then 1.0), and what was filled.
    Driver, once per sweep.

    Args:
        prep: the feature's :class:`~ludwig_hpo.config.preprocessing.ImagePreprocessing`.
        train: the training rows, whose pixels ``scale: auto`` reads.
        scale: the divisor fitted already (a served model's new rows), used as is.
        name: the feature's name, for the filled-values note.

    Raises:
        DataError: as :func:`load_images`.
    """
    s, filled = fill_images(s, prep.missing_value_strategy, train, name)
    arr = load_images(
        s,
        key=key,
        column=column,
        height=prep.height,
        width=prep.width,
        resize_method=prep.resize_method,
        data_dir=data_dir,
        num_channels=prep.num_channels,
        infer=(
            (prep.infer_image_sample_size, prep.infer_image_max_height, prep.infer_image_max_width)
            if prep.infer_image_dimensions
            else None
        ),
        origin=origin,
    )
    if scale is None:
        scale = float(arr[train].max()) if prep.scale == "auto" else float(prep.scale)
    asked = prep.standardize_image == "imagenet1k"
    stats = {"scale": scale or 1.0, "imagenet1k": float(asked and arr.shape[1] == 3)}
    if asked and arr.shape[1] != 3:
        stats["imagenet1k_skipped"] = 1.0  # Ludwig's rule; hpo validate says so
    return arr, stats, filled
