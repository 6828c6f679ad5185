"""What a player reads: the state as its seat may see it, the legal actions as ``id -> name``, and the rules.

(The action names themselves and the log of public moves live in :mod:`llm_gym.envs.openspiel.moves`.)

Only per-player strings are used for imperfect-information games (OpenSpiel's ``observation_string(player)`` or
``information_state_string(player)``, chosen per game in the catalog); the full ``str(state)`` is used only where
the game has perfect information. A few games whose strings are terse codes (Kuhn, Leduc, Liar's Dice) are spelled
out from the player's own string, with the seat that made each listed move taken from the history's order of play
(public in these games; the chance outcomes are never read), so nothing hidden can leak in. Everything is turned into printable ASCII
(suits, box drawing and card backs have ASCII spellings) so it fits the Text space.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from llm_gym.envs.openspiel.catalog import GameSpec
from llm_gym.envs.openspiel.rules import ANSWER_FORMAT, RULES

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NOT_PRINTABLE = re.compile(r"[^\x20-\x7e\n\t]")
_ASCII = str.maketrans(
    {
        "♠": "S",
        "♥": "H",
        "♦": "D",
        "♣": "C",
        "♤": "S",
        "♡": "H",
        "♢": "D",
        "♧": "C",
        "🂠": "##",
        "←": "<-",
        "→": "->",
        "─": "-",
        "│": "|",
        "┌": "+",
        "┐": "+",
        "└": "+",
        "┘": "+",
        "├": "+",
        "┤": "+",
        "┬": "+",
        "┴": "+",
        "┼": "+",
        "╴": " ",
        "╶": " ",
        "╵": " ",
        "╷": " ",
        "\r": "",
        "\x0b": " ",
        "\x0c": " ",
    }
)


def ascii_text(text: str) -> str:
    """Printable ASCII only: known symbols get ASCII spellings, ANSI colour codes are dropped, the rest becomes ?."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if text.isascii() and not _NOT_PRINTABLE.search(text):
        return text  # the common case, kept to one C-speed scan
    return _NOT_PRINTABLE.sub("?", text.translate(_ASCII))


def instructions(spec: GameSpec, params: Mapping[str, Any], num_players: int, opponents: str) -> str:
    """The rules text for a system prompt: game, parameters, who the other seats are, rules, answer format."""
    setting = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "defaults"
    who = (
        "You play alone." if num_players == 1 else f"{num_players} players; the other seats are played by {opponents}."
    )
    return f"Game: {spec.title} (OpenSpiel {spec.name}; {setting}). {who}\nRules: {RULES[spec.name]}\n{ANSWER_FORMAT}"


def seat_name(spec: GameSpec, player: int) -> str:
    """``player 1 (o)``: the seat number and, where the game names its seats, that name."""
    return _seat_name(spec.roles, player)


@functools.lru_cache(maxsize=512)
def _seat_name(roles: tuple[str, ...], player: int) -> str:
    role = roles[player] if player < len(roles) else ""
    return f"player {player} ({role})" if role else f"player {player}"


@functools.lru_cache(maxsize=512)
def _header(title: str, roles: tuple[str, ...], player: int, num_players: int) -> str:
    seat = "you play alone" if num_players == 1 else f"you are {_seat_name(roles, player)} of {num_players}"
    return f"{title}: {seat}."


# -- the state as one player sees it ----------------------------------------------------------------------------


def player_view(spec: GameSpec, state: Any, player: int) -> str:
    """The state as ``player`` may see it, in readable ASCII."""
    if spec.view == "state":
        raw = str(state)
    elif spec.view == "information_state":
        raw = state.information_state_string(player)
    else:
        raw = state.observation_string(player)
    if spec.name in _FORMATTERS:
        # The terse strings list the moves without saying whose they are; who moved when is public in these games
        # (the turn order), so the seat of each move comes from the real history, its chance outcomes left out.
        movers = tuple(m.player for m in state.full_history() if m.player >= 0) if spec.name in _MOVE_LISTS else ()
        return _formatted(spec.name, raw, state.get_game().num_players(), player, movers)
    return ascii_text(raw).strip("\n")


@functools.lru_cache(maxsize=4096)
def _formatted(name: str, raw: str, num_players: int, player: int, movers: tuple[int, ...]) -> str:
    # Pure in the seat's own string and the public order of play, and those repeat a lot in the small card games:
    # cache the spelled-out text.
    return ascii_text(_FORMATTERS[name](raw, num_players, player, movers)).strip("\n")


def attributed(moves: Sequence[str], movers: Sequence[int], player: int) -> str:
    """``player 0 (you): Pass, player 1: Bet``: each move with the seat that made it, oldest first."""
    # strict: a string listing a different number of moves than the history holds is a parsing bug, not a guess.
    return ", ".join(f"player {p}{' (you)' if p == player else ''}: {m}" for m, p in zip(moves, movers, strict=True))


