"""Every learner position of a small OpenSpiel game against its uniformly random opponent, and a policy's exact
action values there: what exact policy improvement (``ppo_lora``'s ``advantage=exact``) trains on.

:class:`PositionTree` walks the game tree once (:class:`llm_gym.envs.openspiel.tree.GameTree`: every chance outcome,
every opponent reply, every learner action) and keeps, per distinct position the learner can be shown (observation and
rules text, as exact evaluation asks them), the states that show it. Given the policy's probabilities at every
position, :meth:`PositionTree.action_values` computes without sampling:

* ``Q(h, a)`` and ``V(h)`` of every state ``h`` under the policy, bottom up;
* per position ``I`` and legal action ``a``, the advantage ``A(I, a) = sum_h w(h) (Q(h, a) - V(h)) / sum_h w(h)`` over
  the states ``h`` that show ``I``, ``w(h)`` the probability that chance and the opponent lead to ``h`` (the learner's
  own choices leave the weights of one position's states in the same proportion, so this is the advantage the policy
  gradient at ``I`` reads: the exact one where a position is one state, as in tic-tac-toe, and the counterfactual one
  over the hidden cards of poker);
* the policy's expected return from the start, seats weighted as the env draws them.

States are told apart by their full OpenSpiel string, their position and the decisions made so far, so transpositions
(the same board reached in another order, showing the same observation) are walked once. Tic-tac-toe has 13,306
positions over both seats, Kuhn poker 12.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llm_gym.agent import EnvConfig
from llm_gym.envs.openspiel.tree import Chance, Decision, GameTree, Leaf, Node, Opponent
from llm_gym.errors import ConfigError

MAX_STATES = 500_000
"""Distinct learner states a position tree holds at most (tic-tac-toe: about 16,000) before it stops with one line."""

Outcome = tuple[float, int | None, float]
"""Where a learner action leads: (probability, the next learner state or None at the end, the learner's return
there (0 before the end))."""


@dataclass
class ActionValues:
    """A policy's exact values on a :class:`PositionTree` (:meth:`PositionTree.action_values`)."""

    start_return: float
    """The policy's expected return from the start (seats averaged as the env draws them)."""
    advantages: list[np.ndarray]
    """Per position, ``A(I, a)`` for each legal action in the order of its info's ``legal_actions``."""
    values: np.ndarray
    """Per position, the reach-weighted mean of ``V(h)`` over its states."""
    visits: np.ndarray
    """Per position, how often the policy meets it in an episode (chance, the opponent and its own probabilities;
    seats weighted as the env draws them): the weights of the policy gradient's positions."""


