"""The learner's game tree of a small OpenSpiel game, as the env plays it: every chance outcome and every move of a
uniformly random opponent with its probability, and at each learner decision the exact observation and info the
env would show (:meth:`~llm_gym.envs.openspiel.env.OpenSpielEnv.observe_at`).

Exact evaluation (:mod:`llm_gym.training.exact`) walks it to compute a policy's expected return without sampling: a node is
expanded into what comes next (:meth:`GameTree.expand`), the learner's move is applied with :meth:`GameTree.play`.
The walk follows the env's own rules: the seat is drawn uniformly (unless the env fixes it), an illegal learner
action costs the env's penalty and is replaced by a uniformly random legal one, and an episode is cut after the
game's ``max_turns`` learner decisions. Sequential games only (simultaneous moves would need a joint enumeration).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_gym.envs.history import TurnHistory
from llm_gym.envs.openspiel.env import OpenSpielEnv
from llm_gym.envs.openspiel.moves import MoveLog
from llm_gym.envs.openspiel.scoring import normalised_score
from llm_gym.errors import ConfigError, UnsupportedEnvError

_CHANCE, _TERMINAL = -1, -4  # pyspiel.PlayerId values


@dataclass(frozen=True)
class Node:
    """A point of one game, in the learner's seat (its state is owned by the node: never apply moves to it)."""

    state: Any
    seat: int
    log: tuple[Any, Any]
    """The public move log's snapshot (:meth:`MoveLog.snapshot`)."""
    decisions: tuple[int, ...]
    """Decisions made so far, per seat."""
    penalty: float = 0.0
    """Invalid-action penalties the learner has paid so far (subtracted from its return)."""


@dataclass(frozen=True)
class Leaf:
    """The end of an episode: the game's returns and the learner's return (penalties included)."""

    returns: tuple[float, ...]
    learner_return: float
    score: float
    """The env's normalised score of the end (above 0.5: a win, 0.5: a draw, below: a loss)."""
    truncated: bool


@dataclass(frozen=True)
class Chance:
    """Chance moves next: ``(probability, node)`` per outcome."""

    children: tuple[tuple[float, Node], ...]


@dataclass(frozen=True)
class Opponent:
    """An opponent moves next: ``(action, node)`` per legal action (a random opponent plays each equally often)."""

    player: int
    children: tuple[tuple[int, Node], ...]


@dataclass(frozen=True)
class Decision:
    """The learner decides at ``node``."""

    node: Node


Branch = Leaf | Chance | Opponent | Decision


