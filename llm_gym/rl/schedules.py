"""Learning-rate schedules as plain functions of progress, usable with ``torch.optim.lr_scheduler.LambdaLR``."""

from __future__ import annotations

import math


def cosine_schedule(step: int, total: int, start: float, end: float, warmup: int = 0) -> float:
    """Linear warm-up to ``start`` over ``warmup`` steps, then cosine decay to ``end`` at ``total``."""
    if warmup > 0 and step < warmup:
        return start * (step + 1) / warmup
    progress = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
    return end + 0.5 * (start - end) * (1 + math.cos(math.pi * progress))


def linear_schedule(step: int, total: int, start: float, end: float = 0.0) -> float:
    """Linear interpolation from ``start`` at step 0 to ``end`` at ``total`` (held after)."""
    progress = min(max(step / max(total, 1), 0.0), 1.0)
    return start + (end - start) * progress
