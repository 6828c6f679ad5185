"""Every registered id, checked the same way: gymnasium's env checker, llm-gym's contract (``check_llm_env``) and a
same-seed determinism rollout."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

import llm_gym
from llm_gym.envs.catalog import env_ids

ALL_IDS = env_ids()
ROLLOUT_STEPS = 40


def test_registration_covers_the_atari_family() -> None:
    for game in ("Breakout", "Pong"):
        for suffix in ("", "-text", "-ascii", "-vision"):
            assert f"LLM{game}{suffix}-v0" in ALL_IDS


def test_register_envs_accepts_the_package() -> None:
    gym.register_envs(llm_gym)
    assert "LLMBreakout-v0" in gym.registry


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_env_passes_gymnasium_checker(env_id: str) -> None:
    env = gym.make(env_id, disable_env_checker=True).unwrapped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    env.close()
    messages = [str(w.message) for w in caught if "gymnasium" in (w.filename or "") or "WARN" in str(w.message)]
    assert not messages, messages
    assert isinstance(env.instructions, str) and env.instructions.strip(), "every env carries its rules text"


def _rollout(env_id: str, seed: int) -> list[tuple]:
    env = gym.make(env_id)
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    trace = [(obs, None, False, False)]
    for _ in range(ROLLOUT_STEPS):
        mask = info.get("action_mask")
        if mask is not None and isinstance(env.action_space, gym.spaces.Discrete):
            action = env.action_space.sample(mask=np.asarray(mask, dtype=np.int8))
        else:
            action = env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, float(reward), terminated, truncated))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, None, False, False))
    env.close()
    return trace


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_same_seed_same_rollout(env_id: str) -> None:
    first, second = _rollout(env_id, seed=7), _rollout(env_id, seed=7)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert data_equivalence(a, b)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_env_keeps_the_llm_gym_contract(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        llm_gym.check_llm_env(env)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", [i for i in ALL_IDS if i.startswith("LLM")])
def test_info_names_the_legal_actions(env_id: str) -> None:
    env = gym.make(env_id)
    _, info = env.reset(seed=0)
    assert len(info["legal_actions"]) == len(info["action_names"])
    assert info["action_mask"].shape == (env.action_space.n,)
    assert info["action_mask"][list(info["legal_actions"])].all()
    env.close()
