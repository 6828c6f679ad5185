"""Exact evaluation of small OpenSpiel games against open_spiel's own algorithms: the expected return of a policy
against the random opponent equals ``expected_game_score.policy_value`` of the same policy, the exploitability
equals ``exploitability`` of its table, and a long sampled play agrees with the exact value."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import expected_game_score, exploitability

from llm_gym.agent import DetailedPolicy, EnvConfig
from llm_gym.envs.openspiel.tree import GameTree
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.plugins import get_agent
from llm_gym.training.evaluation import run_episodes
from llm_gym.training.exact import evaluate_exact


def _weights(observation: str, legal: Sequence[int], stochastic: bool) -> list[float]:
    """A fixed, arbitrary policy of the observation text: one action (greedy) or a spread over all."""
    digest = hashlib.sha256(observation.encode()).digest()
    if not stochastic:
        return [1.0 if i == digest[0] % len(legal) else 0.0 for i in range(len(legal))]
    raw = np.array([1 + digest[i % len(digest)] for i in range(len(legal))], dtype=float)
    return list(raw / raw.sum())


class HashPolicy(DetailedPolicy):
    """llm-gym's side: acts on the observation text as any policy does."""

    def __init__(self, stochastic: bool = False) -> None:
        self.stochastic = stochastic

    def act_with_details(self, observations, infos):
        probs = [_weights(o, i["legal_actions"], self.stochastic) for o, i in zip(observations, infos, strict=True)]
        actions = [i["legal_actions"][int(np.argmax(p))] for i, p in zip(infos, probs, strict=True)]
        return actions, [{"probs": p} for p in probs]


class OpenSpielView(os_policy.Policy):
    """open_spiel's side: the same policy on the text the env shows at each state (uniform in the other seat)."""

    def __init__(self, tree: GameTree, seat: int, stochastic: bool) -> None:
        super().__init__(tree.game, list(range(tree.num_players)))
        self.tree, self.seat, self.stochastic = tree, seat, stochastic

    def action_probabilities(self, state, player_id=None):
        player = state.current_player()
        legal = state.legal_actions(player)
        if player != self.seat:
            return {a: 1.0 / len(legal) for a in legal}
        observation, _ = self.tree.observe(self.tree.replay(player, state.history()))
        return dict(zip(legal, _weights(observation, legal, self.stochastic), strict=True))


@pytest.mark.parametrize("game", ["kuhn_poker", "tic_tac_toe", "leduc_poker"])
@pytest.mark.parametrize("stochastic", [False, True])
def test_the_expected_return_equals_open_spiels_policy_value(game: str, stochastic: bool) -> None:
    env = EnvConfig(f"OpenSpiel-{game}-v0")
    if game != "kuhn_poker" and stochastic:
        pytest.skip("a stochastic policy reaches the whole tree: Kuhn's is small enough for open_spiel's walk here")
    result = evaluate_exact(HashPolicy(stochastic), env, greedy=not stochastic)
    tree = GameTree(env.make())
    root = tree.game.new_initial_state()
    expected = np.mean(
        [expected_game_score.policy_value(root, [OpenSpielView(tree, s, stochastic)] * 2)[s] for s in (0, 1)]
    )  # the env seats the learner in each seat equally often
    assert result.expected_return == pytest.approx(expected, abs=1e-9)
    assert result.win + result.draw + result.loss == pytest.approx(1.0)
    assert [s.seat for s in result.seats] == [0, 1] and all(s.probability == 0.5 for s in result.seats)


@pytest.mark.parametrize("stochastic", [False, True])
def test_kuhn_exploitability_equals_open_spiels_on_the_same_table(stochastic: bool) -> None:
    env = EnvConfig("OpenSpiel-kuhn_poker-v0")
    result = evaluate_exact(HashPolicy(stochastic), env, greedy=not stochastic)
    tree = GameTree(env.make())
    table = os_policy.TabularPolicy(tree.game)
    for state in _decision_states(tree.game):
        player = state.current_player()
        row = table.policy_for_key(state.information_state_string(player))
        observation, info = tree.observe(tree.replay(player, state.history()))
        row[info["legal_actions"]] = _weights(observation, info["legal_actions"], stochastic)
    assert result.exploitability == pytest.approx(exploitability.exploitability(tree.game, table), abs=1e-9)
    assert result.nash_conv == pytest.approx(exploitability.nash_conv(tree.game, table), abs=1e-9)
    assert result.best_response_return == pytest.approx(11 / 24, abs=1e-9)  # Kuhn's best response to random