def _chess(raw: str, num_players: int, player: int, movers: tuple[int, ...]) -> str:
    fen = raw.strip()
    placement, side = fen.split()[:2]
    rows = []
    for rank, row in zip(range(8, 0, -1), placement.split("/"), strict=False):
        cells = "".join("." * int(c) if c.isdigit() else c for c in row)
        rows.append(f"{rank} {' '.join(cells)}")
    rows.append("  a b c d e f g h")
    to_move = "White" if side == "w" else "Black"
    return "\n".join(rows) + f"\nFEN: {fen}\n{to_move} to move."


def _kuhn(raw: str, num_players: int, player: int, movers: tuple[int, ...]) -> str:
    # Information state = own card digit followed by the betting so far (p = pass, b = bet), seats taking turns.
    card, history = int(raw[0]), raw[1:]
    ranks = "JQKA"[: num_players + 1]
    moves = attributed([{"p": "Pass", "b": "Bet"}[c] for c in history], movers, player)
    return (
        f"Your card: {ranks[card]} (cards from low to high: {' < '.join(ranks)})\n"
        f"Actions so far, oldest first: {moves or 'none yet'}"
    )


def _leduc(raw: str, num_players: int, player: int, movers: tuple[int, ...]) -> str:
    # [Observer: 0][Private: 1][Round 1][Player: 1][Pot: 2][Money: 99 99][Round1: 1 2][Round2: ] (the round has no
    # colon); the bets of both rounds, in order, are the players' moves of the history.
    fields = dict(f.split(": ", 1) if ": " in f else (f, "") for f in raw.strip("[]").split("]["))
    betting_round = next((f.split(" ", 1)[1] for f in fields if f.startswith("Round ")), "?")
    suits = 2
    ranks = "JQKA"

    def card(value: str) -> str:
        return f"{ranks[int(value) // suits]} (card {value})"

    names = {"0": "Fold", "1": "Call", "2": "Raise"}
    lines = [f"Your private card: {card(fields['Private'])}"]
    lines.append(f"Public card: {card(fields['Public'])}" if "Public" in fields else "Public card: not revealed yet")
    lines.append(f"Betting round: {betting_round}")
    lines.append(f"Pot: {fields.get('Pot', '?')}; money left per player: {fields.get('Money', '?')}")
    done = 0
    for key in ("Round1", "Round2"):
        if key in fields:
            bets = [names.get(m, m) for m in fields[key].split()]
            moves = attributed(bets, movers[done : done + len(bets)], player)
            done += len(bets)
            lines.append(f"Bets in round {key[-1]}, oldest first: {moves or 'none'}")
    return "\n".join(lines)


def _liars_dice(raw: str, num_players: int, player: int, movers: tuple[int, ...]) -> str:
    # Information state = own dice (one digit each), then each bid as quantity-face, then maybe "Liar".
    dice, _, bids = raw.partition(" ")
    moves = attributed(bids.split(), movers, player)
    return f"Your dice: {' '.join(dice)}\nBids so far, oldest first (quantity-face): {moves or 'none yet'}"


_FORMATTERS = {"chess": _chess, "kuhn_poker": _kuhn, "leduc_poker": _leduc, "liars_dice": _liars_dice}
_MOVE_LISTS = frozenset({"kuhn_poker", "leduc_poker", "liars_dice"})
"""Games whose formatted text lists the moves so far (their formatters get the seat of each move)."""


# -- the whole observation -----------------------------------------------------------------------------------------


def observation_text(
    spec: GameSpec,
    view: str,
    player: int,
    num_players: int,
    recent: Sequence[str],
    action_lines: Sequence[str],
    decision: int,
    outcome: str | None = None,
) -> str:
    """Header (game, seat), moves since the seat's last turn, the state, then the legal actions (``id -> name``
    lines, see :class:`~llm_gym.envs.openspiel.moves.ActionNamer`) or the outcome."""
    lines = [_header(spec.title, spec.roles, player, num_players)]
    if recent:
        lines.append("Since your last turn: " + "; ".join(recent) + ".")
    if outcome is not None:
        lines += ["Final state:", view, outcome]
        return "\n".join(lines)
    lines += ["State:", view, f"Your turn (decision {decision}). Legal actions (id -> name):", *action_lines]
    return "\n".join(lines)


def outcome_text(returns: Sequence[float], player: int, score: float, forfeit: bool = False) -> str:
    """``Game over. Returns: ...; your score ...`` for the final observation."""
    parts = [f"player {i}{' (you)' if i == player else ''} {r:g}" for i, r in enumerate(returns)]
    verdict = "win" if score > 0.5 else "draw" if score == 0.5 else "loss"
    prefix = "Game over: you forfeited after too many invalid actions." if forfeit else "Game over."
    return f"{prefix} Returns: {', '.join(parts)}. Your score: {score:.2f} ({verdict})."
