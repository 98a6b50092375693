"""Developer sessions: ``nox -s tests`` (the CI command), ``fast``, ``typecheck`` and ``lint``.

Every session runs in the active environment, the one the README's install commands made
(torch first, then ``pip install -e ".[dev]"``, which brings the pinned pytest, ruff, mypy and
nox): nothing is installed and no second copy of torch, Ray and MLflow is built. A session
started outside that environment fails at once and says so.

Every session fails on any non-zero exit code of what it runs, pytest's 5 ("no tests
collected") included: a path or marker expression that selects nothing is a failure.
"""

import shutil

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]

LINTED = ("ludwig_hpo", "dashboards", "tests", "bench", "noxfile.py", "docs")
#: The suites for iterating: no end-to-end sweep, no bench smoke test (seconds to minutes).
FAST_SUITES = ("tests/unit", "tests/dashboards", "tests/integration")
_ACTIVATE = "activate the environment of the README (. .venv/bin/activate) or run its install commands first"
#: Fails, naming what is missing, unless the active environment imports what the sessions run.
_CHECK_ENVIRONMENT = (
    "import importlib.util, sys; "
    "missing = [m for m in ('torch', 'ludwig_hpo', 'pytest', 'mypy', 'ruff') if importlib.util.find_spec(m) is None]; "
    "sys.exit(f'not installed in this environment ({sys.prefix}): {\", \".join(missing)}; ' + sys.argv[1] if missing else 0)"
)


def _check_environment(session: nox.Session) -> None:
    if shutil.which("python") is None:
        session.error(f"no python on PATH: {_ACTIVATE}")
    session.run("python", "-c", _CHECK_ENVIRONMENT, _ACTIVATE, silent=True)


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Everything CI runs: unit, dashboards, DDP (2 gloo workers), end-to-end sweeps (real Ray +
    MLflow) and the bench scripts' smoke tests; ``gpu`` tests skip without a CUDA GPU.
    Extra arguments go to pytest."""
    _check_environment(session)
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", *session.posargs)


@nox.session(venv_backend="none")
def fast(session: nox.Session) -> None:
    """Unit, dashboards and integration tests, for iterating. Extra arguments go to pytest."""
    _check_environment(session)
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", *FAST_SUITES, *session.posargs)


@nox.session(venv_backend="none")
def typecheck(session: nox.Session) -> None:
    """mypy over ``ludwig_hpo`` and ``dashboards`` with the configuration in pyproject.toml
    (stricter for ``config``, ``search`` and ``results``), against the installed dependencies."""
    _check_environment(session)
    session.run("python", "-m", "mypy", *session.posargs)


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """``ruff check`` and ``ruff format --check`` on the package, the report builder, the tests,
    the benches, this file and the docs' code."""
    _check_environment(session)
    session.run("python", "-m", "ruff", "check", *LINTED)
    session.run("python", "-m", "ruff", "format", "--check", *LINTED)
