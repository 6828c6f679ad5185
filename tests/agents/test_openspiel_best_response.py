"""The ``best_response`` agent: the exact best response to a uniformly random opponent in Kuhn poker (its mean
return matches OpenSpiel's computed value, it acts on what its seat sees only) and one-line refusals elsewhere."""

from __future__ import annotations

from collections import defaultdict

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.openspiel_best_response import BestResponseConfig, BestResponsePolicy, count_states
from llm_gym.envs.openspiel.core import pyspiel_module
from llm_gym.errors import UnsupportedEnvError
from llm_gym.plugins import get_agent
from llm_gym.stats import mean_ci95
from llm_gym.training.evaluation import run_episodes

KUHN = "OpenSpiel-kuhn_poker-v0"


def test_kuhn_poker_has_58_states() -> None:
    assert count_states(pyspiel_module().load_game("kuhn_poker"), 1000) == 58
    assert count_states(pyspiel_module().load_game("tic_tac_toe"), 100) == 101  # stops past the limit


def test_beats_random_by_the_best_response_value_and_plays_a_function_of_what_it_sees() -> None:
    env = EnvConfig(KUHN)
    policy = get_agent("best_response")().policy(env)
    seen: dict[str, set[int]] = defaultdict(set)

    class Recording:
        def act(self, observations, infos):
            actions = policy.act(observations, infos)
            for observation, action in zip(observations, actions, strict=True):
                seen[observation].add(action)
            return actions

    results = run_episodes(Recording(), env, 600, seed=0, num_envs=8)
    mean, half = mean_ci95([r.episode_return for r in results])
    # OpenSpiel's exact best-response values against uniform play are 1/2 (first seat) and 5/12 (second seat);
    # the seat is drawn from the seed, so the mean is about 0.46. Uniform play against uniform play scores 0.
    assert abs(mean - 0.458) < half + 0.02 and mean - half > 0.2
    assert len(seen) == 10  # the information states reached (the first seat never passes with J or Q)
    assert all(len(actions) == 1 for actions in seen.values())  # one action per observation: no peeking


def test_refusals_are_one_line() -> None:
    agent = get_agent("best_response")()
    with pytest.raises(UnsupportedEnvError, match="uniformly random opponent"):
        agent.policy(EnvConfig(KUHN, {"opponent": "mcts"}))
    with pytest.raises(UnsupportedEnvError, match="OpenSpiel envs only"):
        agent.policy(EnvConfig("LLMBreakout-text-v0"))
    tiny_budget = BestResponsePolicy(BestResponseConfig(max_states=100))
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0").make()
    _, info = env.reset(seed=0)
    with pytest.raises(UnsupportedEnvError, match="too large"):
        tiny_budget.act([None], [info])


def test_action_values_are_the_information_state_values_and_show_the_kings_tie() -> None:
    from llm_gym.learning_demo.agreement import demonstrator_positions

    env = EnvConfig(KUHN)
    policy = get_agent("best_response")().policy(env)
    positions = list(demonstrator_positions(policy, env, 200, seed=0))
    values = policy.action_values([p.observation for p in positions], [p.info for p in positions])
    by_state = {}
    for position, row in zip(positions, values, strict=True):
        info = position.info
        names = [str(n) for n in info["action_names"]]
        assert max(row) == row[list(info["legal_actions"]).index(position.action)]  # it plays a best action
        card = str(position.observation).split("Your card: ")[1][0]
        by_state[(int(info["player"]), card, tuple(info["history"][2:]))] = dict(zip(names, row, strict=True))
    # The first seat opens (no action yet). Against uniform play: J -1 / -0.5, Q 0 / 0.5, K 1.5 / 1.5
    # (a tie: the opponent folds or calls a bet half the time each, and after a pass it bets into the king or
    # checks), so the opening is worth (-0.5 + 0.5 + 1.5) / 3 = 0.5, OpenSpiel's best-response value of that seat.
    openings = {card: by_state[(0, card, ())] for card in "JQK"}
    assert openings["J"] == pytest.approx({"Pass": -1.0, "Bet": -0.5})
    assert openings["Q"] == pytest.approx({"Pass": 0.0, "Bet": 0.5})
    assert openings["K"] == pytest.approx({"Pass": 1.5, "Bet": 1.5})
    assert sum(max(v.values()) for v in openings.values()) / 3 == pytest.approx(0.5)
    # The second seat facing a bet (action 1): fold the jack, call with the queen (even money).
    assert by_state[(1, "J", (1,))] == pytest.approx({"Pass": -1.0, "Bet": -2.0})
    assert by_state[(1, "Q", (1,))] == pytest.approx({"Pass": -1.0, "Bet": 0.0})
