"""``solver``: exact play of small two-player zero-sum OpenSpiel games (tic-tac-toe and the like), by memoised
minimax over the whole game tree. A demonstrator whose every move is provably optimal, where MCTS is noisy.

Among the moves that keep the game-theoretic value (so it never loses a won or drawn position against anyone), it
picks, by default, the one with the best expected score against a uniformly random opponent, computed exactly over
the same tree: against ``random`` it wins as often as an optimal player can, and against MCTS it still never loses.
A game too large to solve (more states than ``max_states``) is refused with one line that points at ``mcts``.

It does not learn; ``train`` records how it plays, a reference line beside the learners.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llm_gym.agent import AgentConfig, EnvConfig, Policy
from llm_gym.agents.baselines import OpenSpielAgent, OpenSpielPolicy
from llm_gym.envs.openspiel.core import pyspiel_module, replay
from llm_gym.errors import UnsupportedEnvError


@dataclass(frozen=True, kw_only=True)
class SolverConfig(AgentConfig):
    """How the exact solver breaks ties and how large a game it accepts."""

    tiebreak: Literal["random_opponent", "first"] = "random_opponent"
    """Among the optimal moves: random_opponent takes the one with the best exact expected score against a uniformly
    random opponent; first takes the lowest action id (both never lose a position an optimal player would not)."""
    max_states: int = 2_000_000
    """Refuse a game once the search has seen this many distinct states (tic-tac-toe has 5,478)."""


class GameSolver:
    """Minimax values (for every seat) and random-opponent expectations of one game's states, memoised."""

    def __init__(self, game: Any, max_states: int) -> None:
        game_type = game.get_type()
        pyspiel = pyspiel_module()
        if (
            game.num_players() != 2
            or game_type.information != pyspiel.GameType.Information.PERFECT_INFORMATION
            or game_type.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC
            or game_type.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL
        ):
            raise UnsupportedEnvError(
                f"the solver plays two-player, sequential, deterministic perfect-information games; "
                f"{game_type.short_name} is not one: use --agent mcts"
            )
        self.game, self.max_states = game, max_states
        self._minimax: dict[str, float] = {}
        self._expected: dict[tuple[str, int], float] = {}
        self._low, self._high = game.min_utility(), game.max_utility()

    def _key(self, state: Any) -> str:
        return f"{state.current_player()}|{state}"

    def value(self, state: Any) -> float:
        """Player 0's return under optimal play from ``state`` (player 1's is its negation: zero-sum)."""
        if state.is_terminal():
            return float(state.returns()[0])
        key = self._key(state)
        cached = self._minimax.get(key)
        if cached is not None:
            return cached
        if len(self._minimax) >= self.max_states:
            raise UnsupportedEnvError(
                f"{self.game.get_type().short_name} has over {self.max_states:,} states: too large to solve exactly; "
                f"use --agent mcts (or raise --set max_states=...)"
            )
        values = [self.value(state.child(a)) for a in state.legal_actions()]
        result = max(values) if state.current_player() == 0 else min(values)
        self._minimax[key] = result
        return result

    def action_values(self, state: Any) -> dict[int, float]:
        """The mover's minimax value after each legal action."""
        sign = 1.0 if state.current_player() == 0 else -1.0
        return {a: sign * self.value(state.child(a)) for a in state.legal_actions()}

    def optimal_actions(self, state: Any) -> list[int]:
        """The legal actions that keep the mover's minimax value."""
        values = self.action_values(state)
        best = max(values.values())
        return [a for a, v in values.items() if v >= best - 1e-9]

    def expected(self, state: Any, seat: int) -> float:
        """``seat``'s expected return when it plays optimal moves (best expectation first) and the other seat
        plays uniformly at random."""
        if state.is_terminal():
            return float(state.returns()[seat])
        key = (self._key(state), seat)
        cached = self._expected.get(key)
        if cached is not None:
            return cached
        if state.current_player() == seat:
            result = max(self.expected(state.child(a), seat) for a in self.optimal_actions(state))
        else:
            actions = state.legal_actions()
            result = sum(self.expected(state.child(a), seat) for a in actions) / len(actions)
        self._expected[key] = result
        return result

    def best_action(self, state: Any, tiebreak: str) -> int:
        candidates = self.optimal_actions(state)
        if tiebreak == "first" or len(candidates) == 1:
            return min(candidates)
        seat = state.current_player()
        return max(candidates, key=lambda a: (self.expected(state.child(a), seat), -a))


class SolverPolicy(OpenSpielPolicy):
    """Plays the solver's move in every env's current state (one solver, shared memo, per game)."""

    agent_name = "solver"

    def action_values(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[list[float]]:
        """The mover's minimax value of each legal action (``info["legal_actions"]`` order): what demonstrations
        record beside the move, so a learner can tell every optimal move from the losing ones."""
        rows = []
        for info in infos:
            solver, state = self._state(info)
            values = solver.action_values(state)
            rows.append([values[int(a)] for a in info["legal_actions"]])
        return rows

    def act_one(self, info: Mapping[str, Any]) -> int:
        solver, state = self._state(info)
        return solver.best_action(state, self.config.tiebreak)

    def _state(self, info: Mapping[str, Any]) -> tuple[GameSolver, Any]:
        game_string, history = self.game_history(info)
        solver = self.per_game(
            game_string, lambda: GameSolver(pyspiel_module().load_game(game_string), self.config.max_states)
        )
        return solver, replay(solver.game, history)


class SolverAgent(OpenSpielAgent):
    name = "solver"
    description = "Exact minimax play of small two-player OpenSpiel games (ties: best against a random opponent)."
    Config = SolverConfig

    def openspiel_policy(self, env: EnvConfig) -> Policy:
        return SolverPolicy(self.config)
