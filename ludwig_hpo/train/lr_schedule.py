"""Ludwig's learning-rate schedule (``trainer.learning_rate_scheduler``), stepped per optimizer
step, with its reduction on plateaus stepped per evaluation (here: per epoch). Every rank holds
one and steps it identically (the watched metrics are all-reduced).

The rate of a step is a pure function of the step count, the base rate and the number of
plateau reductions so far, so a resumed trial (whose base rate PBT may have changed) continues
the same schedule from its saved step count; only the plateau counters are saved state.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from ludwig_hpo.config.trainer import LRSchedulerConfig

#: torch's ``ReduceLROnPlateau`` default, which Ludwig keeps: an improvement beats the best by
#: this share of it (``best * (1 - threshold)`` when smaller is better).
PLATEAU_THRESHOLD = 1e-4


@dataclass
class PlateauState:
    """What reducing on plateaus remembers between evaluations (saved in ``trainer_state.pt``)."""

    best: float | None = None
    bad_epochs: int = 0
    reductions: int = 0


class LearningRateSchedule:
    """The learning rate of each optimizer step of one trial.

    Args:
        config: ``trainer.learning_rate_scheduler``.
        base_lr: ``trainer.learning_rate`` after ``learning_rate_scaling``.
        steps_per_epoch: optimizer steps in one epoch (Ludwig's steps per checkpoint).
        total_steps: optimizer steps of the whole run (``train_steps``, else epochs x steps per epoch).
        larger_is_better: the direction of ``reduce_eval_metric``.
    """

    def __init__(
        self,
        config: LRSchedulerConfig,
        base_lr: float,
        steps_per_epoch: int,
        total_steps: int,
        *,
        larger_is_better: bool = False,
    ) -> None:
        self.config = config
        self.base_lr = base_lr
        self.steps_per_epoch = max(1, steps_per_epoch)
        self.total_steps = max(1, total_steps)
        self.larger_is_better = larger_is_better
        self.plateau = PlateauState()
        warmup = max(config.warmup_fraction * self.total_steps, config.warmup_evaluations * self.steps_per_epoch)
        # Ludwig keeps a fractional warmup length: the rate climbs by 1 / length per step, the
        # decay begins at the first whole step past it, and linear decay spans total - length.
        self.warmup_length = float(warmup)
        self.warmup_steps = math.ceil(warmup) if warmup > 0 else 0

    def _decay(self, step: int) -> float:
        """The decay factor ``step`` steps after the warmup ended."""
        c = self.config
        if c.decay == "linear":
            span = self.total_steps - self.warmup_length
            return max(0.0, (span - step) / max(1.0, span))
        if c.decay == "exponential":
            exponent = 1 + step / c.decay_steps
            return c.decay_rate ** (math.ceil(exponent) if c.staircase else exponent)
        return 1.0

    def _cosine(self, step: int, top: float) -> float:
        c = self.config
        t_0 = c.t_0 or self.steps_per_epoch
        if c.t_mult == 1:
            t_cur, t_i = step % t_0, t_0
        else:  # periods t_0, t_0 * t_mult, ...: whole-number steps (a logarithm would round at the edges)
            t_cur, t_i = step, t_0
            while t_cur >= t_i:
                t_cur, t_i = t_cur - t_i, t_i * c.t_mult
        return c.eta_min + (top - c.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2

    def lr_at(self, step: int) -> float:
        """The learning rate of the optimizer step after ``step`` steps (step 0: the first). Pure."""
        scale = self.config.reduce_on_plateau_rate**self.plateau.reductions if self.plateau.reductions else 1.0
        if step < self.warmup_steps:
            return self.base_lr * step / max(1.0, self.warmup_length) * scale
        after = step - self.warmup_steps
        if self.config.decay == "cosine":
            return self._cosine(after, self.base_lr) * scale
        return self.base_lr * self._decay(after) * scale

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set every parameter group's rate to :meth:`lr_at` ``(step)``; returns it."""
        lr = self.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def evaluation(self, value: float) -> bool:
        """Count one evaluation of the watched metric (``reduce_on_plateau > 0`` only, as
        torch's ``ReduceLROnPlateau`` with Ludwig's cap on the reductions); returns whether the
        rate was reduced."""
        p, c = self.plateau, self.config
        if c.reduce_on_plateau <= 0 or p.reductions >= c.reduce_on_plateau:
            return False
        if self.larger_is_better:
            improved = p.best is None or value > p.best * (1 + PLATEAU_THRESHOLD)
        else:
            improved = p.best is None or value < p.best * (1 - PLATEAU_THRESHOLD)
        improved = improved and value == value  # NaN never improves
        if improved:
            p.best, p.bad_epochs = value, 0
            return False
        p.bad_epochs += 1
        if p.bad_epochs > c.reduce_on_plateau_patience:
            p.reductions, p.bad_epochs = p.reductions + 1, 0
            return True
        return False

    def state_dict(self) -> dict:
        """The plateau counters (the rest follows from the config and the step count)."""
        return asdict(self.plateau)

    def load_state_dict(self, state: dict | None) -> None:
        """Restore :meth:`state_dict`'s counters (None: a checkpoint written without them)."""
        if state:
            self.plateau = PlateauState(**state)
