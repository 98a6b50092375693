"""Write the generated part of ``docs/sweep-file.md``: one table per section of the sweep file.

The tables come from the JSON Schema of :class:`ludwig_hpo.config.SweepConfig` (the same
schema ``hpo schema`` prints): every key, its type and allowed values, its default, and each
section's description. Only the public ``SweepConfig`` is imported, so the schema may live in
any number of modules.

Run from the repository root::

    python docs/generate_reference.py          # rewrite the part between the markers
    python docs/generate_reference.py --check  # exit 1 when the part is out of date

``tests/unit/test_docs_reference.py`` fails when the document and :func:`render` disagree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

START = "<!-- generated:start -->"
END = "<!-- generated:end -->"
DOC = Path(__file__).resolve().with_name("sweep-file.md")
REGENERATE = "python docs/generate_reference.py"


def sweep_schema() -> dict[str, Any]:
    """The sweep file's JSON Schema."""
    from ludwig_hpo.config import SweepConfig

    return SweepConfig.model_json_schema()


# ---------------------------------------------------------------------------- walking the schema
class Step:
    """One step of a path into the file: a key (``trainer``), list items (``input_features[]``)
    or a map's values (``<path>``), and, for a member of a tagged union, its tag
    (``type: dense``)."""

    def __init__(self, key: str, tag: str = "") -> None:
        self.key = key
        self.tag = tag


class Section:
    """A table: one object of the schema (a ``$defs`` entry, or the root, ``ref`` empty)."""

    def __init__(self, ref: str, steps: list[Step]) -> None:
        self.ref = ref
        self.steps = steps
        self.also: list[list[Step]] = []
        self.heading = ""
        self.anchor = ""


