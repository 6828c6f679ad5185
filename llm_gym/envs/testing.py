"""Small envs for tests of agents and policies: each test registers one under its own id with what it varies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from llm_gym.envs.spaces import text_space


class OneAnswerTextEnv(gym.Env):
    """One free-text answer per episode: the action is text, rewarded by ``reward(answer)``, and the episode ends.

    Args:
        reward: the answer's reward (a module-level function, so the env stays picklable).
        prompt: the observation the answer replies to.
        instructions: the env's rules text (the system prompt).
    """

    def __init__(self, reward: Callable[[str], float], *, prompt: str, instructions: str) -> None:
        self.reward = reward
        self.prompt = prompt
        self.instructions = instructions
        self.action_space = text_space(64)
        self.observation_space = text_space(64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        return self.prompt, {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        return "done", float(self.reward(action)), True, False, {}


def register_one_answer_env(env_id: str, reward: Callable[[str], float], *, prompt: str, instructions: str) -> None:
    """Register a :class:`OneAnswerTextEnv` under ``env_id`` (for ``gym.make`` and ``EnvConfig``)."""
    kwargs = {"reward": reward, "prompt": prompt, "instructions": instructions}
    gym.register(env_id, entry_point=OneAnswerTextEnv, kwargs=kwargs)
