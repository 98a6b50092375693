"""The import graph reads top-down: a module imports only from its own layer or the layers below.

Every ``import`` in the package counts, also those inside functions (the lazy ones still tie the
modules together). The contract modules (the epoch report's keys, the MLflow layout, the errors)
sit at the bottom so that every layer can name what it writes and reads.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Lowest first. A module belongs to the most specific entry that prefixes its dotted name.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "ludwig_hpo",
        "ludwig_hpo.errors",
        "ludwig_hpo.train.report_keys",
        "ludwig_hpo.tracking.layout",
        "ludwig_hpo.tracking.names",
    ),
    ("ludwig_hpo.config",),
    ("ludwig_hpo.results",),
    ("ludwig_hpo.search", "ludwig_hpo.data", "ludwig_hpo.tracking"),
    ("ludwig_hpo.model",),
    ("ludwig_hpo.train",),
    ("ludwig_hpo.execution",),
    ("dashboards",),
    ("ludwig_hpo.driver",),
    ("ludwig_hpo.cli", "ludwig_hpo.__main__"),
)

#: Packages whose modules must stay importable without the heavy runtimes.
LIGHT = (
    "ludwig_hpo.config",
    "ludwig_hpo.results",
    "ludwig_hpo.train.report_keys",
    "ludwig_hpo.tracking.layout",
    "ludwig_hpo.tracking.names",
)
HEAVY = ("ray", "torch", "mlflow", "optuna")


def _layer(module: str) -> int:
    best, depth = -1, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and name.count(".") > depth:
                best, depth = i, name.count(".")
    return best


def _modules() -> dict[str, Path]:
    out = {}
    for package in ("ludwig_hpo", "dashboards"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from ludwig_hpo.tracking import layout`` imports the module ``ludwig_hpo.tracking.layout``
            # (and the package's ``__init__``, which imports nothing: see the last test)
            submodules = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
            found += [(node.lineno, m) for m in submodules] or [(node.lineno, node.module)]
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_nothing_above_its_layer(module):
    mine = _layer(module)
    assert mine >= 0, f"{module} is in no layer of LAYERS"
    upward = []
    for line, name in _imports(MODULES[module]):
        if name not in MODULES:  # a third-party module, or a name imported from a module
            continue
        theirs = _layer(name)
        if theirs > mine:
            upward.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {name} (layer {theirs} > {mine})")
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(LIGHT)))
def test_config_records_and_contracts_import_no_heavy_runtime(module):
    heavy = [f"line {line}: {name}" for line, name in _imports(MODULES[module]) if name.split(".")[0] in HEAVY]
    assert not heavy, f"{module} imports {heavy}"


def test_the_worker_side_does_not_import_ray():
    offenders = [
        f"{module}:{line}"
        for module in MODULES
        if module.startswith(("ludwig_hpo.train", "ludwig_hpo.model", "ludwig_hpo.data"))
        for line, name in _imports(MODULES[module])
        if name.split(".")[0] == "ray"
    ]
    assert not offenders, offenders


def test_the_package_root_holds_at_most_five_modules():
    root = sorted(p.name for p in (ROOT / "ludwig_hpo").glob("*.py"))
    assert len(root) <= 5, root


@pytest.mark.parametrize(
    "package", ["ludwig_hpo.train", "ludwig_hpo.tracking", "ludwig_hpo.driver", "ludwig_hpo.execution"]
)
def test_packages_whose_contract_modules_are_imported_everywhere_import_nothing_on_import(package):
    eager = [name for _, name in _imports(MODULES[package]) if name.startswith("ludwig_hpo")]
    assert not eager, f"{package}/__init__.py imports {eager}: importing one of its modules would load them too"


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m == "ludwig_hpo.cli" or m.startswith("ludwig_hpo.driver."))
)
def test_the_command_line_and_the_driver_are_small_modules_of_one_job(module):
    """A command's body lives in a driver module of its own; the sweep's phases hand their
    helpers to the modules whose job they are."""
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= 400, f"{module} has {lines} lines"


@pytest.mark.parametrize("module", ["ludwig_hpo.execution.pool", "ludwig_hpo.tracking.mlflow_store"])
def test_the_pools_actor_and_the_mlflow_store_are_small_modules(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= 400, f"{module} has {lines} lines"
