"""Property: no mutation of a valid sweep file makes the loader raise anything but a
:class:`~ludwig_hpo.errors.UserError` (which the CLI prints as one line). A traceback for a user's
typo is a bug."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ludwig_hpo.config import load_sweep
from ludwig_hpo.errors import UserError

SWEEPS = sorted((Path(__file__).parents[2] / "sweeps").glob("*.yaml"))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["auto", "choice", "loguniform", "randint", "minimize", "max", "tpe", "asha", "", "."]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(tree: Any, path: tuple, op: str, value: Any, key: str) -> Any:
    if not path:
        return value if op == "replace" else tree
    parent = tree
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "replace":
        parent[last] = value
    elif op == "add_key" and isinstance(parent[last], dict):
        parent[last][key] = value
    elif op == "wrap":
        parent[last] = [parent[last]]
    return tree


def _check(path: Path) -> None:
    try:
        load_sweep(path)
    except UserError as e:
        line = e.one_line()
        assert "\n" not in line.strip(), line


@pytest.mark.parametrize("sweep", SWEEPS, ids=lambda p: p.name)
@settings(
    max_examples=int(os.environ.get("HPO_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_tree_mutations_never_raise_a_traceback(tmp_path, sweep, data):
    tree = yaml.safe_load(sweep.read_text())
    path = data.draw(st.sampled_from(_paths(tree)), label="path")
    op = data.draw(st.sampled_from(["delete", "replace", "add_key", "wrap"]), label="op")
    value = data.draw(values, label="value")
    key = data.draw(st.text(min_size=1, max_size=8), label="key")
    mutated = _mutate(tree, path, op, value, key)
    target = tmp_path / "sweep.yaml"
    target.write_text(yaml.safe_dump(mutated, allow_unicode=True, sort_keys=False))
    _check(target)


@pytest.mark.parametrize("sweep", SWEEPS, ids=lambda p: p.name)
@settings(
    max_examples=int(os.environ.get("HPO_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_text_mutations_never_raise_a_traceback(tmp_path, sweep, data):
    raw = bytearray(sweep.read_bytes())
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(raw)), label="at")
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]), label="op")
        byte = data.draw(st.sampled_from(list(b" \t\n:-[]{}&*!|>'\"#%@`,?x0.") + [0xFF, 0x00]), label="byte")
        if op == "insert":
            raw[at:at] = bytes([byte])
        elif raw and at < len(raw):
            if op == "delete":
                del raw[at]
            else:
                raw[at] = byte
    target = tmp_path / "sweep.yaml"
    target.write_bytes(bytes(raw))
    _check(target)


def test_non_finite_numbers_are_user_errors(tmp_path):
    target = tmp_path / "sweep.yaml"
    tree = yaml.safe_load(SWEEPS[0].read_text())
    tree["trainer"]["learning_rate"] = math.inf
    target.write_text(yaml.safe_dump(tree))
    _check(target)
