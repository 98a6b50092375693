"""One small exception tree. User errors are shown by the CLI as one line, exit code 2.

Every class mixes in the builtin it stands for, so callers can catch either
(``except ValueError`` catches a :class:`ConfigError`). Each defines ``__reduce__`` so
that it survives pickling between Ray actors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class HpoError(Exception):
    """Base of every error ludwig_hpo raises on purpose."""


class UserError(HpoError):
    """A mistake the user can fix (config, data, paths, services); shown as one line.

    Args:
        message: what is wrong, stating the invariant and the values seen.
        source: the file (or service) concerned, e.g. ``"sweeps/digits.yaml:12:5"``.
        key: the key path concerned, e.g. ``"hyperopt.goal"``.
        fix: how to fix it, as an imperative sentence.
    """

    def __init__(
        self, message: str, *, source: str | None = None, key: str | None = None, fix: str | None = None
    ) -> None:
        self.message = message
        self.source = source
        self.key = key
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The error as one line: ``source: key: message (fix: ...)``."""
        parts = [p for p in (self.source, self.key) if p]
        text = ": ".join([*parts, self.message])
        if self.fix:
            text += f"; fix: {self.fix}"
        return " ".join(text.split())

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.source, self.key, self.fix))


def _rebuild(cls, message, source, key, fix):
    return cls(message, source=source, key=key, fix=fix)


class ConfigError(UserError, ValueError):
    """The sweep file is unreadable or invalid."""


class DataError(UserError, ValueError):
    """The dataset cannot be read or does not fit the features."""


class ResourceError(UserError, RuntimeError):
    """A trial asks for more resources than the Ray cluster can give."""


class TrackingError(UserError, RuntimeError):
    """The MLflow tracking store cannot be reached or written."""


@dataclass(frozen=True)
class WorkerLoss:
    """One rank of a trial whose process died (a lost worker), as the executor found it.

    The one home of a lost worker's text: :meth:`describe` is the message of the trial's
    :class:`WorkerLostError`, which becomes the run's ``error`` tag and the console's line.

    Attributes:
        rank: the dead rank (0-based) and ``world_size`` the trial's ranks.
        pid: its process id (0: unknown).
        node: the node it ran on (its IP address, else Ray's node id; "" unknown).
        how: how it ended, as a verb phrase: ``"was killed by signal 9 (SIGKILL)"``,
            ``"exited with code 3"``, ``"was killed by the kernel's OOM killer (SIGKILL)"``.
        during: what the group was doing: ``"training"`` or ``"start-up"``.
    """

    rank: int
    world_size: int
    pid: int = 0
    node: str = ""
    how: str = "died"
    during: str = "training"

    def describe(self) -> str:
        """``rank 1 of 2 (pid 4242) on node 10.0.0.5 was killed by signal 9 (SIGKILL) during training``."""
        pid = f" (pid {self.pid})" if self.pid else ""
        node = f" on node {self.node}" if self.node else ""
        return f"rank {self.rank} of {self.world_size}{pid}{node} {self.how} during {self.during}"


class TrialError(HpoError, RuntimeError):
    """A trial failed inside its workers (not a user input error; shown with the trial id)."""


class WorkerLostError(TrialError):
    """A process of the trial's worker group died (killed, out of memory, or exited); the
    message is its :class:`WorkerLoss`'s :meth:`~WorkerLoss.describe`.

    Args:
        loss: the dead rank, its node and how it ended.
    """

    def __init__(self, loss: WorkerLoss) -> None:
        self.loss = loss
        super().__init__(loss.describe())

    def __reduce__(self):
        return (type(self), (self.loss,))


class CheckpointError(HpoError, RuntimeError):
    """A trial's checkpoint cannot be loaded to resume it (missing files, or weights that do
    not fit the trial's model)."""


_ERR_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt)): (.+)$")


def one_line_error(text: str) -> str:
    """The most specific ``Type: message`` line of a (possibly nested, remote) traceback text."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    found = [ln for ln in lines if _ERR_LINE.match(ln)]
    for ln in reversed(found):  # the innermost user error beats Ray's wrappers
        if not ln.startswith(("ray.", "TrainingFailedError", "WorkerGroupError", "RayTaskError")):
            for wrapper in ("ludwig_hpo.errors.TrialError: ", "TrialError: "):
                ln = ln.removeprefix(wrapper)  # our own wrapper of a worker's error adds nothing
            ln = ln.removeprefix("ludwig_hpo.errors.")  # e.g. WorkerLostError: rank 1 of 2 ...
            return ln[:500]
    return (found[-1] if found else (lines[-1] if lines else "unknown error"))[:500]
