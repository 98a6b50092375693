"""Reading a built report.html back: the figures' plotly JSON by div id, elements by id."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any


def figure(page: str, div_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(data, layout)`` of the figure drawn into ``div_id`` (the ``Plotly.newPlot`` call)."""
    match = re.search(r'Plotly\.newPlot\(\s*"' + re.escape(div_id) + r'",\s*', page)
    assert match is not None, f"no figure in #{div_id}"
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(page, match.end())
    rest = re.match(r",\s*", page[end:])
    assert rest is not None
    layout, _ = decoder.raw_decode(page, end + rest.end())
    return data, layout


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))


def elements(page: str, tag: str | None = None) -> list[tuple[str, dict[str, str]]]:
    """Every start tag of the page (``(tag, attributes)``), in order; only ``tag`` when given."""
    parser = _Elements()
    parser.feed(page)
    return [e for e in parser.elements if tag is None or e[0] == tag]


def by_id(page: str, element_id: str) -> tuple[str, dict[str, str]] | None:
    """The element with ``id`` = ``element_id``, or None."""
    return next((e for e in elements(page) if e[1].get("id") == element_id), None)