def test_the_best_response_to_random_gets_the_best_response_return() -> None:
    env = EnvConfig("OpenSpiel-kuhn_poker-v0")
    result = evaluate_exact(get_agent("best_response")().policy(env), env)
    assert result.expected_return == pytest.approx(result.best_response_return, abs=1e-9)
    assert result.exploitability > 0  # it exploits random, and is exploitable itself


def test_tic_tac_toe_worst_case_against_an_adversary() -> None:
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    solver = evaluate_exact(get_agent("solver")().policy(env), env)
    assert solver.worst_return == 0.0 and solver.loss == 0.0  # perfect play draws at worst
    assert solver.win > 0.9 and solver.exploitability is None and solver.best_response_return is None
    naive = evaluate_exact(HashPolicy(), env)
    assert naive.worst_return == -1.0 and naive.loss > 0
    assert min(s.worst_return for s in naive.seats) == naive.worst_return


def test_a_long_sampled_play_agrees_with_the_exact_value() -> None:
    env = EnvConfig("OpenSpiel-kuhn_poker-v0")
    exact = evaluate_exact(HashPolicy(), env)
    games = run_episodes(HashPolicy(), env, 4000, seed=123, num_envs=16)
    returns = np.array([g.episode_return for g in games])
    assert abs(returns.mean() - exact.expected_return) < 4 * returns.std() / np.sqrt(len(returns))
    wins = np.mean([g.score > 0.5 for g in games])
    assert abs(wins - exact.win) < 4 * np.sqrt(exact.win * (1 - exact.win) / len(games))


def test_what_exact_evaluation_cannot_walk_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="opponent=random"):
        evaluate_exact(HashPolicy(), EnvConfig("OpenSpiel-tic_tac_toe-v0", {"opponent": "mcts"}))
    with pytest.raises(UnsupportedEnvError, match="OpenSpiel"):
        evaluate_exact(HashPolicy(), EnvConfig("LLMPong-text-v0"))
    with pytest.raises(UnsupportedEnvError, match="simultaneous"):
        evaluate_exact(HashPolicy(), EnvConfig("OpenSpiel-goofspiel-v0"))
    with pytest.raises(UnsupportedEnvError, match="history"):
        evaluate_exact(HashPolicy(), EnvConfig("OpenSpiel-tic_tac_toe-v0", {"history": 2}))


def test_a_game_too_large_is_refused_before_any_walk_and_small_ones_are_sized_about_right() -> None:
    import time

    import pyspiel

    from llm_gym.training.exact import check_exact_env, estimated_tree_size

    started = time.perf_counter()
    for game in ("connect_four", "dots_and_boxes"):
        with pytest.raises(ConfigError, match=r"too large to evaluate exactly .*llm-gym play --episodes N"):
            check_exact_env(EnvConfig(f"OpenSpiel-{game}-v0"))
    assert time.perf_counter() - started < 10  # an estimate, not minutes of walking towards MAX_NODES
    check_exact_env(EnvConfig("OpenSpiel-tic_tac_toe-v0"))  # about 550,000 nodes: walked
    # Knuth's estimate against the true sizes (Kuhn: 58 nodes; tic-tac-toe: 549,946), seeded so it never flakes.
    assert 40 < estimated_tree_size(pyspiel.load_game("kuhn_poker")) < 80
    assert 2e5 < estimated_tree_size(pyspiel.load_game("tic_tac_toe")) < 1.5e6


def _decision_states(game):
    stack = [game.new_initial_state()]
    while stack:
        state = stack.pop()
        if state.is_terminal():
            continue
        if state.is_chance_node():
            stack.extend(state.child(a) for a, _ in state.chance_outcomes())
            continue
        yield state
        stack.extend(state.child(a) for a in state.legal_actions())
