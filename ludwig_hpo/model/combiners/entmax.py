"""Sparse probability maps over the last axis: sparsemax, 1.5-entmax (exact, by sorting) and
alpha-entmax (by bisection), with their closed-form gradients (Martins and Astudillo, 2016;
Peters, Niculae and Martins, 2019). These are the functions Ludwig's TabNet selects features with.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd import Function


def _sorted_desc(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    zs = torch.sort(z, dim=-1, descending=True).values
    rho = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    return zs, rho


class _Sparsemax(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        z = x - x.amax(dim=-1, keepdim=True)
        zs, rho = _sorted_desc(z)
        cumsum = zs.cumsum(dim=-1) - 1
        support = (rho * zs > cumsum).sum(dim=-1, keepdim=True)
        tau = cumsum.gather(-1, support - 1) / support.to(z.dtype)
        y = (z - tau).clamp(min=0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        inside = y > 0
        g = grad.masked_fill(~inside, 0)
        mean = g.sum(dim=-1, keepdim=True) / inside.sum(dim=-1, keepdim=True).to(g.dtype)
        return torch.where(inside, g - mean, torch.zeros_like(g))


class _Entmax15(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        z = x / 2
        z = z - z.amax(dim=-1, keepdim=True)
        zs, rho = _sorted_desc(z)
        mean = zs.cumsum(dim=-1) / rho
        mean_sq = (zs**2).cumsum(dim=-1) / rho
        delta = (1 - rho * (mean_sq - mean**2)) / rho
        tau = mean - delta.clamp(min=0).sqrt()
        support = (tau <= zs).sum(dim=-1, keepdim=True)
        y = (z - tau.gather(-1, support - 1)).clamp(min=0) ** 2
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        s = y.sqrt()
        g = grad * s
        return g - (g.sum(dim=-1, keepdim=True) / s.sum(dim=-1, keepdim=True)) * s


class _EntmaxBisect(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, alpha: float, n_iter: int) -> torch.Tensor:
        d = x.shape[-1]
        z = x * (alpha - 1)
        top = z.amax(dim=-1, keepdim=True)
        lo = top - 1.0
        step = (top - (1.0 / d) ** (alpha - 1)) - lo
        power = 1.0 / (alpha - 1)

        def p(tau: torch.Tensor) -> torch.Tensor:
            return (z - tau).clamp(min=0) ** power

        f_lo = p(lo).sum(dim=-1, keepdim=True) - 1
        y = p(lo)
        for _ in range(n_iter):
            step = step / 2
            mid = lo + step
            y = p(mid)
            f_mid = y.sum(dim=-1, keepdim=True) - 1
            lo = torch.where(f_mid * f_lo >= 0, mid, lo)
        y = y / y.sum(dim=-1, keepdim=True)
        ctx.alpha = alpha
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (y,) = ctx.saved_tensors
        w = torch.where(y > 0, y ** (2 - ctx.alpha), torch.zeros_like(y))
        g = grad * w
        return g - (g.sum(dim=-1, keepdim=True) / w.sum(dim=-1, keepdim=True)) * w, None, None


def sparsemax(x: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of each row of ``x`` (..., d) onto the simplex: sums to 1, exact zeros."""
    return _Sparsemax.apply(x)


def entmax15(x: torch.Tensor) -> torch.Tensor:
    """1.5-entmax of each row of ``x`` (..., d), exact (sort-based)."""
    return _Entmax15.apply(x)


def entmax_bisect(x: torch.Tensor, alpha: float, n_iter: int = 50) -> torch.Tensor:
    """alpha-entmax of each row of ``x`` (..., d) for 1 < alpha <= 2 by ``n_iter`` bisection
    steps; alpha == 1 is softmax."""
    if alpha <= 1.0:
        return torch.softmax(x, dim=-1)
    return _EntmaxBisect.apply(x, alpha, n_iter)
