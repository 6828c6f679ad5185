"""The position tree of small OpenSpiel games (llm_gym.training.position_tree): a policy's exact return from the start
equals open_spiel's own expected returns, advantages average to zero under the policy at every position, and policy
iteration on the advantages reaches the best response's value against the random opponent (which checks the
reach-weighted advantages of poker's hidden cards as well as tic-tac-toe's transpositions)."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms.expected_game_score import policy_value

from llm_gym.agent import EnvConfig
from llm_gym.envs.openspiel.tree import GameTree
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.training.exact import best_response_return
from llm_gym.training.position_tree import PositionTree


def _uniform(tree: PositionTree) -> list[np.ndarray]:
    return [np.full(len(info["legal_actions"]), 1 / len(info["legal_actions"])) for _, info in tree.positions]


@pytest.mark.parametrize("game", ["tic_tac_toe", "kuhn_poker"])
def test_the_uniform_policy_s_return_is_open_spiel_s(game: str) -> None:
    tree = PositionTree(EnvConfig(f"OpenSpiel-{game}-v0", {"seat": 0}))
    spiel = pyspiel.load_game(game)
    expected = policy_value(spiel.new_initial_state(), [policy_lib.UniformRandomPolicy(spiel)] * 2)[0]
    assert tree.action_values(_uniform(tree)).start_return == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("game", "args", "positions"), [("kuhn_poker", {}, 12), ("tic_tac_toe", {"seat": 0}, 6589)])
def test_policy_iteration_on_the_advantages_reaches_the_best_response(game: str, args: dict, positions: int) -> None:
    env = EnvConfig(f"OpenSpiel-{game}-v0", args)
    tree = PositionTree(env)
    assert len(tree) == positions
    rng = np.random.default_rng(0)
    probs = [rng.dirichlet(np.ones(len(info["legal_actions"]))) for _, info in tree.positions]
    for _ in range(8):
        values = tree.action_values(probs)
        for p, a in zip(probs, values.advantages, strict=True):
            assert float(p @ a) == pytest.approx(0.0, abs=1e-9)  # an advantage is measured against the policy
        probs = [np.eye(len(a))[int(np.argmax(a))] for a in values.advantages]
    best = best_response_return(GameTree(env.make()))
    assert tree.action_values(probs).start_return == pytest.approx(best, abs=1e-9)


def test_a_game_it_cannot_walk_is_refused_in_one_line() -> None:
    with pytest.raises((ConfigError, UnsupportedEnvError), match="random"):
        PositionTree(EnvConfig("OpenSpiel-tic_tac_toe-v0", {"opponent": "mcts"}))
    tree = PositionTree(EnvConfig("OpenSpiel-kuhn_poker-v0"))
    with pytest.raises(ValueError, match="one distribution per position"):
        tree.action_values(_uniform(tree)[:3])


def test_visits_are_how_often_the_policy_meets_each_position() -> None:
    """Kuhn poker: the first decision of each seat is met with the deal's probability (1/3 per card, half the time in
    each seat); a position after the learner's own pass is met as often as the policy passes there."""
    tree = PositionTree(EnvConfig("OpenSpiel-kuhn_poker-v0"))
    rng = np.random.default_rng(1)
    probs = [rng.dirichlet(np.ones(len(info["legal_actions"]))) for _, info in tree.positions]
    visits = tree.action_values(probs).visits
    first = [i for i, (observation, info) in enumerate(tree.positions) if info["turn"] == 0 and info["player"] == 0]
    assert len(first) == 3 and all(visits[i] == pytest.approx(1 / 6) for i in first)
    # Per seat, the decisions of an episode: seat 0 decides once or twice, seat 1 once; so the visits sum to the
    # expected number of decisions, at least one per episode.
    assert visits.sum() >= 1.0 - 1e-9 and visits.sum() <= 1.5 + 1e-9
