"""The run's picture: mean reward over iterations (the trial's, with its 95% CI, and the held-out evaluation's;
iteration 0 is the zero-shot model)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_gym.training.curves import pyplot


def plot_rewards(history: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Draw ``history`` (the per-iteration results) into ``path`` (PNG) and return it."""
    plt = pyplot("the reflection agent's reward plot", "lm")
    trials = [h for h in history if "trial" in h]
    evals = [h for h in history if "eval" in h]
    figure, axes = plt.subplots(figsize=(6, 4))
    if trials:
        axes.errorbar(
            [h["iteration"] for h in trials],
            [h["trial"]["mean_return"] for h in trials],
            yerr=[h["trial"]["ci95"] for h in trials],
            marker="o",
            capsize=3,
            label="trial (sampled, new seeds each iteration)",
        )
    if evals:
        axes.plot(
            [h["iteration"] for h in evals],
            [h["eval"]["mean_return"] for h in evals],
            marker="s",
            label="evaluation (greedy, held-out seeds)",
        )
    axes.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    axes.set_xlabel("iteration (0 = zero-shot)")
    axes.set_ylabel("mean episode reward")
    axes.set_title(f"reflection on {title}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
