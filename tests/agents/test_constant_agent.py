"""The ``constant`` baseline: one named action at every step, on the real ALE and OpenSpiel envs."""

from __future__ import annotations

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig, act_with_details
from llm_gym.errors import UnknownNameError
from llm_gym.plugins import get_agent
from llm_gym.training.evaluation import run_episodes

BREAKOUT_FIRE = EnvConfig("LLMBreakout-text-v0", {"fire_on_reset": True})


def constant_policy(env: EnvConfig, action: str):
    agent_cls = get_agent("constant")
    return agent_cls(agent_cls.Config(action=action)).policy(env)


def test_it_plays_the_same_games_as_pressing_the_action_by_hand() -> None:
    policy = constant_policy(BREAKOUT_FIRE, "left")  # names match case-insensitively
    episodes = run_episodes(policy, BREAKOUT_FIRE, 2, seed=100, num_envs=2, max_steps=400)
    for seed, episode in zip((100, 101), episodes, strict=True):
        env = gym.make("LLMBreakout-text-v0", fire_on_reset=True)
        _, info = env.reset(seed=seed)
        left = info["legal_actions"][[name.upper() for name in info["action_names"]].index("LEFT")]
        points, steps, done = 0.0, 0, False
        while not done and steps < 400:
            _, _, terminated, truncated, info = env.step(left)
            points, steps, done = points + info["raw_reward"], steps + 1, terminated or truncated
        env.close()
        assert (episode.length, episode.score) == (steps, points)
    assert episodes[1].score > 0  # LEFT keeps some balls in play: the floor is not zero


def test_details_put_all_probability_on_the_action_and_an_illegal_step_takes_the_first_legal_one() -> None:
    ttt = EnvConfig("OpenSpiel-tic_tac_toe-v0", {})
    policy = constant_policy(ttt, "x(1,1)")
    env = ttt.make()
    obs, info = env.reset(seed=0)
    (action,), (details,) = act_with_details(policy, [obs], [info])
    centre = list(info["action_names"]).index("x(1,1)")
    assert action == info["legal_actions"][centre] and details["probs"][centre] == 1.0 and sum(details["probs"]) == 1.0
    obs, _, _, _, info = env.step(action)  # the centre is taken now (the opponent moved too)
    assert "x(1,1)" not in info["action_names"]
    assert policy.act([obs], [info]) == [info["legal_actions"][0]]
    env.close()


def test_an_unknown_action_name_is_one_line_with_the_close_match() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown action 'LEFTT'; did you mean 'LEFT'\?.*--set action=NAME"):
        constant_policy(BREAKOUT_FIRE, "LEFTT")
