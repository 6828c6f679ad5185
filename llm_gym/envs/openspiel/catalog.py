"""Which OpenSpiel games llm-gym plays, in task-id order, and the config variants of each.

Pure Python on purpose: the registration block in :mod:`llm_gym.envs` reads this list, and importing it must not
load pyspiel.

Task ids follow GGGGCCCCCCCC: ``task_id // 10**8`` indexes :data:`GAMES` (the 22 games of the affinetes set come
first, in its order: goofspiel = 0 ... oware = 21; games appended later get later indexes, so an existing task id
never changes meaning) and ``task_id % 10**8`` picks a config variant, ``variants[c % len(variants)]``. Variants of
one game are ordered from small/easy to big/hard, so variant 0 (the default of ``OpenSpiel-<game>-v0``) is quick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from llm_gym.errors import UnknownNameError

TASK_STRIDE = 10**8
"""``task_id // TASK_STRIDE`` is the game index, ``task_id % TASK_STRIDE`` the config variant."""
NUM_TASK_GAMES = 22
"""The first 22 games of :data:`GAMES` are the affinetes task set; the rest are extras worth playing."""

View = Literal["observation", "information_state", "state"]


@dataclass(frozen=True)
class GameSpec:
    """One OpenSpiel game as llm-gym plays it."""

    name: str
    """OpenSpiel short name (``pyspiel.load_game(name, params)``)."""
    title: str
    """Human name used in the observation text."""
    variants: tuple[Mapping[str, Any], ...]
    """OpenSpiel parameters of each config variant, easy to hard."""
    max_turns: int
    """Learner decisions before an episode is truncated (a cap so no episode runs forever)."""
    mcts_simulations: int = 100
    """Default MCTS budget for this game (simulations per move), chosen so a move takes well under a second."""
    mcts_rollout_length: int | None = None
    """Cut random rollouts after this many moves (None: play to the end); long games need it."""
    view: View = "observation"
    """What the player sees: OpenSpiel's per-player ``observation`` or ``information_state`` string, or the full
    ``state`` string (perfect-information games only, where it is the same thing, only clearer)."""
    roles: tuple[str, ...] = ()
    """What seat ``i`` is called in the game's own text (``x``/``o``, Black/White), if it has names."""
    static_action_names: bool = True
    """Whether OpenSpiel names each action the same way in every state, so names can be cached per seat and action
    (chess SAN, backgammon, quoridor and amazons name moves relative to the position: False)."""
    determinize: Literal["none", "native", "chance", "history"] = "none"
    """How the MCTS opponent samples a full state consistent with what it may see (imperfect information):
    ``native`` = OpenSpiel's ``resample_from_infostate``, ``chance`` = resample hidden chance outcomes,
    ``history`` = resample other players' hidden moves. ``none``: perfect information, nothing to hide."""

    @property
    def task_index(self) -> int:
        """This game's ``GGGG`` part of a task id."""
        return GAMES.index(self)

    @property
    def env_id(self) -> str:
        """The Gymnasium id of this game, ``OpenSpiel-<name>-v0``."""
        return f"OpenSpiel-{self.name}-v0"


def _variants(*params: dict[str, Any]) -> tuple[Mapping[str, Any], ...]:
    return tuple(MappingProxyType(dict(p)) for p in params)


