"""Action names (``id -> name``) and the log of public moves, kept cheap because every step shows them.

Most OpenSpiel games name an action the same way in every state (``x(0,2)``, ``B d4``, ``QS``), so their names are
looked up once per (seat, action) and kept with the formatted ``id -> name`` line; the catalog marks the few whose
names depend on the position (chess SAN, backgammon, quoridor, amazons), and a test checks the others over real play.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_gym.envs.openspiel import text
from llm_gym.envs.openspiel.catalog import GameSpec
from llm_gym.envs.openspiel.text import ascii_text, seat_name


class ActionNamer:
    """ASCII names of a seat's actions; duplicates (rare after ASCII folding) get ``#id`` appended."""

    def __init__(self, num_players: int, static: bool) -> None:
        # Per seat: action -> (name, "id -> name" line). Chance outcomes are never cached: the same outcome id means
        # different things at different chance nodes (hearts: a pass direction, then a card).
        self._cache: list[dict[int, tuple[str, str]]] | None = [{} for _ in range(num_players)] if static else None

    def name(self, state: Any, player: int, action: int) -> str:
        """The name of one action of ``player`` (``-1``: a chance outcome) in ``state``."""
        if self._cache is None or player < 0:
            return ascii_text(state.action_to_string(player, action))
        return self._entry(self._cache[player], state, player, action)[0]

    def lines(self, state: Any, player: int, legal: Sequence[int]) -> tuple[list[str], list[str]]:
        """(names, ``id -> name`` lines) of ``legal``, parallel to it."""
        if self._cache is None:
            names = [ascii_text(state.action_to_string(player, a)) for a in legal]
            lines = [f"{a} -> {n}" for a, n in zip(legal, names, strict=True)]
        else:
            cache = self._cache[player]
            entries = [cache.get(a) or self._entry(cache, state, player, a) for a in legal]
            names = [e[0] for e in entries]
            lines = [e[1] for e in entries]
        if len(set(names)) != len(names):
            counts: dict[str, int] = {}
            for name in names:
                counts[name] = counts.get(name, 0) + 1
            names = [f"{n}#{a}" if counts[n] > 1 else n for n, a in zip(names, legal, strict=True)]
            lines = [f"{a} -> {n}" for a, n in zip(legal, names, strict=True)]
        return names, lines

    @staticmethod
    def _entry(cache: dict[int, tuple[str, str]], state: Any, player: int, action: int) -> tuple[str, str]:
        entry = cache.get(action)
        if entry is None:
            name = ascii_text(state.action_to_string(player, action))
            entry = cache[action] = (name, f"{action} -> {name}")
        return entry


class MoveLog:
    """Public moves of a perfect-information game, so each seat can be told what happened since its last turn.

    In imperfect-information games nothing is logged: a move may be hidden (phantom tic-tac-toe) and each seat's
    OpenSpiel string already says what that seat may know.
    """

    def __init__(self, spec: GameSpec, num_players: int, enabled: bool, namer: ActionNamer) -> None:
        self.enabled = enabled
        self.namer = namer
        self._played = [f"{seat_name(spec, p)} played " for p in range(num_players)]
        self.moves: list[tuple[int, str]] = []
        self.seen = [0] * num_players

    def record(self, state: Any, player: int, action: int) -> None:
        """Call before applying ``action`` (its name may depend on the state it is played in)."""
        if self.enabled:
            if player >= 0:
                self.seen[player] = len(self.moves)
            prefix = "chance: " if player < 0 else self._played[player]
            self.moves.append((player, prefix + self.namer.name(state, player, action)))

    def record_joint(self, state: Any, joint: Sequence[int]) -> None:
        """Call before applying a simultaneous round's ``joint`` action: every acting seat's move is logged as one
        round, so each seat is later told all the others' moves of that round (not only those of later seats)."""
        if self.enabled:
            start = len(self.moves)
            for player, action in enumerate(joint):
                if state.legal_actions(player):  # a seat with nothing to choose this round made no move
                    self.seen[player] = start
                    self.moves.append((player, self._played[player] + self.namer.name(state, player, action)))

    def recent(self, player: int) -> list[str]:
        """Other seats' moves (and chance outcomes) since ``player`` last moved."""
        if not self.enabled:
            return []
        return [m for p, m in self.moves[self.seen[player] :] if p != player]

    def snapshot(self) -> tuple[tuple[tuple[int, str], ...], tuple[int, ...]]:
        return tuple(self.moves), tuple(self.seen)

    def restore(self, snapshot: tuple[tuple[tuple[int, str], ...], tuple[int, ...]]) -> None:
        self.moves, self.seen = list(snapshot[0]), list(snapshot[1])


class SeatObservations:
    """What one seat is told, for the two OpenSpiel envs (Gymnasium and PettingZoo AEC) that keep the same game
    bookkeeping: ``game_spec``, ``state``, ``num_players``, the move log and each seat's decision count."""

    game_spec: GameSpec
    state: Any
    num_players: int
    _log: MoveLog
    _decisions: list[int]

    def seat_observation(self, player: int, action_lines: Sequence[str], outcome: str | None) -> str:
        """The seat's view of the state, the moves since its last turn, and its legal actions or the outcome."""
        return text.observation_text(
            self.game_spec,
            text.player_view(self.game_spec, self.state, player),
            player,
            self.num_players,
            self._log.recent(player),
            action_lines,
            self._decisions[player] + 1,
            outcome,
        )
