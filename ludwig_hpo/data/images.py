"""Image cells to one (N, H, W) array: 2-D arrays (a Parquet list column, sklearn's digits)
or paths to image files, as Ludwig reads a CSV's image column.

Files are read with Pillow and converted to 8-bit grayscale (``L``; 16- and 32-bit
grayscale keep their values) because the image encoder takes (height, width) images.
Relative paths start at the dataset file's folder. Images are resized to
``preprocessing.height`` x ``width`` when those are set; otherwise every image must have
the first image's size. Runs in the driver, once per sweep.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.errors import DataError

#: Threads reading image files at once (in the driver).
READ_THREADS = 8
#: Pillow modes read as they are (already one channel, deeper than 8 bits).
_DEEP_GRAY = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def _resize(img: np.ndarray, size: tuple[int, int], method: str) -> np.ndarray:
    """``img`` (h, w) float32 as ``size`` (H, W): bilinear with antialiasing (``interpolate``)
    or centred crop / zero padding (``crop_or_pad``)."""
    if img.shape == size:
        return img
    if method == "interpolate":
        from PIL import Image

        return np.asarray(
            Image.fromarray(img, mode="F").resize((size[1], size[0]), Image.Resampling.BILINEAR), dtype=np.float32
        )
    out = np.zeros(size, dtype=np.float32)
    (h, w), (H, W) = img.shape, size
    sy, sx = max(0, (h - H) // 2), max(0, (w - W) // 2)  # crop offsets in the source
    dy, dx = max(0, (H - h) // 2), max(0, (W - w) // 2)  # pad offsets in the target
    ch, cw = min(h, H), min(w, W)
    out[dy : dy + ch, dx : dx + cw] = img[sy : sy + ch, sx : sx + cw]
    return out


def _read(path: Path, key: str, where: str) -> np.ndarray:
    """One image file as (h, w) float32 grayscale pixel values."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.load()
            if im.mode in _DEEP_GRAY:
                return np.asarray(im, dtype=np.float32)
            return np.asarray(im.convert("L"), dtype=np.float32)
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
    origin: DataOrigin | None = None,
) -> np.ndarray:
    """Every cell of an image column as one (N, H, W) float32 array of raw pixel values.

    Args:
        s: the column: 2-D arrays, or image file paths (str).
        key: the feature's key path for errors, e.g. ``"input_features[image]"``.
        column: the dataset column's name, for errors.
        height, width: the size every image is resized to; both None: the first image's
            size, which every other image must have.
        resize_method: ``interpolate`` (bilinear) or ``crop_or_pad`` (centred).
        data_dir: the folder relative paths start at (the dataset file's); None: the
            current folder.
        origin: the dataset file, named in errors with the rows as it counts them.

    Raises:
        DataError: a missing path or file, an unreadable file, an image that is not 2-D,
            or an image of another size when ``height``/``width`` are not set.
    """
    origin = origin or DataOrigin()
    paths = _paths(s, key, column, data_dir, origin) if any(isinstance(v, str) for v in s) else None
    if paths is None:
        try:
            images = [np.asarray(v, dtype=np.float32) for v in s]
        except (ValueError, TypeError):
            raise DataError(
                f"column {column!r}: image cells must be 2-D arrays of one shape (e.g. a Parquet list column) or "
                "image file paths",
                source=origin.source,
                key=key,
                fix="store each image as an (H, W) array or a path to an image file",
            ) from None
        bad = next((i for i, im in enumerate(images) if im.ndim != 2), None)
        if bad is not None:
            raise DataError(
                f"image cells must be 2-D (H, W) arrays, got shape {images[bad].shape} ({_cell(origin, bad, column)})",
                source=origin.source,
                key=key,
                fix="store grayscale images as (H, W) arrays",
            )
    else:
        # Pillow decodes without holding the GIL: a few threads read a large folder faster.
        # map() yields in row order, so the first bad file raised is the first in the column.
        with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(paths))) as pool:
            images = list(pool.map(lambda ip: _read(ip[1], key, _cell(origin, ip[0], column)), enumerate(paths)))
    if height is not None and width is not None:
        return np.stack([_resize(im, (height, width), resize_method) for im in images])
    first = images[0].shape
    for i, im in enumerate(images):
        if im.shape != first:
            what = _cell(origin, i, column)
            ref = f"the first image ({paths[0].name})" if paths else "the first image"
            raise DataError(
                f"image is {im.shape[0]}x{im.shape[1]} pixels ({what}) but {ref} is "
                f"{first[0]}x{first[1]} (height x width)",
                source=str(paths[i]) if paths else None,
                key=key,
                fix=f"set preprocessing: {{height: {first[0]}, width: {first[1]}}} on the feature to "
                f"resize every image",
            )
    return np.stack(images)