GAMES: tuple[GameSpec, ...] = (
    # -- the 22 task games, in the affinetes order (never reorder: task ids depend on it) ---------------------------
    GameSpec(
        "goofspiel",
        "Goofspiel",
        _variants(
            {"num_cards": 6, "points_order": "random"},
            {"num_cards": 8, "points_order": "random"},
            {"num_cards": 13, "points_order": "random"},
            {"num_cards": 6, "points_order": "random", "players": 3},
            {"num_cards": 8, "points_order": "descending"},
        ),
        max_turns=13,
        view="information_state",
        roles=("P0", "P1", "P2"),
    ),
    GameSpec(
        "liars_dice",
        "Liar's Dice",
        _variants(
            {"numdice": 1},
            {"numdice": 2},
            {"numdice": 2, "dice_sides": 4},
            {"numdice": 3},
        ),
        max_turns=40,
        view="information_state",
        determinize="chance",
    ),
    GameSpec(
        "leduc_poker",
        "Leduc Poker",
        _variants({"players": 2}, {"players": 3}),
        max_turns=14,
        view="information_state",
        determinize="native",
    ),
    GameSpec(
        "gin_rummy",
        "Gin Rummy",
        _variants({}, {"knock_card": 5}, {"oklahoma": True}),
        max_turns=160,
        mcts_simulations=20,
        mcts_rollout_length=200,
        determinize="native",
    ),
    GameSpec("othello", "Othello", _variants({}), max_turns=64, mcts_simulations=50, roles=("Black (x)", "White (o)")),
    GameSpec(
        "backgammon",
        "Backgammon",
        _variants(
            {},
            {"hyper_backgammon": True},
            {"scoring_type": "full_scoring"},
        ),
        static_action_names=False,
        max_turns=300,
        mcts_simulations=20,
        mcts_rollout_length=200,
        view="state",
        roles=("x", "o"),
    ),
    GameSpec(
        "hex",
        "Hex",
        _variants({"board_size": 5}, {"board_size": 7}, {"board_size": 9}, {"board_size": 11}),
        max_turns=61,
        roles=("x", "o"),
    ),
    GameSpec(
        "clobber",
        "Clobber",
        _variants(
            {"rows": 4, "columns": 5},
            {"rows": 5, "columns": 6},
            {"rows": 6, "columns": 6},
        ),
        max_turns=40,
        roles=("o", "x"),
    ),
    GameSpec(
        "hearts",
        "Hearts",
        _variants(
            {},
            {"pass_cards": False},
            {"jd_bonus": True},
            {"avoid_all_tricks_bonus": True},
        ),
        max_turns=20,
        mcts_simulations=30,
        view="information_state",
        roles=("North", "East", "South", "West"),
        determinize="native",
    ),
    GameSpec(
        "euchre",
        "Euchre",
        _variants({}, {"allow_lone_defender": True}, {"stick_the_dealer": False}),
        max_turns=20,
        mcts_simulations=50,
        roles=("North", "East", "South", "West"),
        determinize="native",
    ),
    GameSpec(
        "dots_and_boxes",
        "Dots and Boxes",
        _variants(
            {"num_rows": 2, "num_cols": 2},
            {"num_rows": 3, "num_cols": 3},
            {"num_rows": 4, "num_cols": 4},
        ),
        max_turns=40,
        roles=("P1", "P2"),
    ),
    GameSpec(
        "go",
        "Go",
        _variants(
            {"board_size": 5, "komi": 3.5},
            {"board_size": 7, "komi": 5.5},
            {"board_size": 9, "komi": 7.5},
            {"board_size": 13, "komi": 7.5},
        ),
        max_turns=200,
        mcts_simulations=50,
        mcts_rollout_length=200,
        roles=("Black (X)", "White (O)"),
    ),
    GameSpec(
        "chess",
        "Chess",
        _variants({}, {"chess960": True}),
        static_action_names=False,
        max_turns=300,
        mcts_simulations=20,
        mcts_rollout_length=100,
        view="state",
        roles=("Black", "White"),
    ),
    GameSpec(
        "checkers",
        "Checkers",
        _variants({"rows": 8, "columns": 8}, {"rows": 10, "columns": 10}),
        max_turns=200,
        mcts_simulations=50,
        mcts_rollout_length=200,
        roles=("o", "+"),
    ),
    GameSpec(
        "quoridor",
        "Quoridor",
        _variants(
            {"board_size": 5},
            {"board_size": 7},
            {"board_size": 9},
            {"board_size": 9, "players": 4},
        ),
        static_action_names=False,
        max_turns=160,
        mcts_simulations=50,
        mcts_rollout_length=200,
    ),
    GameSpec("blackjack", "Blackjack", _variants({}), max_turns=12),
    GameSpec(
        "phantom_ttt",
        "Phantom Tic-Tac-Toe",
        _variants(
            {"obstype": "reveal-nothing"},
            {"obstype": "reveal-numturns"},
            {"gameversion": "abrupt"},
        ),
        max_turns=17,
        roles=("x", "o"),
        determinize="history",
    ),
    GameSpec(
        "2048",
        "2048",
        _variants({"max_tile": 256}, {"max_tile": 512}, {"max_tile": 1024}, {"max_tile": 2048}),
        max_turns=5000,
    ),
    GameSpec("solitaire", "Klondike Solitaire", _variants({}), max_turns=150),
    # Card play first: the bidding-only variants score contracts with a double-dummy solver, seconds per deal.
    GameSpec(
        "bridge",
        "Contract Bridge",
        _variants(
            {"use_double_dummy_result": False},
            {"use_double_dummy_result": False, "dealer_vul": True},
            {"use_double_dummy_result": False, "non_dealer_vul": True},
            {"use_double_dummy_result": True},
            {"use_double_dummy_result": True, "dealer_vul": True, "non_dealer_vul": True},
        ),
        max_turns=100,
        mcts_simulations=50,
        roles=("North", "East", "South", "West"),
        determinize="native",
    ),
    GameSpec(
        "amazons",
        "Amazons",
        _variants({"board_size": 6}, {"board_size": 8}, {"board_size": 10}),
        static_action_names=False,
        max_turns=150,
        mcts_simulations=50,
        roles=("X", "O"),
    ),
    GameSpec(
        "oware",
        "Oware",
        _variants(
            {"num_houses_per_player": 4, "num_seeds_per_house": 3},
            {"num_houses_per_player": 6, "num_seeds_per_house": 4},
        ),
        max_turns=300,
        mcts_simulations=50,
        mcts_rollout_length=200,
        view="state",
        roles=("South (houses A-F)", "North (houses a-f)"),
    ),
    # -- extras (indexes 22+) ---------------------------------------------------------------------------------------
    GameSpec("tic_tac_toe", "Tic-Tac-Toe", _variants({}), max_turns=9, mcts_simulations=400, roles=("x", "o")),
    GameSpec("connect_four", "Connect Four", _variants({}), max_turns=42, roles=("x", "o")),
    GameSpec(
        "kuhn_poker",
        "Kuhn Poker",
        _variants({"players": 2}, {"players": 3}),
        max_turns=6,
        view="information_state",
        determinize="native",
    ),
    GameSpec(
        "breakthrough",
        "Breakthrough",
        _variants({"rows": 6, "columns": 6}, {"rows": 8, "columns": 8}),
        max_turns=150,
        mcts_simulations=50,
        roles=("Black (b)", "White (w)"),
    ),
)

