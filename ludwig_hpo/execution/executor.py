"""Which trial executor a sweep uses (``backend.trial_executor``). Pure.

- ``fresh``: one Ray Train job (``TorchTrainer.fit()``) per trial: new worker processes for
  every trial; full isolation, and right for long GPU trials, where start-up is small next to
  training and a new process returns all device memory.
- ``pooled``: warm DDP worker groups (:mod:`ludwig_hpo.execution.pool`), one per trial slot,
  started once per sweep; saves the process start-up of every trial (seconds each), which
  dominates short CPU trials and early-stopped sweeps.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Executor = Literal["fresh", "pooled"]


class ExecutorChoice(NamedTuple):
    """The executor and why it was chosen (one line for ``hpo validate`` and the sweep's console)."""

    executor: Executor
    reason: str


def choose_executor(requested: str, *, use_gpu: bool, pbt: bool = False) -> ExecutorChoice:
    """Resolve ``backend.trial_executor`` (``auto``, ``fresh`` or ``pooled``) for a sweep.

    ``auto`` picks ``pooled`` for CPU trials (process start-up is most of a short trial) and
    ``fresh`` for GPU trials (each trial gets clean device memory; start-up is small next to
    GPU training), and ``pooled`` under the PBT scheduler, whose trials Tune pauses and
    restores from the checkpoints the pooled groups hand it.
    """
    if requested == "fresh":
        return ExecutorChoice("fresh", "backend.trial_executor: fresh (a new Ray Train job per trial)")
    if requested == "pooled":
        return ExecutorChoice("pooled", "backend.trial_executor: pooled (warm worker groups, one per trial slot)")
    if pbt:
        return ExecutorChoice(
            "pooled", "auto: PBT pauses trials and clones their checkpoints, which warm worker groups hand to Tune"
        )
    if use_gpu:
        return ExecutorChoice(
            "fresh",
            "auto: GPU trials run as a new Ray Train job each, so every trial starts "
            "with clean device memory; set backend.trial_executor: pooled to reuse processes",
        )
    return ExecutorChoice(
        "pooled",
        "auto: CPU trials run on warm worker groups started once per sweep, "
        "saving each trial's process start-up; set backend.trial_executor: fresh "
        "for a new Ray Train job per trial",
    )
