"""Optimizers and the learning-rate schedule, with the official ALBERT semantics.

- `Lamb`: google-research/albert `lamb_optimizer.py`: Adam moments, eps 1e-6, decoupled weight decay folded into
  the update, then the layer-wise trust ratio ||w|| / ||update||. The official code has no Adam bias correction;
  `bias_correction=True` adds it (the LAMB paper's Algorithm 2): docs/recipes.md, "Why pretraining collapsed".
- `build_optimizer`: two parameter groups (decayed + adapted, and excluded) for LAMB or AdamW.
- `warmup_poly_decay` / `make_scheduler`: official `optimization.create_optimizer` schedule.
- `BudgetSchedule`: the same shape over the fraction of a budget used (tokens or wall clock), so a run that stops
  at its budget has finished its warm-up and decay.

Gradient clipping is `torch.nn.utils.clip_grad_norm_(params, 1.0)` (global norm, as official); nothing to add.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from litebert.errors import ConfigError, TrainingError

OPTIMIZERS = ("lamb", "adamw", "adamw_official")


class Lamb(torch.optim.Optimizer):
    """LAMB exactly as the official TF optimizer, vectorised with `torch._foreach_*` ops.

    Per parameter w with gradient g, at its t-th update:
        m = b1 m + (1 - b1) g
        v = b2 v + (1 - b2) g^2
        u = m / (sqrt(v) + eps) + weight_decay * w                        (official: no bias correction)
        u = m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * w  (bias_correction=True)
        r = ||w|| / ||u||, or 1 when either norm is 0; r = 1 when the group has adapt=False
        w = w - lr * r * u
    Group keys: lr, betas, eps, weight_decay (0 turns decay off), adapt (the trust ratio on/off), bias_correction.
    With adapt=False and no bias correction everywhere this is the official AdamWeightDecayOptimizer.

    What bias correction changes for the parameters without a trust ratio (biases, LayerNorm): uncorrected, a
    steady gradient moves them by (1 - b1^t) / sqrt(1 - b2^t) times lr per step: 3.2x at t = 1, 6.5x at t = 10,
    3.3x at t = 100, 1.3x at t = 1,000. The official recipe warms up over 3,125 steps, so that early surge meets a
    tiny lr; a short warm-up meets it at the peak lr. Under the trust ratio the factor cancels (the update is
    rescaled to lr * ||w||), so adapted tensors are unaffected. Measured (docs/recipes.md): it delays albert-base's
    collapse at lr 1.76e-3 by about ten updates; the batch-scaled lr (`lamb_lr_for_batch`) is what avoids it.
    The state (`exp_avg`, `exp_avg_sq`) has the parameter's dtype: keep fp32 master weights under bf16 autocast.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.01, adapt: bool = True, bias_correction: bool = False):
        if lr < 0:
            raise ConfigError(f"lr: must be >= 0, got {lr}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ConfigError(f"betas: each must be in [0, 1), got {betas}")
        if eps < 0 or weight_decay < 0:
            raise ConfigError(f"eps and weight_decay must be >= 0, got eps={eps}, weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=adapt,
                                      bias_correction=bias_correction))

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            # foreach kernels want one device and dtype per call, so split the group (normally one bucket).
            buckets: dict[tuple, list[list[torch.Tensor]]] = defaultdict(lambda: [[], [], [], []])
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise TrainingError("Lamb does not support sparse gradients (use a dense nn.Embedding)")
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                t = 0  # the official update keeps no count; with bias correction, its t (a host tensor, as torch's
                if group.get("bias_correction"):  # Adam keeps it: no device sync to read it)
                    state["step"] = state.get("step", torch.tensor(0.0)) + 1
                    t = int(state["step"].item())
                bucket = buckets[(p.device, p.dtype, t)]
                for lst, t in zip(bucket, (p, p.grad, state["exp_avg"], state["exp_avg_sq"])):
                    lst.append(t)
            beta1, beta2 = group["betas"]
            for (_, _, t), (params, grads, exp_avgs, exp_avg_sqs) in buckets.items():
                _lamb_update(params, grads, exp_avgs, exp_avg_sqs, lr=group["lr"], beta1=beta1, beta2=beta2,
                             eps=group["eps"], weight_decay=group["weight_decay"], adapt=group["adapt"], step=t)
        return loss


def _lamb_update(params: list[torch.Tensor], grads: list[torch.Tensor], exp_avgs: list[torch.Tensor],
                 exp_avg_sqs: list[torch.Tensor], *, lr: float, beta1: float, beta2: float, eps: float,
                 weight_decay: float, adapt: bool, step: int = 0) -> None:
    """One LAMB step over tensors of one device and dtype. No host-device sync: ratios stay on the device.
    `step` > 0: bias-correct the moments as at that update count (0: the official update, uncorrected)."""
    torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)  # m = b1 m + (1 - b1) g
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)  # v = b2 v + (1 - b2) g^2
    denom = torch._foreach_sqrt(exp_avg_sqs)
    if step > 0:  # sqrt(v / (1 - b2^t)) + eps, and m / (1 - b1^t) below
        torch._foreach_div_(denom, math.sqrt(1.0 - beta2 ** step))
    torch._foreach_add_(denom, eps)
    updates = torch._foreach_div(exp_avgs, denom)  # m / (sqrt(v) + eps)
    if step > 0:
        torch._foreach_div_(updates, 1.0 - beta1 ** step)
    del denom
    if weight_decay != 0:
        torch._foreach_add_(updates, params, alpha=weight_decay)
    if adapt:
        w_norm = torch.stack(torch._foreach_norm(params))  # [n_tensors]
        u_norm = torch.stack(torch._foreach_norm(updates))  # [n_tensors]
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        torch._foreach_mul_(updates, ratio.unbind(0))
    torch._foreach_add_(params, updates, alpha=-lr)


