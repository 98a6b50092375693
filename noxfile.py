"""Developer sessions: ``nox -s tests`` (the CI command) and ``nox -s lint``.

``TORCH_SPEC`` chooses the torch build (default ``torch==2.13.0``, the CPU build); set it to
your own spec (e.g. ``TORCH_SPEC=torch``) to keep a CUDA build.
"""

import os

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")


@nox.session
def tests(session: nox.Session) -> None:
    """The default suite: unit, DDP (2 gloo workers) and end-to-end sweeps (real Ray + MLflow).

    pytest's exit code 5 ("no tests collected") fails the session like any other failure.
    """
    session.install(TORCH_SPEC)
    session.install("-e", ".[dev]")
    session.run("pytest", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the package, the report builder and the tests."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", "ludwig_hpo", "dashboards", "tests", "noxfile.py")
