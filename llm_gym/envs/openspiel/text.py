"""What a player reads: the state as its seat may see it, the legal actions as ``id -> name``, and the rules.

(The action names themselves and the log of public moves live in :mod:`llm_gym.envs.openspiel.moves`.)

Only per-player strings are used for imperfect-information games (OpenSpiel's ``observation_string(player)`` or
``information_state_string(player)``, chosen per game in the catalog); the full ``str(state)`` is used only where
the game has perfect information. A few games whose strings are terse codes (Kuhn, Leduc, Liar's Dice) are spelled
out, from the player's own string only, so nothing hidden can leak in. Everything is turned into printable ASCII
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
        return _formatted(spec.name, raw, state.get_game().num_players())
    return ascii_text(raw).strip("\n")


@functools.lru_cache(maxsize=4096)
def _formatted(name: str, raw: str, num_players: int) -> str:
    # Pure in the player's own string, and those repeat a lot in the small card games: cache the spelled-out text.
    return ascii_text(_FORMATTERS[name](raw, num_players)).strip("\n")


def _chess(raw: str, num_players: int) -> str:
    fen = raw.strip()
    placement, side = fen.split()[:2]
    rows = []
    for rank, row in zip(range(8, 0, -1), placement.split("/"), strict=False):
        cells = "".join("." * int(c) if c.isdigit() else c for c in row)
        rows.append(f"{rank} {' '.join(cells)}")
    rows.append("  a b c d e f g h")
    to_move = "White" if side == "w" else "Black"
    return "\n".join(rows) + f"\nFEN: {fen}\n{to_move} to move."


def _kuhn(raw: str, num_players: int) -> str:
    # Information state = own card digit followed by the betting so far (p = pass, b = bet).
    card, history = int(raw[0]), raw[1:]
    ranks = "JQKA"[: num_players + 1]
    moves = ", ".join({"p": "Pass", "b": "Bet"}[c] for c in history) or "none yet"
    return (
        f"Your card: {ranks[card]} (cards from low to high: {' < '.join(ranks)})\nActions so far from player 0: {moves}"
    )


def _leduc(raw: str, num_players: int) -> str:
    fields = dict(f.split(": ", 1) if ": " in f else (f, "") for f in raw.strip("[]").split("]["))
    suits = 2
    ranks = "JQKA"

    def card(value: str) -> str:
        return f"{ranks[int(value) // suits]} (card {value})"

    names = {"0": "Fold", "1": "Call", "2": "Raise"}
    lines = [f"Your private card: {card(fields['Private'])}"]
    lines.append(f"Public card: {card(fields['Public'])}" if "Public" in fields else "Public card: not revealed yet")
    lines.append(f"Betting round: {fields.get('Round', '?').strip()}")
    lines.append(f"Pot: {fields.get('Pot', '?')}; money left per player: {fields.get('Money', '?')}")
    for key in ("Round1", "Round2"):
        if key in fields:
            moves = ", ".join(names.get(m, m) for m in fields[key].split()) or "none"
            lines.append(f"Bets in round {key[-1]}: {moves}")
    return "\n".join(lines)


def _liars_dice(raw: str, num_players: int) -> str:
    # Information state = own dice (one digit each), then each bid as quantity-face, then maybe "Liar".
    dice, _, bids = raw.partition(" ")
    return (
        f"Your dice: {' '.join(dice)}\n"
        f"Bids so far, oldest first, starting with player 0 (quantity-face): {bids or 'none yet'}"
    )


_FORMATTERS = {"chess": _chess, "kuhn_poker": _kuhn, "leduc_poker": _leduc, "liars_dice": _liars_dice}


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
