"""The ``solver`` agent: exact minimax play of tic-tac-toe (it never loses, not even to a strong MCTS, wins as an
optimal player can against random, takes a win in one and blocks a loss in one) and one-line refusals elsewhere."""

from __future__ import annotations

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.openspiel_solver import GameSolver, SolverConfig, SolverPolicy
from llm_gym.envs.openspiel.core import pyspiel_module
from llm_gym.errors import UnsupportedEnvError
from llm_gym.plugins import get_agent
from llm_gym.training.evaluation import run_episodes

TTT = "OpenSpiel-tic_tac_toe-v0"


def _state(moves: list[int]):
    state = pyspiel_module().load_game("tic_tac_toe").new_initial_state()
    for move in moves:
        state.apply_action(move)
    return state


def test_tic_tac_toe_is_a_draw_and_the_solver_wins_or_blocks_in_one() -> None:
    solver = GameSolver(pyspiel_module().load_game("tic_tac_toe"), max_states=100_000)
    assert solver.value(_state([])) == 0.0
    assert len(solver._minimax) == 4520  # the non-terminal positions reachable in tic-tac-toe
    # x on 0 and 1, o on 3 and 4, x to move: 2 wins at once.
    assert solver.best_action(_state([0, 3, 1, 4]), "first") == 2
    # x on 0 and 1, o on 4, o to move: blocking at 2 is o's only move that does not lose.
    assert solver.optimal_actions(_state([0, 4, 1])) == [2]


def test_never_loses_and_beats_random_as_often_as_an_optimal_player_can() -> None:
    policy = get_agent("solver")().policy(EnvConfig(TTT))
    against_random = run_episodes(policy, EnvConfig(TTT), 60, seed=0, num_envs=8)
    scores = [r.score for r in against_random]
    assert min(scores) >= 0.5 and sum(s == 1.0 for s in scores) >= 54  # 95% on 400 games; x wins all
    strong = EnvConfig(TTT, {"opponent": "mcts", "mcts": {"simulations": 300}})
    assert min(r.score for r in run_episodes(policy, strong, 6, seed=0, num_envs=6)) >= 0.5


def test_tiebreak_against_random_wins_more_than_the_first_optimal_move() -> None:
    env = EnvConfig(TTT)
    wins = {}
    for tiebreak in ("random_opponent", "first"):
        results = run_episodes(SolverPolicy(SolverConfig(tiebreak=tiebreak)), env, 200, seed=0, num_envs=8)
        wins[tiebreak] = sum(r.score == 1.0 for r in results)
    assert wins["random_opponent"] > wins["first"]


def test_refuses_games_it_cannot_solve() -> None:
    agent = get_agent("solver")()
    with pytest.raises(UnsupportedEnvError, match="OpenSpiel envs only"):
        agent.policy(EnvConfig("LLMBreakout-v0"))
    with pytest.raises(UnsupportedEnvError, match="use --agent mcts"):
        GameSolver(pyspiel_module().load_game("kuhn_poker"), 1000)
    with pytest.raises(UnsupportedEnvError, match="too large to solve"):
        GameSolver(pyspiel_module().load_game("tic_tac_toe"), max_states=100).value(_state([]))
