"""What affinetes' OpenSpiel environment does, where llm-gym follows it (``profile="affinetes"``).

Read from AffineFoundation/affinetes, ``environments/openspiel/``; the rules are restated here, not copied:

* task ids (``game_config.py`` ``decode_task_id``): ``game = AVAILABLE_GAMES[(task_id // 10**8) % 22]``,
  ``config = task_id % 10**8``, parameters = that game's agent's ``generate_params(config)``
  (``agents/<game>.py``). The config variants of :mod:`llm_gym.envs.openspiel.catalog` for the 22 games are these
  rules written out as tables; there affinetes wraps game indexes 22 and up around to 0, here they are this
  project's extra games (``profile="affinetes"`` wraps like affinetes);
* opponents (``env.py`` ``Actor.evaluate`` / ``_create_opponent_bot``): ``mcts`` by default; OpenSpiel's
  ``MCTSBot`` with ``uct_c=1.414``, solving on, a uniform prior and random rollouts played to the end, with
  each game's ``get_mcts_config()`` = (simulations, rollouts per leaf); a uniform random player where that is
  None (blackjack, 2048, solitaire) and in simultaneous-move games (goofspiel). The bot searches the real state:
  in card and dice games it sees the hidden cards and dice;
* the learner's seat (``Actor._run_evaluation``): ``(seed % 2) % num_players``;
* the score (``Actor._compute_score``): see :mod:`llm_gym.envs.openspiel.scoring`.

Where affinetes asks OpenSpiel for a parameter OpenSpiel (open_spiel 2.x) rejects, pyspiel raises SpielError
there: ``evaluate`` returns score 0 with the error text, ``reset`` fails. Here the env plays the parameters in the
catalog (the same game with the parameter spelled as OpenSpiel spells it, or the standard game where OpenSpiel has
no such rule) and ``decode_task_id`` keeps what affinetes asked for in ``Task.affinetes_params``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

NUM_AFFINETES_GAMES = 22
"""affinetes' ``AVAILABLE_GAMES`` has 22 entries; its game index is taken modulo this."""
UCT_C = 1.414
"""affinetes' MCTS exploration constant (every game)."""
SOURCE = "AffineFoundation/affinetes environments/openspiel/"


@dataclass(frozen=True)
class AffinetesGame:
    """One game as affinetes sets it up."""

    mcts: tuple[int, int] | None
    """``get_mcts_config()``: (max_simulations, rollouts per leaf); None = a random opponent."""
    source: str
    """The file under ``environments/openspiel/agents/`` with ``generate_params`` and ``get_mcts_config``."""
    rejected: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    """Config variant -> the parameters affinetes asks for, where OpenSpiel rejects them (the catalog holds what
    llm-gym plays instead)."""


def _frozen(table: dict[int, dict[str, Any]]) -> Mapping[int, Mapping[str, Any]]:
    return MappingProxyType({k: MappingProxyType(v) for k, v in table.items()})


GAMES: Mapping[str, AffinetesGame] = MappingProxyType(
    {
        # goofspiel is simultaneous-move: affinetes' mcts request gives a random player.
        "goofspiel": AffinetesGame(None, "goofspiel.py"),
        "liars_dice": AffinetesGame((3000, 200), "liars_dice_agent.py"),
        "leduc_poker": AffinetesGame((3000, 200), "leduc_poker_agent.py"),
        "gin_rummy": AffinetesGame((500, 10), "gin_rummy.py"),
        "othello": AffinetesGame((1000, 20), "othello.py"),
        "backgammon": AffinetesGame((600, 15), "backgammon.py"),
        "hex": AffinetesGame((1000, 50), "hex.py"),
        "clobber": AffinetesGame((1500, 100), "clobber.py"),
        "hearts": AffinetesGame((500, 50), "hearts.py"),
        "euchre": AffinetesGame((1000, 100), "euchre.py"),
        "dots_and_boxes": AffinetesGame((1200, 100), "dots_and_boxes.py"),
        "go": AffinetesGame((300, 30), "go.py"),
        "chess": AffinetesGame((200, 20), "chess.py"),
        "checkers": AffinetesGame((500, 50), "checkers.py"),
        "quoridor": AffinetesGame((800, 80), "quoridor.py"),
        "blackjack": AffinetesGame(None, "blackjack.py"),
        "phantom_ttt": AffinetesGame((3000, 150), "phantom_ttt.py"),
        "2048": AffinetesGame(None, "game_2048.py"),
        "solitaire": AffinetesGame(None, "solitaire.py"),
        # OpenSpiel's bridge has no Chicago or duplicate scoring: variants 1 and 2 fail to load in affinetes.
        "bridge": AffinetesGame((200, 30), "bridge.py", _frozen({1: {"is_chicago": True}, 2: {"is_duplicate": True}})),
        "amazons": AffinetesGame((200, 20), "amazons.py"),
        # affinetes writes seeds_per_house; OpenSpiel's oware calls it num_seeds_per_house: every oware task fails
        # to load there.
        "oware": AffinetesGame(
            (300, 30),
            "oware.py",
            _frozen({0: {"seeds_per_house": 4}, 1: {"seeds_per_house": 3}, 2: {"seeds_per_house": 5}}),
        ),
    }
)


def affinetes_seat(seed: int, num_players: int) -> int:
    """The learner's seat in affinetes' ``evaluate`` for this seed."""
    return (int(seed) % 2) % num_players