def _ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _union_members(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list(node.get("oneOf") or node.get("anyOf") or [])


def _tags(node: dict[str, Any]) -> dict[str, str]:
    """``$defs`` name -> its tag text (``type: dense``) for a tagged union."""
    disc = node.get("discriminator") or {}
    prop = disc.get("propertyName")
    out: dict[str, list[str]] = {}
    for value, ref in (disc.get("mapping") or {}).items():
        out.setdefault(ref.rsplit("/", 1)[-1], []).append(str(value))
    return {name: f"{prop}: {' | '.join(sorted(values))}" for name, values in out.items()}


def _children(node: dict[str, Any], key: str) -> list[tuple[str, list[Step]]]:
    """The ``$defs`` a property's schema leads to, with the steps from the property to each."""
    found: list[tuple[str, list[Step]]] = []

    def walk(n: dict[str, Any], steps: list[Step], tag: str = "") -> None:
        name = _ref_name(n)
        if name:
            found.append((name, steps[:-1] + [Step(steps[-1].key, tag)]))
            return
        tags = _tags(n)
        for member in _union_members(n):
            walk(member, steps, tags.get(_ref_name(member) or "", tag))
        if isinstance(n.get("items"), dict):
            walk(n["items"], steps[:-1] + [Step(steps[-1].key + "[]")], tag)
        if isinstance(n.get("additionalProperties"), dict):
            inner = "<path>" if key == "parameters" else "<key>"
            walk(n["additionalProperties"], steps + [Step(inner)], tag)

    walk(node, [Step(key)])
    return found


def _sections(schema: dict[str, Any]) -> list[Section]:
    """Every object of the schema once, in reading order (depth first, keys in file order)."""
    defs = schema.get("$defs", {})
    root = Section("", [])
    order: list[Section] = [root]
    by_ref: dict[str, Section] = {}

    def visit(node: dict[str, Any], steps: list[Step]) -> None:
        for key, prop in node.get("properties", {}).items():
            for name, rel in _children(prop, key):
                path = steps + rel
                if name in by_ref:
                    by_ref[name].also.append(path)
                    continue
                section = by_ref[name] = Section(name, path)
                order.append(section)
                visit(defs.get(name, {}), path)

    visit(schema, [])
    _name_sections(order)
    return order


def _path_text(steps: list[Step], tags: bool) -> str:
    text = ""
    for i, s in enumerate(steps):
        sep = "" if i == 0 or s.key.startswith("[") else "."
        text += sep + s.key
        if tags and s.tag and i < len(steps) - 1:
            text += f" ({s.tag})"
    return text


def _heading(steps: list[Step]) -> str:
    if not steps:
        return "Top level"
    text = f"`{_path_text(steps, tags=True)}`"
    return text + (f" · `{steps[-1].tag}`" if steps[-1].tag else "")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "top-level"


def _name_sections(sections: list[Section]) -> None:
    """Headings and anchors (the anchors are explicit, so links do not depend on the renderer)."""
    used: set[str] = set()
    for s in sections:
        s.heading = _heading(s.steps)
        base = _slug(_path_text(s.steps, tags=True) + " " + (s.steps[-1].tag if s.steps else ""))
        anchor, n = base, 1
        while anchor in used:
            n += 1
            anchor = f"{base}-{n}"
        used.add(anchor)
        s.anchor = "ref-" + anchor


# ---------------------------------------------------------------------------- cells
def _value(v: Any) -> str:
    """A value as YAML flow text."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v if v and re.fullmatch(r"[A-Za-z0-9_.:/<>+-]+", v) else json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(v)


def _code(v: Any) -> str:
    return "`" + _value(v) + "`"


def _bounds(node: dict[str, Any]) -> str:
    lo = hi = None
    if "minimum" in node:
        lo = ("[", node["minimum"])
    elif "exclusiveMinimum" in node:
        lo = ("(", node["exclusiveMinimum"])
    if "maximum" in node:
        hi = ("]", node["maximum"])
    elif "exclusiveMaximum" in node:
        hi = (")", node["exclusiveMaximum"])
    if lo and hi:
        return f" in {lo[0]}{_value(lo[1])}, {_value(hi[1])}{hi[0]}"
    if lo:
        return f" {'≥' if lo[0] == '[' else '>'} {_value(lo[1])}"
    if hi:
        return f" {'≤' if hi[0] == ']' else '<'} {_value(hi[1])}"
    return ""


def _type(node: dict[str, Any], links: dict[str, Section], key: str = "") -> str:
    """What a key takes, in words, with links to the sections of nested objects."""
    name = _ref_name(node)
    if name:
        s = links.get(name)
        return f"[{s.heading}](#{s.anchor})" if s else name
    if "const" in node:
        return _code(node["const"])
    if "enum" in node:
        return " \\| ".join(_code(v) for v in node["enum"])
    members = _union_members(node)
    if members:
        prop = (node.get("discriminator") or {}).get("propertyName")
        nullable = any(m.get("type") == "null" for m in members)
        rest = [m for m in members if m.get("type") != "null"]
        if prop:
            tags = _tags(node)

            def member(m: dict[str, Any]) -> str:
                name = _ref_name(m) or ""
                if name not in links or name not in tags:
                    return _type(m, links)
                return f"[`{tags[name].split(': ', 1)[1]}`](#{links[name].anchor})"

            inner = ", ".join(member(m) for m in rest)
            text = f"one of, by `{prop}`: {inner}"
        else:
            text = " or ".join(_type(m, links, key) for m in rest)
        return text + (" or `null`" if nullable else "")
    kind = node.get("type")
    if kind == "array":
        if "prefixItems" in node:
            return "[" + ", ".join(_type(m, links) for m in node["prefixItems"]) + "]"
        items = node.get("items")
        inner = _type(items, links, key) if isinstance(items, dict) and items else "any value"
        at_least = f" (at least {node['minItems']})" if node.get("minItems") else ""
        return f"list{at_least}, each: {inner}"
    if kind == "object":
        if "properties" in node:
            return "{" + ", ".join(f"`{k}`" for k in node["properties"]) + "}"
        extra = node.get("additionalProperties")
        what = "parameter path" if key == "parameters" else "key"
        at_least = f" (at least {node['minProperties']})" if node.get("minProperties") else ""
        if isinstance(extra, dict) and extra:
            return f"map{at_least} of {what} → {_type(extra, links, key)}"
        return f"map{at_least} of {what} → value"
    if kind == "string":
        return "string" + (" (not empty)" if node.get("minLength") else "")
    if kind in ("integer", "number"):
        return str(kind) + _bounds(node)
    if kind == "boolean":
        return "`true` \\| `false`"
    if kind == "null":
        return "`null`"
    return "any value" if not node else str(kind or "any value")


def _own_defaults(defs: dict[str, Any], name: str) -> dict[str, Any]:
    props = defs.get(name, {}).get("properties", {})
    return {k: p["default"] for k, p in props.items() if "default" in p}


def _default(node: dict[str, Any], required: bool, defs: dict[str, Any]) -> str:
    if required:
        return "required"
    if "default" not in node:
        return ""
    d = node["default"]
    refs = [n for n in [_ref_name(node)] + [_ref_name(m) for m in _union_members(node)] if n]
    if isinstance(d, dict) and len(refs) == 1:
        own = _own_defaults(defs, refs[0])
        if all(own.get(k) == v for k, v in d.items()) and all(own[k] is None for k in own.keys() - d.keys()):
            return "each key's default"
    return _code(d)


def _prose(text: str | None) -> str:
    """A docstring as Markdown: reST literals become code, lines within a paragraph join."""
    if not text:
        return ""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    paragraphs = [" ".join(line.strip() for line in p.splitlines()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(p for p in paragraphs if p)


def _cell(text: str) -> str:
    """Table-cell text: one line, every ``|`` escaped."""
    return re.sub(r"(?<!\\)\|", r"\\|", text.replace("\n", " "))


# ---------------------------------------------------------------------------- the document
def render(schema: dict[str, Any] | None = None) -> str:
    """The generated part of ``docs/sweep-file.md`` (without the markers)."""
    schema = sweep_schema() if schema is None else schema
    defs = schema.get("$defs", {})
    sections = _sections(schema)
    links = {s.ref: s for s in sections if s.ref}
    out: list[str] = []
    for s in sections:
        node = schema if not s.ref else defs.get(s.ref, {})
        out.append(f'<a id="{s.anchor}"></a>')
        out.append("")
        out.append(f"### {s.heading}")
        out.append("")
        description = _prose(node.get("description")) if s.ref else ""
        if description:
            out += [description, ""]
        if s.also:
            places = [f"`{_path_text(p, tags=True)}`" + (f" (`{p[-1].tag}`)" if p[-1].tag else "") for p in s.also]
            out += ["Also at: " + ", ".join(places) + ".", ""]
        props = node.get("properties", {})
        required = set(node.get("required", []))
        notes = any("description" in p for p in props.values())
        out.append("| key | takes | default |" + (" notes |" if notes else ""))
        out.append("|---|---|---|" + ("---|" if notes else ""))
        for key, p in props.items():
            row = [f"`{key}`", _cell(_type(p, links, key)), _cell(_default(p, key in required, defs))]
            if notes:
                row.append(_cell(_prose(p.get("description"))))
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def splice(text: str, block: str) -> str:
    """``text`` with the part between the markers replaced by ``block``."""
    start, end = text.index(START) + len(START), text.index(END)
    return text[:start] + "\n" + block + text[end:]


def generated_part(text: str) -> str:
    """The part of ``text`` between the markers, as :func:`render` writes it."""
    if START not in text or END not in text:
        raise ValueError(f"the markers {START} and {END} are missing")
    return text[text.index(START) + len(START) : text.index(END)].removeprefix("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/sweep-file.md is out of date")
    args = ap.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    block = render()
    if args.check:
        if generated_part(text) != block:
            print(f"{DOC.name} is out of date; regenerate it with: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    new = splice(text, block)
    if new != text:
        DOC.write_text(new, encoding="utf-8")
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
