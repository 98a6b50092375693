"""What one training run is asked to do (:class:`Job`) and how it hands back each epoch
(:data:`Reporter`): the hand-off between the executors and the worker loop. Plain data, and
free of torch and pandas: the Tune trial actors and the pools actor, which only pass a job on,
import this module and not the training code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from ludwig_hpo.data.preprocess import PreparedData

#: The share of a search trial's training time its checkpoint writes may take (Tune holds its
#: experiment checkpoints to 5%; a trial's share is smaller, so the worker loop stays within a
#: few percent of a plain loop together with its other costs).
CHECKPOINT_BUDGET = 0.02

#: ``report(metrics, checkpoint_dir)``: called by every rank once per epoch with the same
#: metrics (an :class:`~ludwig_hpo.train.report_keys.EpochReport` and the scores), except for
#: the ``checkpoint_*`` keys, on rank 0 only. ``checkpoint_dir`` is a
#: folder on rank 0 of a search trial when the epoch wrote a checkpoint (see ``Job``), None
#: elsewhere. It holds ``model.pt`` (``{"state_dict", "epoch"}``: the weights of the best epoch
#: so far) and ``trainer_state.pt`` (what continuing after this epoch needs). Such a report
#: carries ``checkpoint_epoch`` (the best epoch so far, whose weights ``model.pt`` holds) and
#: ``checkpoint_objective`` (its objective: what Tune and Train rank checkpoints by; it only
#: gets better from one checkpoint to the next, except after a PBT clone took a donor's best).
#: The reporter persists (copies or moves) the folder before returning: the next write
#: rewrites its files.
Reporter = Callable[[dict[str, Any], "str | None"], None]


@dataclass(frozen=True)
class Job:
    """What one training run fits and scores.

    ``search``: train on the train split, score on validation. ``fold``: train on k-1 folds
    of train+validation, score on fold ``fold`` (reported as ``validation``). ``test``: train
    on train+validation, score on the test split. ``epochs`` overrides ``trainer.epochs``
    (k-fold and test runs train for the epochs at which the search trial was best,
    so ``trainer.early_stop`` stops search runs only).

    ``resume_from``: a folder written by an earlier report of a search trial (``model.pt``
    and ``trainer_state.pt``): training continues after the epoch it was written at, with
    that epoch's weights, optimizer state, counters and random state, and its best epoch's
    weights as the best so far (a restored, retried or PBT-exploited trial).
    ``seed_offset`` is added to ``trainer.seed`` (a retried trial runs with a fresh seed).
    ``checkpoint_every``: also write a checkpoint every that many epochs from epoch
    ``checkpoint_first`` on (default: ``checkpoint_every``; PBT's perturbation epochs, the only
    writes besides the last epoch's then); 0: none besides the budget's and the last epoch's.
    ``stop_epochs``: epochs after which the scheduler may stop the trial: a checkpoint is
    written there when the best epoch changed since the last one (a stopped trial writes no more).
    ``checkpoint_budget``: the share of training time checkpoint writes may take
    (:class:`~ludwig_hpo.train.checkpoint.CheckpointBudget`). A search trial writes one at
    every epoch the budget allows (without ``checkpoint_every``), at its last epoch, at the
    ``checkpoint_every`` epochs and at ``stop_epochs`` after a better epoch;
    ``math.inf``: at every epoch. Its ``model.pt`` always holds the best epoch's weights (kept
    in memory from that epoch on), its ``trainer_state.pt`` the written epoch's state.
    """

    kind: Literal["search", "fold", "test"] = "search"
    fold: int | None = None
    epochs: int | None = None
    resume_from: str | None = None
    seed_offset: int = 0
    checkpoint_every: int = 0
    checkpoint_first: int = 0
    checkpoint_budget: float = CHECKPOINT_BUDGET
    stop_epochs: tuple[int, ...] = ()

    def rows(self, data: PreparedData) -> tuple[np.ndarray, str, np.ndarray]:
        """(training rows, name of the scored split, scored rows)."""
        if self.kind == "search":
            return data.splits["train"], "validation", data.splits["validation"]
        if self.kind == "fold":
            if self.fold is None:
                raise ValueError("a fold job needs its fold index")
            train, held_out = data.folds[self.fold]
            return train, "validation", held_out
        both = np.sort(np.concatenate([data.splits["train"], data.splits["validation"]]))
        return both, "test", data.splits["test"]
