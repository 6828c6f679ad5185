"""Which OpenSpiel games llm-gym plays, in task-id order, and the config variants of each.

Pure Python on purpose: the registration block in :mod:`llm_gym.envs` reads this list, and importing it must not
load pyspiel.

Task ids follow GGGGCCCCCCCC: ``task_id // 10**8`` indexes :data:`GAMES` (the 22 games of the affinetes set come
first, in its order: goofspiel = 0 ... oware = 21; games appended later get later indexes, so an existing task id
never changes meaning) and ``task_id % 10**8`` picks a config variant, ``variants[c % len(variants)]``. Variants of
one game are ordered from small/easy to big/hard, so variant 0 (the default of ``OpenSpiel-<game>-v0``) is quick.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from llm_gym.envs.openspiel.affinetes import GAMES as AFFINETES
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
    text_version: int = 1
    """Version of the observation text, raised when what a seat reads changes in a way that may change a text
    agent's play; stored bench results of agents that read the text are keyed by it (:func:`text_versions`).
    2 (2026-11-23): every listed move names the seat that made it (Kuhn credited all to player 0, Leduc and Liar's
    Dice named none, goofspiel's later seats missed the earlier seats' bids)."""

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
    # Variants = affinetes' generate_params(config) for config = 0, 1, 2, ... (each rule is periodic, and its period
    # is the number of variants; see llm_gym.envs.openspiel.affinetes and docs/guides/openspiel.md for the sources).
    GameSpec(
        "goofspiel",
        "Goofspiel",
        _variants(*({"players": 2, "num_cards": n, "points_order": "random"} for n in (8, 10, 12, 14, 16))),
        max_turns=16,
        view="information_state",
        roles=("P0", "P1", "P2"),
        text_version=2,
    ),
    GameSpec(
        "liars_dice",
        "Liar's Dice",
        _variants({"players": 2, "numdice": 5}),
        max_turns=61,
        view="information_state",
        determinize="chance",
        text_version=2,
    ),
    GameSpec(
        "leduc_poker",
        "Leduc Poker",
        _variants({"players": 2}),
        max_turns=14,
        view="information_state",
        determinize="native",
        text_version=2,
    ),
    GameSpec(
        "gin_rummy",
        "Gin Rummy",
        # config % 9: hand size 7 + (config // 3) % 3, knock card 10 - config % 3
        _variants(*({"hand_size": 7 + c // 3, "knock_card": 10 - c % 3} for c in range(9))),
        max_turns=160,
        mcts_simulations=20,
        mcts_rollout_length=200,
        determinize="native",
    ),
    GameSpec("othello", "Othello", _variants({}), max_turns=64, mcts_simulations=50, roles=("Black (x)", "White (o)")),
    GameSpec(
        "backgammon",
        "Backgammon",
        _variants({}),
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
        _variants(*({"rows": n, "columns": n} for n in (5, 6, 7))),
        max_turns=40,
        roles=("o", "x"),
    ),
    GameSpec(
        "hearts",
        "Hearts",
        # config % 8, bit 0: pass cards, bit 1: jack of diamonds bonus, bit 2: avoid-all-tricks bonus
        _variants(
            *(
                {"pass_cards": bool(c & 1), "jd_bonus": bool(c & 2), "avoid_all_tricks_bonus": bool(c & 4)}
                for c in range(8)
            )
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
        # config % 4, bit 0: lone defender allowed, bit 1: stick the dealer
        _variants(*({"allow_lone_defender": bool(c & 1), "stick_the_dealer": bool(c & 2)} for c in range(4))),
        max_turns=20,
        mcts_simulations=50,
        roles=("North", "East", "South", "West"),
        determinize="native",
    ),
    GameSpec(
        "dots_and_boxes",
        "Dots and Boxes",
        _variants(*({"num_rows": n, "num_cols": n} for n in (3, 4, 5))),
        max_turns=60,
        roles=("P1", "P2"),
    ),
    GameSpec(
        "go",
        "Go",
        _variants({"board_size": 5, "komi": 7.5}, {"board_size": 7, "komi": 7.5}),
        max_turns=200,
        mcts_simulations=50,
        mcts_rollout_length=200,
        roles=("Black (X)", "White (O)"),
    ),
    GameSpec(
        "chess",
        "Chess",
        _variants({}),
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
        _variants({}),
        max_turns=200,
        mcts_simulations=50,
        mcts_rollout_length=200,
        roles=("o", "+"),
    ),
    GameSpec(
        "quoridor",
        "Quoridor",
        # config % 4: board 7 + 2 * ((config // 2) % 2), walls 8 + 2 * (config % 2)
        _variants(*({"board_size": 7 + 2 * (c // 2), "wall_count": 8 + 2 * (c % 2)} for c in range(4))),
        static_action_names=False,
        max_turns=160,
        mcts_simulations=50,
        mcts_rollout_length=200,
    ),
    GameSpec("blackjack", "Blackjack", _variants({}), max_turns=12),
    GameSpec(
        "phantom_ttt",
        "Phantom Tic-Tac-Toe",
        _variants({"obstype": "reveal-nothing"}, {"obstype": "reveal-numturns"}),
        max_turns=17,
        roles=("x", "o"),
        determinize="history",
    ),
    GameSpec("2048", "2048", _variants({}), max_turns=5000),
    GameSpec("solitaire", "Klondike Solitaire", _variants({}), max_turns=150),
    # Bidding only, the contract scored by a double-dummy solver (seconds per deal): OpenSpiel's default, which is
    # what affinetes plays. Its variants 1 and 2 (Chicago, duplicate scoring) do not exist in OpenSpiel: the same
    # game here. OpenSpiel-bridge-v0 is registered with card play instead (milliseconds per deal).
    GameSpec(
        "bridge",
        "Contract Bridge",
        _variants({}, {}, {}),
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
        # affinetes asks for seeds_per_house 4, 3, 5, which OpenSpiel rejects: its name is num_seeds_per_house.
        _variants(*({"num_seeds_per_house": n} for n in (4, 3, 5))),
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
        text_version=2,
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
        raise UnknownNameError("OpenSpiel game", name, GAME_NAMES, hint="See docs/guides/openspiel.md for the list.")
    return _BY_NAME[name]


def text_versions(env_id: str, args: Mapping[str, Any], task_ids: Iterable[int] = ()) -> dict[str, int]:
    """``{game: text_version}`` of the games an env plays whose observation text is past version 1 (``{}`` for
    every other env, OpenSpiel or not): the part of an env's identity that only text-reading agents depend on.

    ``OpenSpiel-<game>-v0`` plays one game; ``OpenSpiel-v0`` plays the games of ``task_ids`` (none: its ``config``
    task, as a reset without a task id does), or the one named by a ``game`` argument."""
    if not env_id.startswith("OpenSpiel-") or not env_id.endswith("-v0"):
        return {}
    name = env_id[len("OpenSpiel-") : -len("-v0")] if env_id != "OpenSpiel-v0" else args.get("game")
    if name:
        games = [_BY_NAME[name]] if name in _BY_NAME else []
    else:
        profile = args.get("profile", "default")
        games = []
        for task_id in list(task_ids) or [int(args.get("config", 0))]:
            try:
                games.append(decode_task_id(task_id, profile).game)
            except (ValueError, TypeError):
                continue  # not a task of this env: making it fails with its own clear error
    return {g.name: g.text_version for g in sorted(games, key=GAMES.index) if g.text_version > 1}


Profile = Literal["default", "affinetes"]
PROFILES: tuple[str, ...] = ("default", "affinetes")


@dataclass(frozen=True)
class Task:
    """What a task id decodes to."""

    task_id: int
    game: GameSpec
    variant: int
    """Index into ``game.variants`` (``task_id % 10**8`` modulo the number of variants)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """OpenSpiel parameters of this variant (what the env loads)."""
    affinetes_params: Mapping[str, Any] | None = None
    """For the 22 affinetes games: the parameters affinetes asks OpenSpiel for. They equal ``params`` except where
    OpenSpiel rejects affinetes' request (see :mod:`llm_gym.envs.openspiel.affinetes`)."""


