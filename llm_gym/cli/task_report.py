"""``llm-gym play``'s per-game report: which task each episode plays (``--task-ids``), and per game its wins, draws
and losses with 95% Wilson intervals (games with outcomes: OpenSpiel, Pong), mean score and mean return.

An OpenSpiel episode's outcome is its normalised score (``info["score"]``: above 0.5 a win, 0.5 a draw, below a
loss, as the leaderboard counts them); a Pong game's is the sign of its point difference. An episode cut before
the game ended (``--max-steps``, a time limit) has none: it is counted as cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_gym.envs.catalog import env_family
from llm_gym.envs.tasks import TaskRange, UniformTaskSampler
from llm_gym.stats import mean_ci95, wilson_ci95
from llm_gym.training.evaluation import EpisodeResult


def episode_task_ids(tasks: TaskRange, episodes: int, seed: int) -> list[int]:
    """Every id in order (cycled) when the range has no more ids than episodes, else uniform draws from ``seed``."""
    if tasks.size <= episodes:
        return [tasks.first + i % tasks.size for i in range(episodes)]
    sampler = UniformTaskSampler(tasks, seed=seed)
    return [sampler.next_options()["task_id"] for _ in range(episodes)]


def has_outcomes(env_id: str) -> bool:
    """Whether the env's games end in a win, a draw or a loss (OpenSpiel, Pong)."""
    return env_family(env_id) == "openspiel" or env_id.lower().startswith("llmpong")


def outcome(result: EpisodeResult, env_id: str) -> str | None:
    """``win``, ``draw`` or ``loss`` of an episode that ended in a game with outcomes; None where it was cut or
    the game has no outcome."""
    if result.truncated or not has_outcomes(env_id):
        return None
    if env_family(env_id) == "openspiel":
        score = result.final_info.get("score", result.score)
        value = float(score) if score is not None else 0.5
    else:  # Pong: the player's points minus the CPU's
        value = 0.5 + 0.5 * ((result.raw_return > 0) - (result.raw_return < 0))
    return "win" if value > 0.5 else "draw" if value == 0.5 else "loss"


def per_game(results: Sequence[EpisodeResult], env_id: str) -> list[dict[str, Any]]:
    """One row per game (``info["game"]``, or the env id): episodes; wins, draws and losses (counts, rates and 95%
    Wilson intervals over the episodes that ended; None where the game has no outcomes); mean score and mean return
    with 95% t intervals. ``win_rate`` is ``success`` (score > 0.5) where the env reports it."""
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
        row: dict[str, Any] = {
            "game": game,
            "episodes": len(group),
            "win_rate": wins / len(group),
            "win_rate_ci95": [low, high],
            "mean_score": score,
            "score_ci95": score_ci,
            "mean_return": mean_return,
            "return_ci95": return_ci,
        }
        if has_outcomes(env_id):
            row |= outcome_counts([outcome(r, env_id) for r in group])
        rows.append(row)
    return rows


def outcome_counts(outcomes: Sequence[str | None]) -> dict[str, Any]:
    """Counts, rates and 95% Wilson intervals of wins, draws and losses among the games that ended; ``cut``: those
    that did not."""
    ended = [o for o in outcomes if o is not None]
    out: dict[str, Any] = {"ended": len(ended), "cut": len(outcomes) - len(ended)}
    for kind, plural in (("win", "wins"), ("draw", "draws"), ("loss", "losses")):
        count = ended.count(kind)
        out[plural] = count
        out[f"{kind}_share"] = count / len(ended) if ended else None
        out[f"{kind}_share_ci95"] = list(wilson_ci95(count, len(ended))) if ended else None
    return out
