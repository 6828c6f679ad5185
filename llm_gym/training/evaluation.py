"""Play whole episodes with a batched policy: ``llm-gym play``, periodic evaluation in agents, and benchmarks.

Episodes run in lockstep over ``num_envs`` envs (:class:`llm_gym.stepping.EnvStepper`) so a policy decides for all
of them in one call. Episode ``i`` is reset with seed ``seed + i`` (and ``task_id`` from ``task_ids`` if given), so
results do not depend on ``num_envs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig, Policy
from llm_gym.envs.catalog import render_modes
from llm_gym.envs.tasks import TaskSampler
from llm_gym.envs.video import VideoWarning, VideoWriter
from llm_gym.errors import UnsupportedEnvError
from llm_gym.stepping import EnvStepper, Episode, VectorKind, make_vector_env

__all__ = ["HELDOUT_SEED", "EpisodeResult", "Stopwatch", "VideoWarning", "VideoWriter", "run_episodes"]

HELDOUT_SEED = 100_000_000
"""Where evaluation seeds start (episode ``i`` plays ``HELDOUT_SEED + i``): a bench suite's default ``heldout``
split and ``play --checkpoint``'s default, far from the seeds training envs reset with (the run's seed on)."""


@dataclass
class EpisodeResult:
    """One finished episode."""

    index: int
    seed: int
    episode_return: float
    length: int
    truncated: bool
    """True when cut by the env's time limit or by ``max_steps``, not ended by the game."""
    invalid_actions: int = 0
    final_info: dict[str, Any] = field(default_factory=dict, repr=False)
    score: float = 0.0
    """The game's score at the end (``info["score"]``; the return where the env reports none)."""
    raw_return: float = 0.0
    """Sum of the game's own rewards (the return where the env shapes nothing)."""

    @classmethod
    def of(cls, episode: Episode) -> EpisodeResult:
        stats = episode.stats
        # The task's rules text (a prompt input, not a result) stays out of what results and stores keep.
        plain = {k: v for k, v in episode.final_info.items() if _plain(v) and k != "instructions"}
        return cls(episode.index, episode.seed, stats.episode_return, stats.length, stats.truncated,
                   stats.invalid_actions, plain, stats.score, stats.raw_return)  # fmt: skip


def run_episodes(
    policy: Policy,
    env: EnvConfig,
    episodes: int,
    *,
    seed: int = 0,
    num_envs: int = 1,
    max_steps: int | None = None,
    video_path: str | Path | None = None,
    task_ids: Sequence[int] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    vector_env: VectorKind = "sync",
    text_actions: bool = False,
    sampler: TaskSampler | None = None,
) -> list[EpisodeResult]:
    """Play ``episodes`` episodes and return them in episode order.

    Args:
        policy: acts on a batch of observations.
        env: the env id and its kwargs.
        episodes: how many episodes to play.
        seed: episode ``i`` resets with ``seed + i``.
        num_envs: how many envs step in lockstep (one policy call per step for all of them).
        max_steps: cut an episode after this many steps (marked ``truncated``).
        video_path: record episode 0 as a video (needs an env that renders ``rgb_array`` frames).
        task_ids: task id of each episode (``options={"task_id": ...}``), cycled.
        on_episode: called as each episode finishes.
        on_step: called after each lockstep step with the number of decisions it made (a progress bar's rate).
        vector_env: ``sync`` steps the envs in this process, ``async`` each in its own.
        text_actions: the policy answers with text; discrete envs parse it (:class:`llm_gym.actions.TextActions`).
        sampler: gives each episode's reset options (task id, opponent, ...; takes precedence over ``task_ids``).
    """
    num_envs = max(1, min(num_envs, episodes))
    if video_path is not None and "rgb_array" not in render_modes(env.env_id):
        raise UnsupportedEnvError(f"{env.env_id} renders no frames, so it cannot record a video; drop --video")
    envs = make_vector_env(
        env,
        num_envs,
        kind=vector_env,
        text_actions=text_actions,
        max_episode_steps=max_steps or 0,
        video_path=video_path,
    )
    stepper = EnvStepper(envs, seed=seed, episodes=episodes, task_ids=task_ids, sampler=sampler)
    results: dict[int, EpisodeResult] = {}
    try:
        stepper.reset()
        while not stepper.done:
            active = stepper.active
            actions = policy.act([stepper.observations[i] for i in active], [stepper.infos[i] for i in active])
            finished = stepper.step(list(actions)).finished
            if on_step:
                on_step(len(active))
            for episode in finished:
                result = results[episode.index] = EpisodeResult.of(episode)
                if on_episode:
                    on_episode(result)
    finally:
        stepper.close()
    return [results[i] for i in sorted(results)]


def _plain(value: Any) -> bool:
    return isinstance(value, (int, float, str, bool)) or value is None


class Stopwatch:
    """Seconds since creation; ``rate(n)`` = n per second."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def rate(self, count: float) -> float:
        return count / max(self.elapsed, 1e-9)
