"""``llm-gym play --task-ids``: which task each episode plays, and the per-game report (win rate, mean score)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_gym.evaluation import EpisodeResult
from llm_gym.stats import mean_ci95, wilson_ci95
from llm_gym.tasks import TaskRange, UniformTaskSampler


def episode_task_ids(tasks: TaskRange, episodes: int, seed: int) -> list[int]:
    """Every id in order (cycled) when the range has no more ids than episodes, else uniform draws from ``seed``."""
    if tasks.size <= episodes:
        return [tasks.first + i % tasks.size for i in range(episodes)]
    sampler = UniformTaskSampler(tasks, seed=seed)
    return [sampler.next_options()["task_id"] for _ in range(episodes)]


def per_game(results: Sequence[EpisodeResult], env_id: str) -> list[dict[str, Any]]:
    """One row per game (``info["game"]``, or the env id): episodes, win rate with its 95% Wilson interval, mean
    score and mean return with 95% t intervals. A win is ``success`` (score > 0.5) where the env reports it."""
    groups: dict[str, list[EpisodeResult]] = {}
    for result in results:
        groups.setdefault(str(result.final_info.get("game", env_id)), []).append(result)
    rows = []
    for game, group in sorted(groups.items()):
        wins = sum(bool(r.final_info.get("success", r.episode_return > 0)) for r in group)
        scores = [float(r.final_info.get("score", r.episode_return)) for r in group]
        low, high = wilson_ci95(wins, len(group))
        score, score_ci = mean_ci95(scores)
        mean_return, return_ci = mean_ci95([r.episode_return for r in group])
        rows.append(
            {
                "game": game,
                "episodes": len(group),
                "win_rate": wins / len(group),
                "win_rate_ci95": [low, high],
                "mean_score": score,
                "score_ci95": score_ci,
                "mean_return": mean_return,
                "return_ci95": return_ci,
            }
        )
    return rows
