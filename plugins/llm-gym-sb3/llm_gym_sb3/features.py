"""A numeric view of an llm-gym env for classic RL: the decoded game state from ``info["game_state"]`` as floats."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from llm_gym.errors import UnsupportedEnvError

SCALE = 1 / 210  # screen pixels -> roughly [0, 1]
MISSING = -1.0  # a field with no value (no ball in play)


def state_features(state: Any) -> np.ndarray:
    """Flatten a game-state NamedTuple: numbers scaled, None as -1, nested tuples (the brick wall) as 0/1."""
    values: list[float] = []
    for value in state:
        if value is None:
            values.append(MISSING)
        elif isinstance(value, tuple):
            values.extend(float(v) for v in np.asarray(value, dtype=np.float32).reshape(-1))
        else:
            values.append(float(value) * SCALE)
    return np.asarray(values, dtype=np.float32)


class GameStateFeatures(gym.ObservationWrapper):
    """Replaces the text/ASCII/image observation with :func:`state_features` of ``info["game_state"]``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        _, info = env.reset(seed=0)
        if "game_state" not in info:
            raise UnsupportedEnvError(
                f"sb3_ppo needs an env that reports info['game_state'] (LLMBreakout-*, LLMPong-*), not {env.spec.id}"
            )
        size = state_features(info["game_state"]).shape[0]
        self.observation_space = gym.spaces.Box(-1.0, np.inf, (size,), dtype=np.float32)
        self._info: dict[str, Any] = info

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self._info = info
        return self.observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._info = info
        return self.observation(obs), reward, terminated, truncated, info

    def observation(self, observation: Any) -> np.ndarray:
        return state_features(self._info["game_state"])