def no_decay(name: str, param: torch.Tensor) -> bool:
    """True when a parameter gets neither weight decay nor the LAMB trust ratio.

    The official lists are `["LayerNorm", "layer_norm", "bias"]`, matched against variable names. Our model names
    its LayerNorms `norm` / `*_norm`, so "norm" is matched case-insensitively (which also covers "LayerNorm" and
    "layer_norm"). Every 1-D parameter is excluded as well: in ALBERT the 1-D parameters are exactly the LayerNorm
    gains/biases and the Linear/decoder biases, so the shape rule gives the official split under any naming
    (converted or renamed modules) and agrees with the name rule on official and Hugging Face names.
    """
    lowered = name.lower()
    return param.ndim <= 1 or "norm" in lowered or "bias" in lowered


PROJECTION = "encoder.project_in."  # the E -> H embedding projection's parameters (model.Encoder.project_in)


def param_groups(model: nn.Module, weight_decay: float = 0.01, untrained: tuple[str, ...] = (),
                 projection_lr_scale: float = 1.0) -> list[dict[str, Any]]:
    """[decayed + adapted params, excluded params]; both groups are always present so their indices are stable.

    Shared (ALBERT) and tied parameters appear once: `named_parameters` de-duplicates them. Parameters whose names
    start with one of `untrained` are left out: the loss gives them zero gradients, and weight decay alone would
    still move them (under LAMB's trust ratio a pure-decay update is a step of lr * w, which erases a tensor in a
    few thousand steps). With `projection_lr_scale` != 1 the E -> H projection's weight and bias get groups of
    their own after those two ("decay_projection", "no_decay_projection"), carrying `lr_scale`: the caller's lr
    times it is theirs (docs/recipes.md, "What the model has not learned").
    """
    decay, excluded, decay_proj, excluded_proj = [], [], [], []
    for name, p in model.named_parameters():
        if p.requires_grad and not name.startswith(untrained):
            projection = projection_lr_scale != 1.0 and PROJECTION in name
            if no_decay(name, p):
                (excluded_proj if projection else excluded).append(p)
            else:
                (decay_proj if projection else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": weight_decay, "adapt": True, "name": "decay"},
        {"params": excluded, "weight_decay": 0.0, "adapt": False, "name": "no_decay"},
    ]
    if decay_proj or excluded_proj:
        groups += [
            {"params": decay_proj, "weight_decay": weight_decay, "adapt": True, "name": "decay_projection",
             "lr_scale": projection_lr_scale},
            {"params": excluded_proj, "weight_decay": 0.0, "adapt": False, "name": "no_decay_projection",
             "lr_scale": projection_lr_scale},
        ]
    return groups


def build_optimizer(model: nn.Module, name: str = "lamb", *, lr: float, weight_decay: float = 0.01,
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6, untrained: tuple[str, ...] = (),
                    no_decay_lr_scale: float = 1.0, bias_correction: bool = False,
                    projection_lr_scale: float = 1.0) -> torch.optim.Optimizer:
    """The optimizer with the `param_groups` (`untrained`: name prefixes left out, see there).

    `no_decay_lr_scale` multiplies the learning rate of the excluded group (biases and LayerNorm parameters,
    which get no trust ratio under LAMB, so the full lr moves each of their elements by about lr per step).
    `projection_lr_scale` multiplies the E -> H projection's (on top of that, for its bias). 1.0 is the official
    optimizer. The scales live in the groups' lr, so a schedule scales every group alike.
    `bias_correction` (lamb, adamw_official): Adam's bias-corrected moments (`Lamb`); torch's AdamW always has them.

    - "lamb": `Lamb` (official pretraining optimizer).
    - "adamw": `torch.optim.AdamW` (fused on CUDA). Note it applies Adam bias correction, unlike official.
    - "adamw_official": the official AdamWeightDecayOptimizer (no bias correction) = `Lamb` without trust ratio.
    """
    for field, scale in (("no_decay_lr_scale", no_decay_lr_scale), ("projection_lr_scale", projection_lr_scale)):
        if not (scale >= 0 and math.isfinite(scale)):
            raise ConfigError(f"{field}: must be a number >= 0, got {scale}")
    groups = param_groups(model, weight_decay, untrained, projection_lr_scale)
    for group in groups:  # "decay" takes the optimizer's default lr
        scale = group.pop("lr_scale", 1.0) * (no_decay_lr_scale if not group["adapt"] else 1.0)
        if group["name"] != "decay":
            group["lr"] = lr * scale
    if name == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps, bias_correction=bias_correction)
    if name == "adamw_official":
        for group in groups:
            group["adapt"] = False
        return Lamb(groups, lr=lr, betas=betas, eps=eps, bias_correction=bias_correction)
    if name == "adamw":
        on_cuda = all(p.is_cuda for g in groups for p in g["params"])
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True if on_cuda else None)
    raise ConfigError(f"optimizer: unknown name {name!r}; choose one of {', '.join(OPTIMIZERS)}")


