"""The install the README gives is the one CI runs: PyTorch's CPU build from PyTorch's own
index first (PyPI's default torch for Linux is the CUDA build with several GB of NVIDIA
libraries), then the package; the nox sessions run in that environment and build none of their own."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _pip_commands(text: str) -> list[str]:
    """The pip install lines of a shell text, as ``pip install ARGS`` with ``python -m`` and
    ``-q`` dropped, in order."""
    found = []
    for line in text.splitlines():
        for part in line.split("&&"):
            part = re.sub(r"^\s*(python3? -m )?", "", part.split("#", 1)[0]).strip()
            if part.startswith("pip install"):
                found.append(" ".join(w for w in part.split() if w != "-q"))
    return found


def _readme_install() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Install and quick start\n.*?```bash\n(.*?)```", readme, re.DOTALL)
    assert block, "README.md has no '## Install and quick start' section with a bash block"
    return _pip_commands(block.group(1))


def test_readme_installs_torch_from_pytorchs_cpu_index_before_the_package() -> None:
    commands = _readme_install()
    assert len(commands) == 2, commands
    torch, package = commands
    # TORCH_SPEC (e.g. torch==2.13.0, PyPI's CUDA build) replaces the default: the CPU build
    assert re.fullmatch(rf"pip install \$\{{TORCH_SPEC:-torch==[\d.]+ --index-url {re.escape(CPU_INDEX)}\}}", torch), (
        torch
    )
    assert "+cpu" not in torch  # macOS's CPU wheel has no local version; ==X.Y.Z matches X.Y.Z+cpu on Linux
    assert package == 'pip install -e ".[dev]"'


def test_ci_runs_the_readmes_install() -> None:
    ci = _pip_commands((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    for command in _readme_install():
        assert command in ci, f".ci/run does not run the README's {command!r}; it runs {ci}"


def test_nox_sessions_run_in_the_active_environment() -> None:
    import nox.registry

    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    sessions = nox.registry.get()
    assert {"tests", "fast", "typecheck", "lint"} <= set(sessions)
    for name, func in sessions.items():
        assert func.venv_backend == "none", f"nox session {name} builds its own environment"


def test_the_dev_extra_pins_the_tools_the_sessions_run() -> None:
    dev = re.search(r"^dev = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    assert dev, "pyproject.toml has no one-line dev extra"
    for tool in ("ruff", "mypy"):
        assert re.search(rf'"{tool}==[\d.]+"', dev.group(1)), f"{tool} is not pinned in the dev extra: {dev.group(1)}"


def test_the_install_brings_what_an_llm_sweep_imports() -> None:
    # the README's install is all a user runs before `hpo sweep sweeps/llm_lora.yaml`
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    deps = re.search(r"^dependencies = \[(.*?)^\]", text, re.MULTILINE | re.DOTALL)
    assert deps, "pyproject.toml has no dependencies list"
    names = {
        re.split(r"[<>=!\[ ]", d, maxsplit=1)[0] for d in re.findall(r'^\s*"([^"]+)"', deps.group(1), re.MULTILINE)
    }
    for dist in ("torch", "transformers", "peft"):
        assert dist in names, f"{dist} is not a dependency in pyproject.toml: {sorted(names)}"
