"""Ludwig's early stopping (``trainer.early_stop``): stop after that many evaluations (epochs
here) in a row without an improvement of ``validation_metric`` of ``validation_field`` on the
validation split. Every rank holds one and updates it identically (the metrics are all-reduced)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EarlyStopping:
    """The watched metric's best value and when it was reached.

    Attributes:
        patience: ``trainer.early_stop``; -1 or 0: never stop.
        larger_is_better: the direction of the watched metric.
        best: the best value so far (None before the first evaluation).
        best_epoch: the epoch it was reached at (0 before the first).
    """

    patience: int
    larger_is_better: bool = False
    best: float | None = None
    best_epoch: int = 0

    def update(self, epoch: int, value: float) -> bool:
        """Count epoch ``epoch``'s value; returns True when training should stop after it.

        As in Ludwig: an improvement is strict; a NaN value counts as 0 (so a first epoch's
        NaN still sets a best); the epochs since the best are counted from the best epoch.
        """
        if value != value:
            value = 0.0
        if self.best is None or (value > self.best if self.larger_is_better else value < self.best):
            self.best, self.best_epoch = value, epoch
        return 0 < self.patience <= epoch - self.best_epoch

    def state_dict(self) -> dict:
        """``best`` and ``best_epoch`` (saved in ``trainer_state.pt``)."""
        return {"best": self.best, "best_epoch": self.best_epoch}

    def load_state_dict(self, state: dict | None) -> None:
        """Restore :meth:`state_dict` (None: a checkpoint written without it)."""
        if state:
            self.best, self.best_epoch = state["best"], state["best_epoch"]
