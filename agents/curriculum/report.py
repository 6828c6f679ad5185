"""A curriculum's own before and after: the untrained and the trained policy on every stage's tasks.

The base learner's periodic evaluations follow the current stage (docs/guides/curriculum.md), so its first and its
last evaluation may play different opponents and do not compare. ``final_eval_episodes`` > 0 plays both policies on
the same held-out episodes of each stage instead: seeds from 100,000,000 on (never a training seed) and the same task
ids and options for both, so each stage's row is a fair before/after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from llm_gym.agent import Agent, EnvConfig, Policy
from llm_gym.agents.curriculum.samplers import Stage
from llm_gym.envs.tasks import UniformTaskSampler
from llm_gym.stats import mean_ci95
from llm_gym.training.evaluation import HELDOUT_SEED, EpisodeResult, run_episodes
from llm_gym.training.loop import evaluation_env

TASK_SEED = 20_000
"""The generator of each stage's evaluation task ids (the same draws for both policies)."""


def stage_evaluation(
    base: Agent, env: EnvConfig, stages: Sequence[Stage], episodes: int, checkpoint: Any
) -> list[dict[str, Any]]:
    """Per stage: the untrained policy's and the trained one's (``checkpoint``) results on the same ``episodes``
    held-out episodes."""
    played = evaluation_env(env)
    policies = {"before": base.policy(played), "after": base.policy(played, checkpoint)}
    rows = []
    for index, stage in enumerate(stages):
        row: dict[str, Any] = {"stage": stage.name, "episodes": episodes}
        for when, policy in policies.items():
            row[when] = _results(_play(policy, played, stage, episodes, index))
        rows.append(row)
    return rows


def _play(policy: Policy, env: EnvConfig, stage: Stage, episodes: int, index: int) -> list[EpisodeResult]:
    tasks = UniformTaskSampler(stage.tasks, stage.options, seed=TASK_SEED + index)
    return run_episodes(policy, env, episodes, seed=HELDOUT_SEED, num_envs=min(episodes, 16), sampler=tasks)


def _results(results: Sequence[EpisodeResult]) -> dict[str, Any]:
    mean, ci = mean_ci95([r.episode_return for r in results])
    scores = [r.score for r in results]
    return {"mean_return": mean, "ci95": ci, "wins": sum(s > 0.5 for s in scores),
            "draws": sum(s == 0.5 for s in scores), "losses": sum(s < 0.5 for s in scores)}  # fmt: skip


def print_stage_evaluation(rows: Sequence[dict[str, Any]]) -> None:
    """The before/after table: mean return ± its 95% interval and wins/draws/losses, per stage."""
    table = Table("stage", "n", "untrained", "trained", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  title="held-out episodes per stage, greedy: return ± 95% CI, W/D/L")  # fmt: skip
    table.columns[0].no_wrap = True
    for row in rows:
        cells = [
            f"{r['mean_return']:.2f} ± {r['ci95']:.2f}, {r['wins']}/{r['draws']}/{r['losses']}"
            for r in (row["before"], row["after"])
        ]
        table.add_row(row["stage"], str(row["episodes"]), *cells)
    Console().print(table)
