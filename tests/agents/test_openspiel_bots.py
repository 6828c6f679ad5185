"""The ``mcts`` agent (and ``random``) on OpenSpiel envs, through the plugin registry and the CLI; the refusal every
OpenSpiel baseline policy shares."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig
from llm_gym.agents.openspiel_best_response import BestResponseConfig, BestResponsePolicy
from llm_gym.agents.openspiel_bots import MCTSAgentConfig, MCTSPolicy
from llm_gym.agents.openspiel_solver import SolverConfig, SolverPolicy
from llm_gym.cli import build_app
from llm_gym.envs.openspiel.catalog import task_id_of
from llm_gym.errors import UnsupportedEnvError
from llm_gym.plugins import get_agent
from llm_gym.training.evaluation import run_episodes


def test_mcts_is_a_registered_agent_that_beats_random_at_tic_tac_toe() -> None:
    agent = get_agent("mcts")(MCTSAgentConfig(simulations=200, seed=1))
    results = run_episodes(
        agent.policy(EnvConfig("OpenSpiel-tic_tac_toe-v0")), EnvConfig("OpenSpiel-tic_tac_toe-v0"), 6
    )
    returns = [r.episode_return for r in results]
    assert sum(r > 0 for r in returns) >= 4 and min(returns) >= 0  # wins, at worst a draw


@pytest.mark.parametrize("game", ["goofspiel", "leduc_poker", "liars_dice", "phantom_ttt", "hearts", "backgammon"])
def test_mcts_plays_legal_moves_in_chance_hidden_information_and_simultaneous_games(game: str) -> None:
    policy = MCTSPolicy(MCTSAgentConfig(simulations=8, determinizations=2, rollout_length=30))
    results = run_episodes(policy, EnvConfig("OpenSpiel-v0"), 1, task_ids=[task_id_of(game)], max_steps=6)
    assert results[0].invalid_actions == 0 and results[0].final_info["invalid_actions"] == 0


@pytest.mark.parametrize(
    ("policy", "name"),
    [
        (MCTSPolicy(MCTSAgentConfig()), "mcts"),
        (SolverPolicy(SolverConfig()), "solver"),
        (BestResponsePolicy(BestResponseConfig()), "best_response"),
    ],
)
def test_openspiel_policies_refuse_an_info_without_the_game_history(policy, name: str) -> None:
    # The shared OpenSpielPolicy check: a policy handed another env's info (no game string or history) names itself.
    with pytest.raises(UnsupportedEnvError, match=f"the {name} agent plays OpenSpiel envs only"):
        policy.act([""], [{"legal_actions": [0, 1]}])


def test_mcts_refuses_envs_it_cannot_search() -> None:
    agent = get_agent("mcts")()
    with pytest.raises(UnsupportedEnvError, match="OpenSpiel envs only"):
        agent.policy(EnvConfig("LLMBreakout-v0"))
    with pytest.raises(UnsupportedEnvError, match="terminal rewards"):
        agent.policy(EnvConfig("OpenSpiel-2048-v0"))


def test_cli_plays_openspiel_with_mcts_and_random() -> None:
    runner = CliRunner()
    for agent, extra in (("mcts", ["--set", "simulations=50"]), ("random", [])):
        result = runner.invoke(
            build_app(),
            ["play", "--agent", agent, "--env", "OpenSpiel-tic_tac_toe-v0", "--episodes", "3", "--json", *extra],
        )
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["agent"] == agent and len(report["episodes"]) == 3
        assert all(-1 <= e["return"] <= 1 and e["invalid_actions"] == 0 for e in report["episodes"])
