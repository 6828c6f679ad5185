"""``best_response``: the exact best response to the env's uniformly random opponent, for small OpenSpiel games with
hidden information (Kuhn poker, Leduc poker, ...), where minimax (``solver``) does not apply.

OpenSpiel's ``BestResponsePolicy`` walks the whole game tree once per seat and game, with the other seats playing
uniformly at random, and returns for every information state of the learner's seat the action with the highest
expected return. It acts on the information state only (OpenSpiel groups the states by what the seat sees), so it
never uses the other seats' cards even though the history in ``info`` holds them. That makes it a fair
demonstrator for ``llm-gym demos``: the best a player can do against ``random``, a fixed function of what it sees.

It does not learn; ``train`` records how it plays, a reference line beside the learners. A game whose tree has
more than ``max_states`` states is refused with one line, as is an env whose opponent is not ``random``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_gym.agent import AgentConfig, EnvConfig, Policy
from llm_gym.agents.baselines import OpenSpielAgent, OpenSpielPolicy
from llm_gym.envs.openspiel.core import pyspiel_module, replay
from llm_gym.errors import UnsupportedEnvError


@dataclass(frozen=True, kw_only=True)
class BestResponseConfig(AgentConfig):
    """How large a game the exact best response accepts."""

    max_states: int = 200_000
    """Refuse a game whose tree has more states than this (Kuhn poker has 58, Leduc poker about 9,500); the best
    response walks the whole tree."""


def count_states(game: Any, limit: int) -> int:
    """The number of states in ``game``'s tree, or ``limit + 1`` as soon as it exceeds ``limit``."""
    count, stack = 0, [game.new_initial_state()]
    while stack:
        state = stack.pop()
        count += 1
        if count > limit:
            return count
        if state.is_terminal():
            continue
        if state.is_chance_node():
            stack.extend(state.child(action) for action, _ in state.chance_outcomes())
        else:
            stack.extend(state.child(action) for action in state.legal_actions())
    return count


class BestResponsePolicy(OpenSpielPolicy):
    """Plays the best response to uniform random play in every env's current state (one per game and seat)."""

    agent_name = "best_response"

    def action_values(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[list[float]]:
        """The expected return of each legal action (``info["legal_actions"]`` order) in the mover's information
        state, the best response playing on and the other seats uniformly at random: the histories the seat cannot
        tell apart weighted by how likely the others' play makes them. Demonstrations record these beside the
        move, so a tie shows as one (Kuhn poker's first seat with the king: betting and passing are both worth 1.5
        chips against ``random``)."""
        rows = []
        for info in infos:
            state, response, seat = self._state(info)
            infoset = response.infosets[state.information_state_string(seat)]
            reach = sum(weight for _, weight in infoset)
            rows.append(
                [
                    sum(weight * response.q_value(s, int(a)) for s, weight in infoset) / reach
                    for a in info["legal_actions"]
                ]
            )
        return rows

    def act_one(self, info: Mapping[str, Any]) -> int:
        state, response, _ = self._state(info)
        probabilities = response.action_probabilities(state)
        # The best response puts probability 1 on one action; the lowest id wins a tie, so play is deterministic.
        return min(probabilities, key=lambda action: (-probabilities[action], action))

    def _state(self, info: Mapping[str, Any]) -> tuple[Any, Any, int]:
        """The OpenSpiel state of ``info``, the seat to move's best response, and that seat."""
        game_string, history = self.game_history(info)
        seat = int(info["player"])
        game, response = self.per_game((game_string, seat), lambda: self._response(game_string, seat))
        return replay(game, history), response, seat

    def _response(self, game_string: str, seat: int) -> tuple[Any, Any]:
        # open_spiel's Python algorithms: not for the CLI, which loads this plugin on every run
        from llm_gym.envs.openspiel.algorithms import best_response_to_uniform

        game = pyspiel_module().load_game(game_string)
        name = game.get_type().short_name
        if game.get_type().dynamics != pyspiel_module().GameType.Dynamics.SEQUENTIAL:
            raise UnsupportedEnvError(f"the best_response agent plays turn-based games; {name} is not one")
        if count_states(game, self.config.max_states) > self.config.max_states:
            raise UnsupportedEnvError(
                f"{name} has over {self.config.max_states:,} states: too large for an exact best response; "
                f"use --agent mcts (or raise --set max_states=...)"
            )
        return game, best_response_to_uniform(game, seat)


class BestResponseAgent(OpenSpielAgent):
    name = "best_response"
    description = "Exact best response to a uniformly random opponent in small OpenSpiel games (poker and the like)."
    Config = BestResponseConfig

    def openspiel_policy(self, env: EnvConfig) -> Policy:
        opponent = env.kwargs.get("opponent") or "random"
        profile = env.kwargs.get("profile", "default")
        if opponent != "random" or profile != "default":
            raise UnsupportedEnvError(
                "the best_response agent answers a uniformly random opponent; drop --env-arg opponent/profile "
                f"(got opponent={opponent!r}, profile={profile!r})"
            )
        return BestResponsePolicy(self.config)
