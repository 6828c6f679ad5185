"""``mcts``: OpenSpiel's own MCTS bot (random rollouts) playing the learner's seat of any OpenSpiel env.

It does not learn; ``train`` records how it plays, a reference line for the learners. The policy rebuilds the game
from ``info["game_string"]`` and ``info["history"]`` and searches from there. Where information is hidden it searches
states sampled from *its own seat's* information state (the same determinization the MCTS opponent uses), so it
never looks at the other seats' cards even though the history in ``info`` holds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import llm_gym
from llm_gym.agent import AgentConfig, EnvConfig, Policy
from llm_gym.agents.baselines import OpenSpielAgent, OpenSpielPolicy
from llm_gym.agents.openspiel_best_response import BestResponseAgent
from llm_gym.agents.openspiel_solver import SolverAgent
from llm_gym.envs.catalog import env_spec
from llm_gym.envs.openspiel.catalog import game_spec
from llm_gym.envs.openspiel.core import load_game, pyspiel_module, replay
from llm_gym.envs.openspiel.opponents import MCTSConfig, MCTSOpponent
from llm_gym.errors import UnsupportedEnvError


@dataclass(frozen=True, kw_only=True)
class MCTSAgentConfig(AgentConfig):
    """The MCTS budget; every field left at None takes the game's default from the OpenSpiel catalog."""

    simulations: int | None = None
    """Simulations per move (None: the game's default, sized for well under a second a move)."""
    rollouts: int = 1
    """Random rollouts per leaf evaluation."""
    uct_c: float = 2.0
    """UCT exploration constant."""
    rollout_length: int | None = None
    """Cut rollouts after this many moves (None: the game's default; 0: play to the end)."""
    determinizations: int = 4
    """Sampled states searched per move where information is hidden."""


class MCTSPolicy(OpenSpielPolicy):
    """Searches every env's current state with one MCTS bot per game."""

    agent_name = "mcts"

    def __init__(self, config: MCTSAgentConfig) -> None:
        super().__init__(config)
        self.mcts = MCTSConfig(
            simulations=config.simulations,
            rollouts=config.rollouts,
            uct_c=config.uct_c,
            rollout_length=config.rollout_length,
            determinizations=config.determinizations,
        )

    def act_one(self, info: Mapping[str, Any]) -> int:
        game_string, history = self.game_history(info)
        game, bot = self.per_game(game_string, lambda: self._bot(game_string, info["game"]))
        return bot.act(replay(game, history), int(info["player"]))

    def _bot(self, game_string: str, name: str) -> tuple[Any, Any]:
        game = pyspiel_module().load_game(game_string)
        seed = self.config.seed * 1_000_003 + len(self._per_game)  # each game's bot its own stream
        return game, MCTSOpponent(game, game_spec(name), self.mcts, seed)


class MCTSAgent(OpenSpielAgent):
    name = "mcts"
    description = "OpenSpiel's MCTS bot with random rollouts (determinized where information is hidden)."
    Config = MCTSAgentConfig

    def openspiel_policy(self, env: EnvConfig) -> Policy:
        game = env_spec(env.env_id).kwargs.get("game") or env.kwargs.get("game")
        if game is not None:
            _check_terminal_rewards(str(game))
        return MCTSPolicy(self.config)


def _check_terminal_rewards(name: str) -> None:
    game = load_game(name, game_spec(name).variants[0])
    if game.get_type().reward_model != pyspiel_module().GameType.RewardModel.TERMINAL:
        raise UnsupportedEnvError(f"OpenSpiel's MCTS needs terminal rewards; {name} pays rewards every move")


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(MCTSAgent)
    register(SolverAgent)
    register(BestResponseAgent)
