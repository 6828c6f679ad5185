"""Training callbacks. Every hook gets explicit arguments; a hook that returns False stops training."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class Callback:
    """Override the hooks you need. Agents call them in this order: start, (update, evaluation, checkpoint)*, end."""

    def on_training_start(self, env_id: str, config: Any, start_step: int) -> None:
        """Before the first rollout; ``start_step`` > 0 when resuming."""

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool | None:
        """After each optimisation phase; ``step`` counts env steps. Return False to stop."""
        return None

    def on_evaluation(self, step: int, returns: Sequence[float]) -> bool | None:
        """After a periodic evaluation with the episode returns it measured. Return False to stop."""
        return None

    def on_checkpoint(self, step: int, path: Path) -> None:
        """After a checkpoint has been written (complete) to ``path``."""

    def on_training_end(self, step: int, summary: Mapping[str, Any]) -> None:
        """After training finished or was stopped."""


def should_stop(results: Sequence[bool | None]) -> bool:
    """True when any callback returned exactly False."""
    return any(r is False for r in results)


class StopAfterSteps(Callback):
    """Stops training once ``step`` reaches ``max_steps`` (useful to cut a run short from code or tests)."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool:
        return step < self.max_steps
