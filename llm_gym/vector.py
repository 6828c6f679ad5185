"""Many copies of one env as a Gymnasium vector env whose envs reset only when told: what
:class:`llm_gym.stepping.EnvStepper` steps (the stepper decides when each env resets, with which seed and options)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from llm_gym.actions import TextActions
from llm_gym.envs.catalog import EnvConfig
from llm_gym.envs.protocol import takes_text
from llm_gym.envs.video import RecordFirstEpisode
from llm_gym.envs.wrappers import BoxedInfo, EpisodeStatistics, Pausable

VectorKind = Literal["sync", "async"]


def make_vector_env(
    env: EnvConfig,
    num_envs: int,
    *,
    kind: VectorKind = "sync",
    text_actions: bool = False,
    max_episode_steps: int = 0,
    video_path: str | Path | None = None,
) -> VectorEnv:
    """``num_envs`` copies of ``env`` as a vector env whose envs reset only when told (the stepper does it).

    Args:
        env: the env id and its ``gym.make`` arguments (a ``max_episode_steps`` among them becomes the cut below).
        num_envs: how many envs.
        kind: ``sync`` steps them in this process; ``async`` gives each its own process.
        text_actions: wrap discrete envs in :class:`llm_gym.actions.TextActions` (actions are answer texts).
        max_episode_steps: cut episodes after this many steps (0: the env's own end).
        video_path: record env 0's first episode there (env 0 is made with ``render_mode="rgb_array"``).
    """
    kwargs = dict(env.kwargs)
    limit = int(kwargs.pop("max_episode_steps", 0) or 0) or max_episode_steps
    config = dataclasses.replace(env, kwargs=kwargs)  # a subclass (the bench's) keeps its own make()

    def factory(index: int) -> Any:
        def make() -> gym.Env:
            recording = video_path is not None and index == 0
            made = config.make(render_mode="rgb_array") if recording else config.make()
            if recording:
                made = RecordFirstEpisode(made, video_path)
            if text_actions and not takes_text(made):
                made = TextActions(made)
            return BoxedInfo(Pausable(EpisodeStatistics(made, limit)))

        return make

    factories = [factory(i) for i in range(num_envs)]
    if kind == "async":
        return AsyncVectorEnv(factories, autoreset_mode=AutoresetMode.DISABLED, shared_memory=False)
    return SyncVectorEnv(factories, autoreset_mode=AutoresetMode.DISABLED)