class GameTree:
    """The game tree of the OpenSpiel env ``env`` (an ``OpenSpiel-*`` env instance, unwrapped or not) for exact
    evaluation. Refuses in one line what it cannot walk exactly: simultaneous moves, opponents other than the uniformly
    random one, prompts with earlier turns (``history``), and forfeits (``max_invalid_actions``)."""

    def __init__(self, env: Any) -> None:
        base = getattr(env, "unwrapped", env)
        if not isinstance(base, OpenSpielEnv):
            raise UnsupportedEnvError(f"exact evaluation walks OpenSpiel game trees; {type(base).__name__} is not one")
        if env is not base and _has_history(env):
            raise UnsupportedEnvError("exact evaluation shows each position alone: drop history= from the env's args")
        base.reset(seed=0)  # sets up the game, its opponents and the learner's rules text
        name = base.game_spec.name
        if base.game.get_type().dynamics.name != "SEQUENTIAL":
            raise UnsupportedEnvError(f"{name} has simultaneous moves; exact evaluation walks sequential games only")
        if any(spec != "random" for spec in base._opponent_specs):
            raise ConfigError(
                f"exact evaluation plays every move of a uniformly random opponent; this env's opponents are "
                f"{base._opponent_specs}: play it against opponent=random (--opponent random, the default)"
            )
        if base.max_invalid_actions is not None:
            raise ConfigError("exact evaluation does not model forfeits: make the env without max_invalid_actions")
        self.env = base
        self.game = base.game
        self.num_players = base.num_players
        self.perfect_information = base._perfect
        self.zero_sum = base._zero_sum
        self._utility = base._utility
        self._max_turns = base.max_turns
        self._penalty = base.invalid_action.penalty

    def seats(self) -> list[tuple[int, float]]:
        """``(seat, probability)`` of the learner's seat: the env's fixed seat, else each seat equally often."""
        if self.env.seat_option is not None:
            return [(int(self.env.seat_option), 1.0)]
        return [(seat, 1.0 / self.num_players) for seat in range(self.num_players)]

    def root(self, seat: int) -> Node:
        """The start of a game with the learner in ``seat``."""
        log = MoveLog(self.env.game_spec, self.num_players, self.perfect_information, self.env._namer)
        return Node(self.game.new_initial_state(), seat, log.snapshot(), (0,) * self.num_players)

    def expand(self, node: Node) -> Branch:
        """What comes next at ``node``: the end, chance, an opponent's move or the learner's decision."""
        state, seat = node.state, node.seat
        player = state.current_player()
        if player == _TERMINAL:
            return self._leaf(node, truncated=False)
        if player == seat:
            if node.decisions[seat] >= self._max_turns:
                return self._leaf(node, truncated=True)
            return Decision(node)
        if player == _CHANCE:
            return Chance(tuple((p, self._child(node, -1, a)) for a, p in state.chance_outcomes()))
        if player < 0:
            raise UnsupportedEnvError(f"{self.env.game_spec.name}: exact evaluation cannot walk node kind {player}")
        return Opponent(player, tuple((a, self._child(node, player, a)) for a in state.legal_actions(player)))

    def observe(self, node: Node) -> tuple[str, dict[str, Any]]:
        """The observation and info the env shows the learner at a :class:`Decision` node."""
        log = self._log(node)
        return self.env.observe_at(node.state, node.seat, log, node.decisions)

    def play(self, node: Node, action: int) -> list[tuple[float, Node]]:
        """The learner plays ``action`` at ``node``: one child, or where the action is illegal, the env's penalty and
        each legal action with equal probability (the env's fallback)."""
        legal = node.state.legal_actions(node.seat)
        if action in legal:
            return [(1.0, self._child(node, node.seat, action))]
        share = 1.0 / len(legal)
        return [(share, self._child(node, node.seat, a, penalty=self._penalty)) for a in legal]

    def replay(self, seat: int, history: Sequence[int]) -> Node:
        """The node after the moves ``history`` (OpenSpiel action ids, chance outcomes included, in order) with the
        learner in ``seat``: how a state met elsewhere (open_spiel's own algorithms) maps to what the learner sees."""
        node = self.root(seat)
        for action in history:
            player = node.state.current_player()
            node = self._child(node, -1 if player == _CHANCE else player, int(action))
        return node

    def information_state(self, node: Node) -> str:
        """OpenSpiel's information-state key of the learner at ``node`` (a tabular policy's row)."""
        return node.state.information_state_string(node.seat)

    # -- helpers -----------------------------------------------------------------------------------------------

    def _log(self, node: Node) -> MoveLog:
        log = MoveLog(self.env.game_spec, self.num_players, self.perfect_information, self.env._namer)
        log.restore(node.log)
        return log

    def _child(self, node: Node, player: int, action: int, penalty: float = 0.0) -> Node:
        log = self._log(node)
        log.record(node.state, player, action)  # before the move: its name may depend on the state
        state = node.state.clone()
        state.apply_action(action)
        decisions = list(node.decisions)
        if player >= 0:
            decisions[player] += 1
        return Node(state, node.seat, log.snapshot(), tuple(decisions), node.penalty + penalty)

    def _leaf(self, node: Node, truncated: bool) -> Leaf:
        if not truncated and node.decisions[node.seat] == 0:
            raise UnsupportedEnvError(
                f"{self.env.game_spec.name} can end before the learner moves (the env deals again there); exact "
                "evaluation does not model that"
            )
        returns = tuple(float(r) for r in node.state.returns())
        score = normalised_score(returns, node.seat, *self._utility, self.zero_sum)
        return Leaf(returns, returns[node.seat] - node.penalty, score, truncated)


def _has_history(env: Any) -> bool:
    while hasattr(env, "env"):
        if isinstance(env, TurnHistory) and env.turns:
            return True
        env = env.env
    return False


def outcome(score: float) -> str:
    """``win``, ``draw`` or ``loss`` of an end's normalised score."""
    return "win" if score > 0.5 else "draw" if score == 0.5 else "loss"


__all__: Sequence[str] = ("Branch", "Chance", "Decision", "GameTree", "Leaf", "Node", "Opponent", "outcome")
