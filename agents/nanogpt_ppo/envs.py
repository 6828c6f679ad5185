"""The envs the agent trains and plays on: grid size, vector envs, action masks, and snapshots for exact resume."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from llm_gym.agent import EnvConfig
from llm_gym.envs.catalog import env_spec
from llm_gym.errors import UnsupportedEnvError
from llm_gym.runs import can_pickle
from llm_gym.sampled_tasks import wrap_envs
from llm_gym.tasks import TaskSampler


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


def make_vector_env(env: EnvConfig, num_envs: int, kind: str = "sync", sampler: TaskSampler | None = None) -> VectorEnv:
    """``num_envs`` copies of ``env``; a finished episode resets in the same step (its last observation and info go
    to ``info["final_obs"]`` / ``info["final_info"]``), so every stored step is a real decision. With a ``sampler``
    each episode's task comes from it (:mod:`llm_gym.sampled_tasks`; in-process envs only)."""
    if sampler is not None and kind == "async":
        raise UnsupportedEnvError("a task sampler (the curriculum) needs the envs in this process: vector_env=sync")
    make = wrap_envs(env.make, sampler)
    fns = [make for _ in range(num_envs)]
    if kind == "async":
        return AsyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP, shared_memory=False)
    return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)


def action_masks(infos: Mapping[str, Any], num_envs: int, num_actions: int) -> np.ndarray:
    """(num_envs, num_actions) bool mask from a vector env's ``info["action_mask"]``; all legal where absent."""
    mask = np.ones((num_envs, num_actions), dtype=bool)
    given = infos.get("action_mask")
    if given is not None:
        present = infos.get("_action_mask", np.ones(num_envs, dtype=bool))
        for i in np.flatnonzero(present):
            mask[i] = np.asarray(given[i], dtype=bool)
    # An env that reports no legal action at all would give NaN probabilities; treat it as all legal.
    mask[~mask.any(axis=1)] = True
    return mask


def info_mask(info: Mapping[str, Any], num_actions: int) -> np.ndarray:
    """The mask of one (non-vector) env's info; all legal where absent."""
    given = info.get("action_mask")
    mask = np.ones(num_actions, dtype=bool) if given is None else np.asarray(given, dtype=bool)
    return mask if mask.any() else np.ones(num_actions, dtype=bool)


def lives(infos: Mapping[str, Any], num_envs: int) -> np.ndarray:
    """Lives left per env (zeros for envs that do not report lives)."""
    if "lives" not in infos:
        return np.zeros(num_envs, dtype=np.int64)
    return np.asarray(infos["lives"], dtype=np.int64)


def snapshots(envs: VectorEnv) -> list[Any] | None:
    """Each env's ``clone_state()`` (emulator and RNG), or None when the envs cannot be snapshot (resume then resets)."""
    if not isinstance(envs, SyncVectorEnv):
        return None
    inner = [e.unwrapped for e in envs.envs]
    if not all(hasattr(e, "clone_state") and hasattr(e, "restore_state") for e in inner):
        return None
    states = [(e.unwrapped.clone_state(), _time_limits(e)) for e in envs.envs]
    return states if can_pickle(states) else None


def restore(envs: VectorEnv, states: list[Any]) -> None:
    """Put each env back into the state :func:`snapshots` took."""
    assert isinstance(envs, SyncVectorEnv)
    for env, (state, elapsed) in zip(envs.envs, states, strict=True):
        env.unwrapped.restore_state(state)
        for wrapper, steps in zip(_wrappers_with_time_limit(env), elapsed, strict=True):
            wrapper._elapsed_steps = steps


def _wrappers_with_time_limit(env: gym.Env) -> list[gym.Env]:
    # A TimeLimit wrapper counts steps outside the env's own state; an exact resume has to carry that count too.
    found = []
    while isinstance(env, gym.Wrapper):
        if hasattr(env, "_elapsed_steps"):
            found.append(env)
        env = env.env
    return found


def _time_limits(env: gym.Env) -> list[int]:
    return [int(w._elapsed_steps or 0) for w in _wrappers_with_time_limit(env)]
