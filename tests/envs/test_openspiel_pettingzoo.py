"""The PettingZoo AEC env: api_test on a representative set, simultaneous rounds, rewards, seeding."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test

from llm_gym.envs.openspiel import OpenSpielAECEnv, aec_env

# (game, OpenSpiel parameters): chance, imperfect information, simultaneous moves, more than two players, one player.
API_CASES = [
    ("tic_tac_toe", None),  # perfect information, deterministic
    ("goofspiel", None),  # simultaneous moves + chance
    ("goofspiel", {"players": 3, "num_cards": 6}),  # simultaneous moves, three players
    ("leduc_poker", None),  # imperfect information + chance
    ("liars_dice", None),  # imperfect information (dice)
    ("hearts", None),  # four players, imperfect information, general-sum
    ("backgammon", {"hyper_backgammon": True}),  # chance every turn (short)
    ("kuhn_poker", {"players": 3}),  # three-player poker
    ("2048", None),  # a single agent, rewards every move
]


@pytest.mark.parametrize(("game", "params"), API_CASES)
def test_pettingzoo_api(game: str, params: dict | None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # api_test warns that a dict observation is not a NumPy array
        api_test(aec_env(game, params=params), num_cycles=300)


def play(env: OpenSpielAECEnv, seed: int) -> tuple[list[tuple], dict[str, float]]:
    """Masked random play of one game: the (agent, action) sequence and each agent's summed rewards."""
    env.reset(seed=seed)
    rng = random.Random(seed)
    trace, totals = [], dict.fromkeys(env.agents, 0.0)
    for agent in env.agent_iter(5000):
        observation, reward, terminated, truncated, info = env.last()
        totals[agent] += reward
        action = None if terminated or truncated else rng.choice(np.flatnonzero(observation["action_mask"]).tolist())
        trace.append((agent, action, observation["text"]))
        env.step(action)
    return trace, totals


def test_same_seed_same_game_and_rewards_add_up_to_the_returns() -> None:
    env = aec_env("leduc_poker")
    first, totals = play(env, 3)
    assert play(aec_env("leduc_poker"), 3)[0] == first
    assert play(env, 4)[0] != first
    final_returns = [t for t in first if t[1] is None]
    assert final_returns, "every agent is stepped out once the game is over"
    assert sum(totals.values()) == pytest.approx(0.0)  # zero-sum
    assert "Game over." in first[-1][2]


def test_simultaneous_round_hides_the_other_bids() -> None:
    env = aec_env("goofspiel")
    env.reset(seed=0)
    assert env.state.is_simultaneous_node()
    first = env.agent_selection
    second_before = env.observe("player_1")
    env.step(int(np.flatnonzero(env.observe(first)["action_mask"])[-1]))
    assert env.agent_selection == "player_1" and env.state.is_simultaneous_node()  # the round waits for everyone
    assert env.observe("player_1")["text"] == second_before["text"]  # and shows nothing of player 0's bid
    env.step(int(np.flatnonzero(env.observe("player_1")["action_mask"])[0]))
    assert not env.state.is_simultaneous_node() or len(env.state.history()) > 1


def test_illegal_actions_are_penalised_and_counted() -> None:
    env = aec_env("tic_tac_toe")
    env.reset(seed=0)
    env.step(0)  # player_0 takes cell 0
    env.step(0)  # player_1 tries the same cell: illegal
    assert env.rewards["player_1"] == pytest.approx(-0.1)
    assert env.infos["player_1"]["invalid_actions"] == 1
    assert env.state.history()[1] != 0
