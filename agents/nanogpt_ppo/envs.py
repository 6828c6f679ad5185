"""The envs the agent trains and plays on: the grid size it asks for, the text it reads, masks and lives from infos.
(Stepping and snapshots are :mod:`llm_gym.stepping`'s.)"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

from llm_gym.agent import EnvConfig
from llm_gym.envs.catalog import env_spec
from llm_gym.errors import UnsupportedEnvError


def _accepts(env_id: str, names: tuple[str, ...]) -> bool:
    spec = env_spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    try:
        params = inspect.signature(creator).parameters
    except (TypeError, ValueError):
        return False
    return all(name in params for name in names)


def with_grid(env: EnvConfig, rows: int, cols: int) -> EnvConfig:
    """``env`` with ``rows``/``cols`` added when its constructor takes them and the user did not set a size.

    A user's own ``rows``, ``cols`` or ``preset`` env argument wins; 0 leaves the env's default.
    """
    if rows <= 0 and cols <= 0:
        return env
    if any(key in env.kwargs for key in ("rows", "cols", "preset")) or not _accepts(env.env_id, ("rows", "cols")):
        return env
    extra = {k: v for k, v in (("rows", rows), ("cols", cols)) if v > 0}
    return EnvConfig(env.env_id, {**env.kwargs, **extra})


def text_length(space: gym.Space) -> int:
    """The longest observation of a Text space; other spaces raise with what this agent reads."""
    if isinstance(space, gym.spaces.Text):
        return int(space.max_length)
    raise UnsupportedEnvError(
        f"nanogpt_ppo reads text observations (a Text space), not {type(space).__name__}; "
        "use an ASCII or text env such as LLMBreakout-ascii-v0"
    )


def action_masks(infos: Sequence[Mapping[str, Any]], num_actions: int) -> np.ndarray:
    """(envs, num_actions) bool masks from each env's info; all legal where an env gives none."""
    return np.stack([info_mask(info, num_actions) for info in infos])


def info_mask(info: Mapping[str, Any], num_actions: int) -> np.ndarray:
    """The mask of one env's info; all legal where absent (or where it marks no action, which would give NaN
    probabilities)."""
    given = info.get("action_mask")
    mask = np.ones(num_actions, dtype=bool) if given is None else np.asarray(given, dtype=bool)
    return mask if mask.any() else np.ones(num_actions, dtype=bool)


def lives(infos: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Lives left per env (0 for envs that do not report lives)."""
    return np.array([int(info.get("lives", 0)) for info in infos], dtype=np.int64)
