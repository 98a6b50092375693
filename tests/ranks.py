"""Spawned ranks for the distributed tests: ``spawn_ranks`` runs a test's rank function on
``nprocs`` new processes (``torch.multiprocessing``'s ``spawn``, no Ray) and each rank that
returns ends through :func:`~ludwig_hpo.execution.local.end_spawned_rank`, as the product's
local ranks do, so a rank that used FSDP2 cannot abort in the interpreter's teardown."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp


def free_port() -> int:
    """A TCP port on loopback that was free when asked (a process group's rendezvous, a test node's port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rank(rank: int, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
    from ludwig_hpo.execution.local import end_spawned_rank

    fn(rank, *args)
    end_spawned_rank()


def spawn_ranks(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int) -> None:
    """Run ``fn(rank, *args)`` on ``nprocs`` spawned processes and wait for all of them.

    ``fn`` must be importable by name (a module-level function of a test module) and write
    what the test checks to files it closes before returning.

    Raises:
        torch.multiprocessing.ProcessRaisedException: a rank raised (its traceback attached).
        torch.multiprocessing.ProcessExitedException: a rank died without raising.
    """
    mp.start_processes(_rank, args=(fn, args), nprocs=nprocs, join=True, start_method="spawn")
