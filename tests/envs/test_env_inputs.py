"""Bad input to an env: an llm-gym error naming what is valid, and the env still works afterwards (every family)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.envs.catalog import make
from llm_gym.envs.openspiel.pettingzoo_env import OpenSpielAECEnv
from llm_gym.errors import ConfigError, EnvInputError, LLMGymError

DISCRETE_IDS = ["LLMBreakout-v0", "LLMPong-ascii-v0", "OpenSpiel-tic_tac_toe-v0", "OpenSpiel-v0"]
BAD_ACTIONS = ["FIRE", None, 10**20, np.array([1, 2]), -1, 1.7, 1.5, True, 1.0]
BAD_OPTIONS = [
    ("notadict", "takes a dict"),
    ({"task_id": "abc"}, "task_id must be an int"),
    ({"task_id": None}, "task_id must be an int"),
    ({"task_id": 1.9}, "task_id must be an int"),
    ({"task_id": 10**20}, "task_id must be an int in 0.."),
    ({"task_id": -1}, "task_id must be an int in 0.."),
]


@pytest.mark.parametrize("env_id", DISCRETE_IDS)
def test_bad_actions_are_refused_and_the_episode_goes_on(env_id: str) -> None:
    env = gym.make(env_id)
    _, info = env.reset(seed=0)
    n = int(env.action_space.n)
    for action in [*BAD_ACTIONS, n]:
        with pytest.raises(EnvInputError, match=rf"{env_id} takes an action id, an int in 0\.\.{n - 1}"):
            env.step(action)
    # numpy integers (what vector envs and action_space.sample() hand over) are ids
    _, _, _, _, info = env.step(np.int64(info["legal_actions"][0]))
    env.step(np.array(info["legal_actions"][0]))
    env.close()


def test_a_text_action_on_a_discrete_env_points_to_text_actions() -> None:
    env = gym.make("LLMBreakout-v0")
    env.reset(seed=0)
    with pytest.raises(EnvInputError, match="llm_gym.TextActions"):
        env.step("FIRE")


@pytest.mark.parametrize("env_id", [*DISCRETE_IDS, "Trace-v0"])
def test_a_refused_first_reset_leaves_the_env_usable(env_id: str) -> None:
    env = gym.make(env_id)
    for options, message in BAD_OPTIONS:
        with pytest.raises(EnvInputError, match=message):
            env.reset(seed=0, options=options)
    with pytest.raises(EnvInputError, match="seed"):
        env.reset(seed="abc")
    _, info = env.reset(seed=1)
    action = "anything" if env_id == "Trace-v0" else info["legal_actions"][0]
    _, _, terminated, _, info = env.step(action)
    assert env_id != "Trace-v0" or terminated
    # and again in the middle of an episode: the refused reset changes nothing, a good one starts afresh
    with pytest.raises(EnvInputError):
        env.reset(options={"task_id": "abc"})
    _, info = env.reset(seed=2)
    env.step("anything" if env_id == "Trace-v0" else info["legal_actions"][0])
    env.close()


def test_trace_refuses_a_bad_level_and_a_non_text_answer() -> None:
    env = gym.make("Trace-v0")
    with pytest.raises(EnvInputError, match=r"level must be an int in 1\.\.4; got str 'x'"):
        env.reset(seed=0, options={"level": "x"})
    env.reset(seed=0, options={"task_id": 3, "level": 1})
    for answer in (None, 3, b"bytes"):
        with pytest.raises(EnvInputError, match="takes the predicted output as a str"):
            env.step(answer)
    _, reward, terminated, _, _ = env.step("a guess")  # the refused answers did not use up the episode
    assert terminated and reward == 0.0


def test_openspiel_refuses_a_seat_the_game_does_not_have_and_recovers() -> None:
    env = gym.make("OpenSpiel-tic_tac_toe-v0")
    with pytest.raises(EnvInputError, match=r"seats 0\.\.1, got seat 7"):
        env.reset(seed=0, options={"seat": 7})
    with pytest.raises(EnvInputError, match=r"seat must be an int >= 0"):
        env.reset(seed=0, options={"seat": "first"})
    _, info = env.reset(seed=0, options={"seat": 1})
    assert info["player"] == 1
    env.step(info["legal_actions"][0])


def test_pettingzoo_env_refuses_bad_actions_and_options() -> None:
    env = OpenSpielAECEnv("tic_tac_toe")
    with pytest.raises(EnvInputError, match="takes a dict"):
        env.reset(seed=0, options=[1])
    env.reset(seed=0)
    for action in ("4", 9, 1.5):
        with pytest.raises(EnvInputError, match=r"an int in 0\.\.8"):
            env.step(action)
    env.step(4)
    assert env.state.history() == [4]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"repeat_action_probability": 2}, "repeat_action_probability must be in 0..1"),
        ({"repeat_action_probability": "abc"}, "repeat_action_probability must be a number"),
        ({"frameskip": "abc"}, "frameskip must be an int >= 1"),
        ({"frameskip": 0}, "frameskip must be an int >= 1"),
        ({"max_num_frames_per_episode": -5}, "max_num_frames_per_episode must be None or an int >= 1"),
    ],
)
def test_atari_refuses_emulator_settings_ale_would_take_silently(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        make("LLMBreakout-v0", **kwargs)
    assert isinstance(caught.value, LLMGymError) and "\n" not in str(caught.value)