OFFICIAL_LR, OFFICIAL_BATCH = 0.00176, 4096  # the paper's LAMB recipe for ALBERT


def lamb_lr_for_batch(batch_size: int) -> float:
    """The paper's peak lr (0.00176 at batch 4096) moved to `batch_size` by LAMB's square-root scaling rule (You et
    al. 2020): 4.4e-4 at batch 256. The official lr at a small batch is several times too high: albert-base at batch
    256 collapsed within 100 updates under it (issue 43, docs/recipes.md "Why pretraining collapsed")."""
    return OFFICIAL_LR * math.sqrt(batch_size / OFFICIAL_BATCH)


def _check_schedule(warmup_steps: int, total_steps: int, power: float) -> None:
    if total_steps < 1:
        raise ConfigError(f"total_steps: must be >= 1, got {total_steps}")
    if warmup_steps < 0:
        raise ConfigError(f"warmup_steps: must be >= 0, got {warmup_steps}")
    if power <= 0:
        raise ConfigError(f"power: must be > 0, got {power}")


def warmup_poly_decay(step: int, *, warmup_steps: int, total_steps: int, peak_lr: float, power: float = 1.0,
                      end_lr: float = 0.0) -> float:
    """Learning rate at `step` (0-based: the lr the step-th optimizer update uses), as official.

    Polynomial decay runs from step 0 (not from the end of warm-up) to `total_steps`; warm-up then overrides
    the first `warmup_steps` steps with peak * step / warmup. So step 0 has lr 0, and at step == warmup_steps
    the lr drops from the ramp onto the decay curve, peak * (1 - warmup/total)^power. Hugging Face's
    `get_polynomial_decay_schedule_with_warmup` differs: it starts the decay after warm-up.
    """
    _check_schedule(warmup_steps, total_steps, power)
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    progress = min(step, total_steps) / total_steps
    return (peak_lr - end_lr) * (1.0 - progress) ** power + end_lr


def make_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int,
                   power: float = 1.0) -> torch.optim.lr_scheduler.LambdaLR:
    """`warmup_poly_decay` as a LambdaLR factor on each group's lr. Call `scheduler.step()` after each update.

    The factor is a `functools.partial`, so `state_dict()` stores only positions (last_epoch, base_lrs), never
    the schedule arguments: a resumed run uses the schedule it was built with.
    """
    _check_schedule(warmup_steps, total_steps, power)
    factor = functools.partial(warmup_poly_decay, warmup_steps=warmup_steps, total_steps=total_steps,
                               peak_lr=1.0, power=power)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def budget_factor(progress: float, warmup_fraction: float, power: float = 1.0) -> float:
    """`warmup_poly_decay`'s factor (peak 1, end 0) at `progress`, the fraction of the run done in [0, 1]:
    warmup_poly_decay(step, warmup_steps=w, total_steps=n) == budget_factor(step / n, w / n)."""
    progress = min(max(progress, 0.0), 1.0)
    if progress < warmup_fraction:
        return progress / warmup_fraction
    return (1.0 - progress) ** power


class BudgetSchedule:
    """Warm-up and polynomial decay that follow the fraction of a budget used instead of the step count.

    A run bounded by tokens or wall clock does not know its step count in advance; `step(progress)` (the
    training loop calls it once a step's tokens and time are known) sets every group's lr to its base lr x
    `budget_factor(progress)`, so the lr reaches the schedule's end (0) when the budget is spent. A bare
    `step()` (what the shared training step calls after each update for a step-counted schedule) leaves the lr
    as it is. `state_dict()` holds the progress and the base lrs: a resume sets the same lr.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, warmup_fraction: float, power: float = 1.0):
        if not 0.0 <= warmup_fraction <= 1.0:
            raise ConfigError(f"warmup_fraction: must be in [0, 1], got {warmup_fraction}")
        _check_schedule(0, 1, power)
        self.optimizer, self.warmup_fraction, self.power = optimizer, warmup_fraction, power
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.progress = 0.0
        self._apply()

    def _apply(self) -> None:
        factor = budget_factor(self.progress, self.warmup_fraction, self.power)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor

    def step(self, progress: float | None = None) -> None:
        if progress is not None:
            self.progress = min(max(float(progress), 0.0), 1.0)
            self._apply()

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"progress": self.progress, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.progress, self.base_lrs = float(state["progress"]), [float(x) for x in state["base_lrs"]]
        self._apply()
