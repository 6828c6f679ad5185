"""Sample a full game state consistent with what one player may know, so a perfect-information search (OpenSpiel's
MCTS) can play an imperfect-information game without peeking at the learner's cards.

This is determinized ("perfect-information Monte Carlo") search: the MCTS opponent searches a few sampled states and
adds up the visit counts. Three ways to sample, picked per game in the catalog:

* ``native``: OpenSpiel's own ``State.resample_from_infostate`` (poker, hearts, euchre, bridge, gin rummy);
* ``chance``: replace each hidden chance outcome (e.g. the other players' dice) by a fresh draw, keeping it only if
  the player's information state is unchanged and the rest of the history stays legal (Liar's Dice);
* ``history``: rejection-sample the other players' hidden moves (Phantom Tic-Tac-Toe): replay from the start with
  the player's own moves fixed and random moves for the others, accept when the player would have seen exactly the
  same information states.

When no consistent sample is found within the budget the true state is used, and :attr:`Determinizer.fallbacks`
counts how often that happened (a test keeps it at zero on the games listed above).
"""

from __future__ import annotations

import random
from typing import Any

from llm_gym.envs.openspiel.core import sample_chance

_HISTORY_TRIES = 300


class Determinizer:
    """Samples states consistent with ``player``'s information state with a seeded generator."""

    def __init__(self, game: Any, method: str, rng: random.Random) -> None:
        self.game = game
        self.method = method
        self.rng = rng
        self.fallbacks = 0

    def sample(self, state: Any, player: int) -> Any:
        """A state the player cannot tell apart from ``state`` (``state`` itself for perfect information)."""
        if self.method == "native":
            try:
                return state.resample_from_infostate(player, self.rng.random)
            except Exception:  # noqa: BLE001 - pyspiel raises a bare SpielError for "not implemented"
                self.method = "chance"
        if self.method == "chance":
            return self._resample_chance(state, player)
        if self.method == "history":
            return self._resample_history(state, player)
        return state

    def _replay(self, actions: list[int]) -> Any | None:
        state = self.game.new_initial_state()
        for action in actions:
            if action not in state.legal_actions():
                return None
            state.apply_action(action)
        return state

    def _resample_chance(self, state: Any, player: int) -> Any:
        history = list(state.history())
        target = state.information_state_string(player)
        replay = self.game.new_initial_state()
        chance_positions = []
        for index, action in enumerate(history):
            if replay.is_chance_node():
                chance_positions.append(index)
            replay.apply_action(action)
        for index in chance_positions:
            prefix = self._replay(history[:index])
            if prefix is None:
                continue
            candidate = history.copy()
            candidate[index] = sample_chance(prefix, self.rng)
            if candidate[index] == history[index]:
                continue
            resampled = self._replay(candidate)
            if resampled is not None and resampled.information_state_string(player) == target:
                history = candidate
        result = self._replay(history)
        return result if result is not None else state

    def _resample_history(self, state: Any, player: int) -> Any:
        # The player's own decision points in the real history: what it saw there and what it did.
        seen, own_actions = [], []
        replay = self.game.new_initial_state()
        for action in state.history():
            if not replay.is_chance_node() and replay.current_player() == player:
                seen.append(replay.information_state_string(player))
                own_actions.append(action)
            replay.apply_action(action)
        seen.append(state.information_state_string(player))
        for _ in range(_HISTORY_TRIES):
            sampled = self._try_history(seen, own_actions, player)
            if sampled is not None:
                return sampled
        self.fallbacks += 1
        return state

    def _try_history(self, seen: list[str], own_actions: list[int], player: int) -> Any | None:
        state = self.game.new_initial_state()
        turn = 0
        while not state.is_terminal():
            if state.is_chance_node():
                state.apply_action(sample_chance(state, self.rng))
                continue
            if state.current_player() == player:
                if state.information_state_string(player) != seen[turn]:
                    return None
                if turn == len(own_actions):
                    return state
                state.apply_action(own_actions[turn])
                turn += 1
                continue
            legal = state.legal_actions()
            state.apply_action(legal[self.rng.randrange(len(legal))])
        return None
