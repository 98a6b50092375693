"""The optimizer of ``trainer.optimizer`` and the gradient clipping of
``trainer.gradient_clipping``, as Ludwig builds and applies them. Every rank."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import torch

from ludwig_hpo.config.optimizers import GradientClippingConfig
from ludwig_hpo.config.schema import SweepConfig

_CLASSES: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "adadelta": torch.optim.Adadelta,
    "adagrad": torch.optim.Adagrad,
    "adamax": torch.optim.Adamax,
    "nadam": torch.optim.NAdam,
    "radam": torch.optim.RAdam,
    "rmsprop": torch.optim.RMSprop,
    "lbfgs": torch.optim.LBFGS,
}


def optimizer_options(cfg: SweepConfig) -> dict[str, Any]:
    """``trainer.optimizer``'s options as the torch optimizer's keyword arguments (all but
    ``type``; ``betas`` as a tuple). Pure."""
    return cfg.trainer.optimizer.model_dump(exclude={"type"})


def make_optimizer(cfg: SweepConfig, params: Any, lr: float) -> torch.optim.Optimizer:
    """``trainer.optimizer`` over ``params`` at learning rate ``lr`` (after any scaling), with
    the type's options (Ludwig's names are torch's). Every rank."""
    cls = _CLASSES[cfg.trainer.optimizer.type]
    return cls(params, lr=lr, **optimizer_options(cfg))


def set_hyperparameters(optimizer: torch.optim.Optimizer, cfg: SweepConfig, lr: float) -> None:
    """Write this trial's learning rate and optimizer options into every parameter group (a
    resumed trial keeps its moments but takes the options of its config, which PBT may have
    changed). Every rank."""
    options = optimizer_options(cfg)
    for group in optimizer.param_groups:
        group["lr"] = lr
        group.update({k: v for k, v in options.items() if k in group})


def clip_gradients(params: Iterable[torch.nn.Parameter], clip: GradientClippingConfig) -> None:
    """Ludwig's clipping, in its order: the global norm to ``clipglobalnorm``, then to
    ``clipnorm``, then each value to ``clipvalue`` (the unset ones skipped). Runs on every rank
    after the gradients are all-reduced (and unscaled), before the optimizer step."""
    if clip.clipglobalnorm is None and clip.clipnorm is None and clip.clipvalue is None:
        return
    grads = [p for p in params if p.grad is not None]
    if clip.clipglobalnorm:
        torch.nn.utils.clip_grad_norm_(grads, clip.clipglobalnorm)
    if clip.clipnorm:
        torch.nn.utils.clip_grad_norm_(grads, clip.clipnorm)
    if clip.clipvalue:
        torch.nn.utils.clip_grad_value_(grads, clip.clipvalue)


def closure_step(optimizer: torch.optim.Optimizer, loss_of: Callable[[], torch.Tensor]) -> torch.Tensor:
    """One step of an optimizer that re-evaluates the loss (``lbfgs``): ``loss_of()`` is the
    batch's loss, evaluated (with its backward pass) as often as the step asks; returns the
    first evaluation's loss (a 0-dim tensor)."""

    def closure() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of()
        loss.backward()
        return loss

    # torch's stubs type the closure as returning a float; LBFGS takes and returns the tensor
    return cast(torch.Tensor, optimizer.step(cast(Callable[[], float], closure)))