# Decoding sits on the reset path of OpenSpiel-v0: Task objects are built once per (game, variant) and shared.
_TASKS: dict[tuple[int, int], tuple[GameSpec, Mapping[str, Any], Mapping[str, Any] | None]] = {}


def _task_parts(index: int, variant: int) -> tuple[GameSpec, Mapping[str, Any], Mapping[str, Any] | None]:
    parts = _TASKS.get((index, variant))
    if parts is None:
        game = GAMES[index]
        params = MappingProxyType(dict(game.variants[variant]))
        asked = None
        if index < NUM_TASK_GAMES:
            rejected = AFFINETES[game.name].rejected
            asked = MappingProxyType(dict(rejected[variant])) if variant in rejected else params
        parts = _TASKS[(index, variant)] = (game, params, asked)
    return parts


def decode_task_id(task_id: int, profile: Profile = "default") -> Task:
    """``GGGGCCCCCCCC`` -> game and config variant.

    ``profile="default"``: game indexes 22 and up are this project's extra games; ids past the last game raise
    ``ValueError``. ``profile="affinetes"``: the game index wraps modulo 22 as in affinetes, so every id >= 0 means
    what it means there (the extra games are not reachable).
    """
    task_id = int(task_id)
    index, config = divmod(task_id, TASK_STRIDE)
    if profile == "affinetes" and task_id >= 0:
        index %= NUM_TASK_GAMES
    elif task_id < 0 or index >= len(GAMES):
        raise ValueError(
            f"OpenSpiel task ids are 0..{len(GAMES) * TASK_STRIDE - 1} (game index * 10**8 + config), got {task_id}"
            + ("" if task_id < 0 else "; profile='affinetes' wraps larger ids around the 22 affinetes games")
        )
    variant = config % len(GAMES[index].variants)
    game, params, asked = _task_parts(index, variant)
    return Task(task_id, game, variant, params, asked)


def task_id_of(game: str, variant: int = 0) -> int:
    """The task id of ``variant`` of ``game`` (the inverse of :func:`decode_task_id` for ``variant < len(variants)``)."""
    spec = game_spec(game)
    if not 0 <= variant < len(spec.variants):
        raise ValueError(f"{game} has config variants 0..{len(spec.variants) - 1}, got {variant}")
    return spec.task_index * TASK_STRIDE + variant
