"""Ludwig's date and h3 components (``ludwig/features/date_feature.py``,
``ludwig/utils/date_utils.py``, ``ludwig/utils/h3_util.py``). Pure; runs in the driver."""

from __future__ import annotations

import math
from datetime import date, datetime, timezone
from typing import Any

from dateutil.parser import parse as parse_date

#: Date components, in order: year, month (1-12), day (1-31), weekday (0 = Monday), day of
#: the year (1-366), hour, minute, second, second of the day.
DATE_COMPONENTS = ("year", "month", "day", "weekday", "yearday", "hour", "minute", "second", "second_of_day")

#: h3 components, in order: mode, edge, resolution, base cell, then 15 child digits (7 past
#: the cell's resolution).
H3_COMPONENTS = ("mode", "edge", "resolution", "base_cell", *(f"cell_{i}" for i in range(1, 16)))
H3_PADDING = 7
MAX_H3_RESOLUTION = 15


def to_datetime(value: Any, datetime_format: str | None) -> datetime:
    """A cell as a datetime: a datetime or date as is; a number as a Unix timestamp (seconds,
    or milli/micro/nanoseconds by its magnitude, as Ludwig reads it); a string by
    ``datetime_format`` (strptime's codes) or, without one, any form ``dateutil`` reads.

    Raises:
        ValueError: the value cannot be read as a date.
    """
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a date")
        seconds = float(value)
        while abs(seconds) >= 1e11:  # a timestamp in ms, us or ns: Ludwig's digit-count rule
            seconds /= 1000.0
        return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(tzinfo=None)
    text = str(value).strip()
    if datetime_format is not None:
        return datetime.strptime(text, datetime_format)
    return parse_date(text)


def date_components(d: datetime) -> list[int]:
    """Ludwig's 9 components of a datetime (see :data:`DATE_COMPONENTS`)."""
    yearday = d.toordinal() - date(d.year, 1, 1).toordinal() + 1
    midnight = d.replace(hour=0, minute=0, second=0, microsecond=0)
    return [
        d.year,
        d.month,
        d.day,
        d.weekday(),
        yearday,
        d.hour,
        d.minute,
        d.second,
        (d - midnight).seconds,
    ]


def _bits(x: int, start: int, length: int) -> int:
    return (x >> start) & ((1 << length) - 1)


def h3_components(value: int) -> list[int]:
    """Ludwig's 19 components of an h3 index (see :data:`H3_COMPONENTS`)."""
    resolution = _bits(value, 64 - 12, 4)
    cells = [_bits(value, 64 - 19 - 3 * i, 3) for i in range(1, resolution + 1)]
    header = [_bits(value, 64 - 5, 4), _bits(value, 64 - 8, 3), resolution, _bits(value, 64 - 19, 7)]
    return header + cells + [H3_PADDING] * (MAX_H3_RESOLUTION - len(cells))


def to_h3(value: Any) -> int:
    """A cell as an h3 index: an integer (or a float holding one exactly), or its decimal or
    hexadecimal string (``8a2a1072b59ffff``).

    Raises:
        ValueError: the value is not an h3 index.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an h3 index")
    if isinstance(value, int):
        out = value
    elif isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{value!r} is not an h3 index")
        out = int(value)
    else:
        text = str(value).strip().lower()
        out = int(text, 10) if text.isdigit() else int(text, 16)
    if not 0 < out < 1 << 64:
        raise ValueError(f"{value!r} is not a 64-bit h3 index")
    return out
