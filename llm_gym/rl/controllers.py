"""Coefficients that steer themselves towards a measured target after every update, as plain functions of the
coefficient now and what the update measured (the caller keeps the coefficient, so a checkpoint carries it)."""

from __future__ import annotations

import math


def adaptive_kl_coef(coef: float, kl: float, target: float, batch: int, horizon: int) -> float:
    """Ziegler et al. 2019 (fine-tuning LMs from human preferences): proportional control of the KL coefficient, the
    error ``kl / target - 1`` clipped to [-0.2, 0.2] and applied over ``horizon`` decisions, ``batch`` at a time."""
    error = min(max(kl / target - 1.0, -0.2), 0.2)
    return coef * (1.0 + error * batch / horizon)


def adaptive_entropy_coef(coef: float, entropy: float, target: float, rate: float, low: float, high: float) -> float:
    """An entropy floor: raise the entropy bonus's coefficient while the policy's entropy is below ``target`` and
    let it fall back towards ``low`` (the configured bonus) above it, multiplicatively (the temperature update of
    SAC, Haarnoja et al. 2018, applied once per update), kept within [low, high].

    The error is relative, ``(target - entropy) / target`` clipped to [-1, 1], so one update moves the coefficient
    by at most a factor ``e ** rate`` whatever the action count."""
    error = min(max((target - entropy) / target, -1.0), 1.0)
    return min(max(coef * math.exp(rate * error), low), high)