class PositionTree:
    """The learner positions of ``env`` (an ``OpenSpiel-*`` env config against the random opponent) and the
    transitions between its states (see the module's docstring)."""

    def __init__(self, env: EnvConfig) -> None:
        made = env.make()
        try:
            self._tree = GameTree(made)
            self.positions: list[tuple[str, dict[str, Any]]] = []
            """(observation, info) of each distinct position, in the order the walk met them."""
            self._position_index: dict[tuple[str, str], int] = {}
            self._state_index: dict[tuple, int] = {}
            self._state_position: list[int] = []
            self._moves: list[list[list[Outcome]]] = []
            """Per state, per legal action (the position's order), where it leads."""
            self._depth: list[int] = []
            self._starts = [(p, self._outcomes(self._tree.root(seat))) for seat, p in self._tree.seats()]
            # Every move adds to a state's history, so depth orders each state before the states it leads to.
            self._order = sorted(range(self.states), key=self._depth.__getitem__)
            self._reach = self._reach_of(None)
        finally:
            made.close()

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def states(self) -> int:
        """Distinct learner states (a position shows one or more of them)."""
        return len(self._moves)

    def action_values(self, probs: Sequence[np.ndarray]) -> ActionValues:
        """The exact values of the policy that plays ``probs[i]`` (over the legal actions, in their order) at
        position ``i``."""
        if len(probs) != len(self.positions):
            raise ValueError(f"one distribution per position: got {len(probs)} for {len(self.positions)}")
        state_values = np.zeros(self.states)
        action_q: list[np.ndarray] = [np.empty(0)] * self.states
        for state in reversed(self._order):  # the deepest first: a state's successors are all deeper
            q = np.array([_expected(moves, state_values) for moves in self._moves[state]])
            action_q[state] = q
            state_values[state] = float(np.asarray(probs[self._state_position[state]], dtype=np.float64) @ q)
        sums = [np.zeros(len(info["legal_actions"])) for _, info in self.positions]
        weights, value_sums = np.zeros(len(self.positions)), np.zeros(len(self.positions))
        for state, position in enumerate(self._state_position):
            reach = self._reach[state]
            sums[position] += reach * (action_q[state] - state_values[state])
            weights[position] += reach
            value_sums[position] += reach * state_values[state]
        safe = np.where(weights > 0, weights, 1.0)
        start = sum(p * _expected(outcomes, state_values) for p, outcomes in self._starts)
        advantages = [s / w for s, w in zip(sums, safe, strict=True)]
        return ActionValues(float(start), advantages, value_sums / safe, self.visits(probs))

    def visits(self, probs: Sequence[np.ndarray]) -> np.ndarray:
        """Per position, the probability that the policy ``probs`` reaches it (summed over its states)."""
        visits = np.zeros(len(self.positions))
        np.add.at(visits, np.asarray(self._state_position, dtype=np.int64), self._reach_of(probs))
        return visits

    # -- the walk ------------------------------------------------------------------------------------------------

    def _outcomes(self, node: Node) -> list[Outcome]:
        """Where ``node`` leads, through chance and the opponent's replies, to the next learner states or ends."""
        out: list[Outcome] = []
        stack = [(node, 1.0)]
        while stack:
            current, p = stack.pop()
            branch = self._tree.expand(current)
            if isinstance(branch, Leaf):
                out.append((p, None, branch.learner_return))
            elif isinstance(branch, Decision):
                out.append((p, self._state(current), 0.0))
            elif isinstance(branch, Chance):
                stack.extend((child, p * q) for q, child in branch.children)
            elif isinstance(branch, Opponent):
                stack.extend((child, p / len(branch.children)) for _, child in branch.children)
        return out

    def _state(self, node: Node) -> int:
        observation, info = self._tree.observe(node)
        position_key = (observation, str(info.get("instructions", "")))
        position = self._position_index.get(position_key)
        if position is None:
            position = self._position_index[position_key] = len(self.positions)
            self.positions.append((observation, info))
        key = (node.seat, str(node.state), position, node.decisions, node.penalty)
        state = self._state_index.get(key)
        if state is not None:
            return state
        state = self._state_index[key] = len(self._moves)
        if state >= MAX_STATES:
            raise ConfigError(
                f"{self._tree.env.game_spec.name} has more than {MAX_STATES:,} learner states: too large for exact "
                "advantages (use advantage=group)"
            )
        self._state_position.append(position)
        self._depth.append(len(node.state.history()))
        self._moves.append([])
        self._moves[state] = [
            [(p * q, successor, ret) for q, child in self._tree.play(node, int(a))
             for p, successor, ret in self._outcomes(child)]
            for a in info["legal_actions"]
        ]  # fmt: skip
        return state

    def _reach_of(self, probs: Sequence[np.ndarray] | None) -> np.ndarray:
        """Per state, how likely it is reached, summed over the paths to it, in one pass from the shallowest state to
        the deepest: chance and the opponent weighted by their probabilities, the learner's actions by ``probs`` (the
        policy's, per position) or, with None, 1 each (the reach that weighs a position's states)."""
        reach = np.zeros(self.states)
        for seat_probability, outcomes in self._starts:
            for p, successor, _ in outcomes:
                if successor is not None:
                    reach[successor] += seat_probability * p
        for state in self._order:
            moves = self._moves[state]
            policy = np.ones(len(moves)) if probs is None else np.asarray(probs[self._state_position[state]], float)
            for pi, outcomes in zip(policy, moves, strict=True):
                for p, successor, _ in outcomes:
                    if successor is not None:
                        reach[successor] += reach[state] * pi * p
        return reach


def _expected(outcomes: Sequence[Outcome], state_values: np.ndarray) -> float:
    return sum(p * (ret if successor is None else state_values[successor]) for p, successor, ret in outcomes)
