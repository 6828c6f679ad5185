"""``llm_gym.check_llm_env``: checks llm-gym's contract (:mod:`llm_gym.envs.protocol`) the way
``gymnasium.utils.env_checker.check_env`` checks Gymnasium's. Run both on a new env family::

    from gymnasium.utils.env_checker import check_env
    import llm_gym

    check_env(env.unwrapped)
    llm_gym.check_llm_env(env)

The first broken rule raises :class:`llm_gym.errors.EnvProtocolError` with what to fix.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import data_equivalence

from llm_gym.envs.protocol import Snapshotting
from llm_gym.errors import EnvProtocolError


def check_llm_env(env: gym.Env, *, steps: int = 12, seed: int = 0) -> None:
    """Check that ``env`` keeps llm-gym's env contract; raise :class:`EnvProtocolError` naming the fix.

    Checks the rules text, the action space kind, the optional attributes, the ``info`` of ``reset`` and of
    ``steps`` steps of legal actions (legal actions, names and mask agree; reward keys are numbers) and, where the
    env takes snapshots, that ``restore_state`` brings back what ``clone_state`` took.
    """
    unwrapped = env.unwrapped
    name = type(unwrapped).__name__
    _check_attributes(unwrapped, name)
    obs, info = env.reset(seed=seed)
    _check_info(env, info, name, "reset()")
    rng = np.random.default_rng(seed)
    for step in range(steps):
        obs, _, terminated, truncated, info = env.step(_legal_action(env, info, rng))
        _check_info(env, info, name, f"step() #{step + 1}")
        if terminated or truncated:
            obs, info = env.reset()
            _check_info(env, info, name, "reset()")
    if isinstance(unwrapped, Snapshotting):
        _check_snapshots(env, name, seed, min(steps, 8))


def _check_attributes(unwrapped: Any, name: str) -> None:
    instructions = getattr(unwrapped, "instructions", None)
    if not isinstance(instructions, str) or not instructions.strip():
        raise EnvProtocolError(
            f"{name} has no instructions: set `self.instructions` to the rules of the game (what an observation "
            "shows and how to answer), a non-empty str; LM agents use it as the system prompt"
        )
    space = unwrapped.action_space
    if not isinstance(space, (gym.spaces.Discrete, gym.spaces.Text)):
        raise EnvProtocolError(
            f"{name}'s action space is {type(space).__name__}: llm-gym envs take a Discrete action (named in info) "
            "or a Text answer"
        )
    noop = getattr(unwrapped, "noop_action", None)
    if noop is not None and not (isinstance(space, gym.spaces.Discrete) and space.contains(int(noop))):
        raise EnvProtocolError(f"{name}.noop_action = {noop!r} is not an action of its space; use a valid id or None")
    aliases = getattr(unwrapped, "action_aliases", None) or {}
    if not isinstance(aliases, Mapping) or not all(
        isinstance(k, str) and isinstance(space, gym.spaces.Discrete) and space.contains(int(v))
        for k, v in aliases.items()
    ):
        raise EnvProtocolError(f"{name}.action_aliases must map names (str) to action ids of its space")
    has_clone, has_restore = hasattr(unwrapped, "clone_state"), hasattr(unwrapped, "restore_state")
    if has_clone != has_restore:
        missing = "restore_state" if has_clone else "clone_state"
        raise EnvProtocolError(f"{name} has only half of the snapshot pair: add {missing}() or remove the other")


def _check_info(env: gym.Env, info: Mapping[str, Any], name: str, where: str) -> None:
    space = env.unwrapped.action_space
    if isinstance(space, gym.spaces.Discrete):
        for key in ("legal_actions", "action_names", "action_mask"):
            if key not in info:
                raise EnvProtocolError(
                    f"{name}: the info of {where} has no {key!r}; a Discrete env puts legal_actions (ids), "
                    "action_names (one str each) and action_mask (bool, one per action) in every info"
                )
        legal, names = [int(a) for a in info["legal_actions"]], list(info["action_names"])
        if len(names) != len(legal) or not all(isinstance(n, str) and n for n in names):
            raise EnvProtocolError(
                f"{name}: the info of {where} gives {len(legal)} legal_actions but action_names {names!r}; give one "
                "non-empty name per legal action, in the same order"
            )
        if not all(space.contains(a) for a in legal):
            raise EnvProtocolError(f"{name}: legal_actions {legal} of {where} holds ids outside the action space")
        mask = np.asarray(info["action_mask"])
        if mask.shape != (int(space.n),):
            raise EnvProtocolError(
                f"{name}: action_mask of {where} has shape {mask.shape}, not ({int(space.n)},): one entry per action"
            )
        marked = sorted(int(i) for i in np.flatnonzero(mask))
        if marked != sorted(legal):
            raise EnvProtocolError(
                f"{name}: action_mask of {where} marks {marked} but legal_actions lists {sorted(legal)}; build the "
                "mask from the same list (True exactly at the legal ids)"
            )
    for key in ("raw_reward", "invalid_action_penalty"):
        if key in info and not isinstance(info[key], numbers.Real):
            raise EnvProtocolError(f"{name}: info[{key!r}] of {where} is {info[key]!r}, not a number")
    if "score" in info and info["score"] is not None and not isinstance(info["score"], numbers.Real):
        raise EnvProtocolError(f"{name}: info['score'] of {where} is {info['score']!r}, not a number or None")
    if "invalid_action" in info and not isinstance(info["invalid_action"], (bool, np.bool_)):
        raise EnvProtocolError(f"{name}: info['invalid_action'] of {where} is {info['invalid_action']!r}, not a bool")


def _legal_action(env: gym.Env, info: Mapping[str, Any], rng: np.random.Generator) -> Any:
    if isinstance(env.action_space, gym.spaces.Discrete):
        legal = list(info["legal_actions"])
        return int(legal[int(rng.integers(len(legal)))])
    return env.action_space.sample()


def _check_snapshots(env: gym.Env, name: str, seed: int, steps: int) -> None:
    _, info = env.reset(seed=seed)
    snapshot = env.unwrapped.clone_state()
    actions, first = [], []
    rng = np.random.default_rng(seed + 1)
    for _ in range(steps):
        action = _legal_action(env, info, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        first.append((obs, float(reward), terminated))
        if terminated or truncated:
            break
    env.unwrapped.restore_state(snapshot)
    for index, action in enumerate(actions):
        obs, reward, terminated, _, _ = env.step(action)
        if not data_equivalence((obs, float(reward), terminated), first[index]):
            raise EnvProtocolError(
                f"{name}: after restore_state(), step {index + 1} of the same actions gave another result than "
                "before; put everything steps depend on (the RNG included) into what clone_state() returns"
            )
