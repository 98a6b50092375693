"""Developer sessions: ``nox -s tests`` (the CI command), ``fast``, ``typecheck`` and ``lint``.

``TORCH_SPEC`` chooses the torch build (default ``torch==2.13.0``, the CPU build); set it to
your own spec (e.g. ``TORCH_SPEC=torch``) to keep a CUDA build.

Every session fails on any non-zero exit code of what it runs, pytest's 5 ("no tests
collected") included: a path or marker expression that selects nothing is a failure.
"""

import os

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")
# Pinned: another version formats or types the same code differently.
RUFF_SPEC = "ruff==0.17.6"
MYPY_SPEC = "mypy==2.4.1"
LINTED = ("ludwig_hpo", "dashboards", "tests", "bench", "noxfile.py", "docs")
#: The suites for iterating: no end-to-end sweep, no bench smoke test (seconds to minutes).
FAST_SUITES = ("tests/unit", "tests/dashboards", "tests/integration")


def _install_package(session: nox.Session) -> None:
    session.install(TORCH_SPEC)
    session.install("-e", ".[dev]")


@nox.session
def tests(session: nox.Session) -> None:
    """Everything CI runs: unit, dashboards, DDP (2 gloo workers), end-to-end sweeps (real Ray +
    MLflow) and the bench scripts' smoke tests; ``gpu`` tests skip without a CUDA GPU.
    Extra arguments go to pytest."""
    _install_package(session)
    session.run("pytest", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def fast(session: nox.Session) -> None:
    """Unit, dashboards and integration tests, for iterating. Extra arguments go to pytest."""
    _install_package(session)
    session.run("pytest", "-p", "no:cacheprovider", *FAST_SUITES, *session.posargs)


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over ``ludwig_hpo`` and ``dashboards`` with the configuration in pyproject.toml
    (stricter for ``config``, ``search`` and ``results``), against the installed dependencies."""
    _install_package(session)
    session.install(MYPY_SPEC)
    session.run("mypy", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """``ruff check`` and ``ruff format --check`` on the package, the report builder, the tests,
    the benches, this file and the docs' code."""
    session.install(RUFF_SPEC)
    session.run("ruff", "check", *LINTED)
    session.run("ruff", "format", "--check", *LINTED)
