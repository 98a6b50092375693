"""docs/sweep-file.md's key reference is what docs/generate_reference.py renders from the schema."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "generate_reference.py"
DOC = ROOT / "docs" / "sweep-file.md"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate_reference", SCRIPT)
    assert spec is not None and spec.loader is not None, f"cannot import {SCRIPT}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sweep_file_reference_is_up_to_date() -> None:
    gen = _generator()
    written = gen.generated_part(DOC.read_text(encoding="utf-8"))
    assert written == gen.render(), (
        "docs/sweep-file.md's generated reference differs from the sweep-file schema; "
        "regenerate it with: python docs/generate_reference.py"
    )


def test_reference_covers_every_section_of_the_schema() -> None:
    from ludwig_hpo.config import SweepConfig

    gen = _generator()
    rendered = gen.render()
    for key in SweepConfig.model_json_schema()["properties"]:
        assert f"| `{key}` |" in rendered, f"top-level key {key!r} is missing from the reference"
    assert "### `trainer`" in rendered and "### `hyperopt.scheduler` · `type: pbt`" in rendered


def test_splice_replaces_only_the_generated_part() -> None:
    gen = _generator()
    text = f"intro\n{gen.START}\nold\n{gen.END}\nafter\n"
    new = gen.splice(text, "new\n")
    assert new == f"intro\n{gen.START}\nnew\n{gen.END}\nafter\n"
    assert gen.generated_part(new) == "new\n"