GAME_NAMES: tuple[str, ...] = tuple(g.name for g in GAMES)
_BY_NAME = {g.name: g for g in GAMES}


def game_spec(name: str) -> GameSpec:
    """The spec of a game by its OpenSpiel short name; unknown names raise with close matches."""
    if name not in _BY_NAME:
        raise UnknownNameError("OpenSpiel game", name, GAME_NAMES, hint="See docs/openspiel.md for the list.")
    return _BY_NAME[name]


@dataclass(frozen=True)
class Task:
    """What a task id decodes to."""

    task_id: int
    game: GameSpec
    variant: int
    """Index into ``game.variants`` (``task_id % 10**8`` modulo the number of variants)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """OpenSpiel parameters of this variant."""


def decode_task_id(task_id: int) -> Task:
    """``GGGGCCCCCCCC`` -> game and config variant; raises ``ValueError`` for ids outside the game list."""
    task_id = int(task_id)
    index, config = divmod(task_id, TASK_STRIDE)
    if task_id < 0 or index >= len(GAMES):
        raise ValueError(
            f"OpenSpiel task ids are 0..{len(GAMES) * TASK_STRIDE - 1} (game index * 10**8 + config), got {task_id}"
        )
    game = GAMES[index]
    variant = config % len(game.variants)
    return Task(task_id, game, variant, dict(game.variants[variant]))


def task_id_of(game: str, variant: int = 0) -> int:
    """The task id of ``variant`` of ``game`` (the inverse of :func:`decode_task_id` for ``variant < len(variants)``)."""
    spec = game_spec(game)
    if not 0 <= variant < len(spec.variants):
        raise ValueError(f"{game} has config variants 0..{len(spec.variants) - 1}, got {variant}")
    return spec.task_index * TASK_STRIDE + variant
