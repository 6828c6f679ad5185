"""affinetes parity: task ids, parameters, opponents and scores against values derived by reading affinetes' code.

Every expected value below was worked out by hand from AffineFoundation/affinetes (commit 345b7bc), files under
``environments/openspiel/``: ``game_config.py`` (``AVAILABLE_GAMES``, ``decode_task_id``), ``agents/<file>``
(``generate_params``, ``get_mcts_config``; the file is named in each row) and ``env.py`` (``_compute_score``,
``_create_opponent_bot``, ``_run_evaluation``).
"""

from __future__ import annotations

import random

import pytest

from llm_gym.envs.openspiel.affinetes import GAMES as AFFINETES
from llm_gym.envs.openspiel.affinetes import UCT_C, affinetes_seat
from llm_gym.envs.openspiel.catalog import GAME_NAMES, NUM_TASK_GAMES, decode_task_id
from llm_gym.envs.openspiel.env import OpenSpielEnv
from llm_gym.envs.openspiel.opponents import MCTSOpponent, RandomOpponent
from llm_gym.envs.openspiel.scoring import normalised_score

# (task id, source file, game, the parameters affinetes passes to pyspiel.load_game)
AFFINETES_TASKS = [
    (0, "goofspiel.py", "goofspiel", {"players": 2, "num_cards": 8, "points_order": "random"}),
    (3, "goofspiel.py", "goofspiel", {"players": 2, "num_cards": 14, "points_order": "random"}),  # 8 + 3 * 2
    (99_999_999, "goofspiel.py", "goofspiel", {"players": 2, "num_cards": 16, "points_order": "random"}),  # % 5 = 4
    (100_000_000, "liars_dice_agent.py", "liars_dice", {"players": 2, "numdice": 5}),
    (100_000_042, "liars_dice_agent.py", "liars_dice", {"players": 2, "numdice": 5}),  # one config only
    (200_000_007, "leduc_poker_agent.py", "leduc_poker", {"players": 2}),
    (300_000_000, "gin_rummy.py", "gin_rummy", {"hand_size": 7, "knock_card": 10}),
    (300_000_005, "gin_rummy.py", "gin_rummy", {"hand_size": 8, "knock_card": 8}),  # (5 // 3) % 3 = 1, 5 % 3 = 2
    (300_000_010, "gin_rummy.py", "gin_rummy", {"hand_size": 7, "knock_card": 9}),  # (10 // 3) % 3 = 0, 10 % 3 = 1
    (400_000_001, "othello.py", "othello", {}),
    (500_000_000, "backgammon.py", "backgammon", {}),
    (600_000_003, "hex.py", "hex", {"board_size": 11}),  # 5 + 3 * 2
    (600_000_006, "hex.py", "hex", {"board_size": 9}),  # 6 % 4 = 2
    (700_000_001, "clobber.py", "clobber", {"rows": 6, "columns": 6}),
    (700_000_005, "clobber.py", "clobber", {"rows": 7, "columns": 7}),  # 5 % 3 = 2
    (800_000_005, "hearts.py", "hearts", {"pass_cards": True, "jd_bonus": False, "avoid_all_tricks_bonus": True}),
    (800_000_010, "hearts.py", "hearts", {"pass_cards": False, "jd_bonus": True, "avoid_all_tricks_bonus": False}),
    (900_000_003, "euchre.py", "euchre", {"allow_lone_defender": True, "stick_the_dealer": True}),
    (900_000_006, "euchre.py", "euchre", {"allow_lone_defender": False, "stick_the_dealer": True}),  # 6 % 4 = 2
    (1_000_000_002, "dots_and_boxes.py", "dots_and_boxes", {"num_rows": 5, "num_cols": 5}),
    (1_100_000_001, "go.py", "go", {"board_size": 7, "komi": 7.5}),
    (1_100_000_004, "go.py", "go", {"board_size": 5, "komi": 7.5}),
    (1_200_000_001, "chess.py", "chess", {}),
    (1_300_000_000, "checkers.py", "checkers", {}),
    (1_400_000_001, "quoridor.py", "quoridor", {"board_size": 7, "wall_count": 10}),
    (1_400_000_002, "quoridor.py", "quoridor", {"board_size": 9, "wall_count": 8}),
    (1_400_000_007, "quoridor.py", "quoridor", {"board_size": 9, "wall_count": 10}),
    (1_500_000_000, "blackjack.py", "blackjack", {}),
    (1_600_000_001, "phantom_ttt.py", "phantom_ttt", {"obstype": "reveal-numturns"}),
    (1_600_000_004, "phantom_ttt.py", "phantom_ttt", {"obstype": "reveal-nothing"}),
    (1_700_000_003, "game_2048.py", "2048", {}),
    (1_800_000_000, "solitaire.py", "solitaire", {}),
    (1_900_000_000, "bridge.py", "bridge", {}),
    (1_900_000_001, "bridge.py", "bridge", {"is_chicago": True}),  # OpenSpiel rejects it
    (1_900_000_005, "bridge.py", "bridge", {"is_duplicate": True}),  # 5 % 3 = 2; OpenSpiel rejects it
    (2_000_000_001, "amazons.py", "amazons", {"board_size": 8}),
    (2_000_000_002, "amazons.py", "amazons", {"board_size": 10}),
    (2_100_000_000, "oware.py", "oware", {"seeds_per_house": 4}),  # OpenSpiel rejects the name
    (2_100_000_001, "oware.py", "oware", {"seeds_per_house": 3}),
    (2_100_000_002, "oware.py", "oware", {"seeds_per_house": 5}),
    # game_config.py: game index % 22, so ids past oware wrap around (profile="affinetes" only)
    (2_200_000_000, "game_config.py + goofspiel.py", "goofspiel", {"players": 2, "num_cards": 8, "points_order": "random"}),
    (2_300_000_006, "game_config.py + liars_dice_agent.py", "liars_dice", {"players": 2, "numdice": 5}),
    (4_400_000_001, "game_config.py + goofspiel.py", "goofspiel", {"players": 2, "num_cards": 10, "points_order": "random"}),
]  # fmt: skip

# What llm-gym loads where OpenSpiel rejects affinetes' request (docs/guides/openspiel.md, "affinetes").
PLAYED_INSTEAD = {
    1_900_000_001: {},
    1_900_000_005: {},
    2_100_000_000: {"num_seeds_per_house": 4},
    2_100_000_001: {"num_seeds_per_house": 3},
    2_100_000_002: {"num_seeds_per_house": 5},
}


@pytest.mark.parametrize(("task_id", "source", "game", "params"), AFFINETES_TASKS)
def test_task_ids_decode_to_affinetes_games_and_parameters(task_id, source, game, params) -> None:
    task = decode_task_id(task_id, "affinetes")
    assert task.game.name == game, source
    assert dict(task.affinetes_params) == params, source
    assert dict(task.params) == PLAYED_INSTEAD.get(task_id, params), source
    if task_id < NUM_TASK_GAMES * 10**8:  # the default profile decodes affinetes' range the same way
        assert decode_task_id(task_id) == task


def test_the_default_profile_keeps_extra_games_past_affinetes_range() -> None:
    assert decode_task_id(2_200_000_000).game.name == GAME_NAMES[22] == "tic_tac_toe"
    assert decode_task_id(2_200_000_000).affinetes_params is None
    with pytest.raises(ValueError, match="profile='affinetes' wraps"):
        decode_task_id(len(GAME_NAMES) * 10**8)


# (game, source file, get_mcts_config(): (max_simulations, n_rollouts), or None = a random opponent)
AFFINETES_MCTS = [
    ("goofspiel", "goofspiel.py", None),  # simultaneous moves: env.py falls back to a random bot as well
    ("liars_dice", "liars_dice_agent.py", (3000, 200)),
    ("leduc_poker", "leduc_poker_agent.py", (3000, 200)),
    ("gin_rummy", "gin_rummy.py", (500, 10)),
    ("othello", "othello.py", (1000, 20)),
    ("backgammon", "backgammon.py", (600, 15)),
    ("hex", "hex.py", (1000, 50)),
    ("clobber", "clobber.py", (1500, 100)),
    ("hearts", "hearts.py", (500, 50)),
    ("euchre", "euchre.py", (1000, 100)),
    ("dots_and_boxes", "dots_and_boxes.py", (1200, 100)),
    ("go", "go.py", (300, 30)),
    ("chess", "chess.py", (200, 20)),
    ("checkers", "checkers.py", (500, 50)),
    ("quoridor", "quoridor.py", (800, 80)),
    ("blackjack", "blackjack.py", None),
    ("phantom_ttt", "phantom_ttt.py", (3000, 150)),
    ("2048", "game_2048.py", None),
    ("solitaire", "solitaire.py", None),
    ("bridge", "bridge.py", (200, 30)),
    ("amazons", "amazons.py", (200, 20)),
    ("oware", "oware.py", (300, 30)),
]


def test_the_mcts_table_covers_the_22_games_in_order() -> None:
    assert [row[0] for row in AFFINETES_MCTS] == list(GAME_NAMES[:NUM_TASK_GAMES]) == list(AFFINETES)
    assert UCT_C == 1.414  # env.py: mcts.MCTSBot(game=game, uct_c=1.414, ...)


@pytest.mark.parametrize(("game", "source", "budget"), AFFINETES_MCTS)
def test_affinetes_profile_opponents(game, source, budget) -> None:
    assert AFFINETES[game].mcts == budget and AFFINETES[game].source == source
    # The env builds its opponents at reset; bridge's task variants are slow to play, not to set up.
    env = OpenSpielEnv(game, profile="affinetes")
    assert env.default_opponent == "mcts"  # env.py: evaluate(..., opponent="mcts")
    if budget is None:
        assert env._opponent_specs == ["random"] * (env.num_players - 1)
        return
    config = env._mcts.for_game(env.game_spec)
    assert (config.simulations, config.rollouts, config.uct_c) == (*budget, 1.414)
    assert config.rollout_length == 0 and config.omniscient and config.solve and config.determinizations == 1


def test_affinetes_mcts_opponent_searches_the_real_state() -> None:
    env = OpenSpielEnv("leduc_poker", profile="affinetes", mcts={"simulations": 30, "rollouts": 2})
    env.reset(seed=0)
    (opponent,) = env._opponents.values()
    assert isinstance(opponent, MCTSOpponent) and opponent.determinizations == 1
    assert opponent.determinizer.method == "none" and opponent.config.simulations == 30
    default = OpenSpielEnv("leduc_poker", opponent="mcts")
    default.reset(seed=0)
    assert next(iter(default._opponents.values())).determinizer.method == "native"


def test_affinetes_seat_is_seed_mod_2() -> None:
    # env.py _run_evaluation: llm_player_id = seed % 2, then % num_players
    assert [affinetes_seat(s, 4) for s in range(5)] == [0, 1, 0, 1, 0] and affinetes_seat(7, 1) == 0
    env = OpenSpielEnv(profile="affinetes", opponent="random")
    for seed in range(6):
        assert env.reset(seed=seed, options={"task_id": 900_000_000})[1]["player"] == seed % 2  # euchre, 4 seats


def test_reset_option_picks_the_opponent_for_one_episode() -> None:
    env = OpenSpielEnv("tic_tac_toe")
    env.reset(seed=0, options={"opponent": "mcts"})
    assert isinstance(next(iter(env._opponents.values())), MCTSOpponent)
    env.reset(seed=0)
    assert isinstance(next(iter(env._opponents.values())), RandomOpponent)


# env.py _compute_score: (returns, llm player, utility range, ZERO_SUM?, expected) with each game's real range.
AFFINETES_SCORES = [
    ((1.0, -1.0), 0, (-1, 1), True, 1.0),  # chess win
    ((0.0, 0.0), 1, (-1, 1), True, 0.5),  # chess draw
    ((-3.0, 3.0), 1, (-13, 13), True, 16 / 26),  # leduc: (3 + 13) / 26
    ((2.0, -2.0, 2.0, -2.0), 0, (-4, 4), True, 0.75),  # euchre is ZERO_SUM: min-max even with 4 players
    ((2.0, -2.0, 2.0, -2.0), 1, (-4, 4), True, 0.25),
    ((-100.0, 100.0, -100.0, 100.0), 2, (-7600, 7600), True, 7500 / 15200),  # bridge, ZERO_SUM as well
    ((26.0, 20.0, 13.0, 0.0), 2, (0, 36), False, 1 / 3),  # hearts: sorted desc, index 2 -> 1 - 2/3
    ((26.0, 20.0, 13.0, 0.0), 3, (0, 36), False, 0.0),
    ((10.0, 10.0, 5.0, 0.0), 1, (0, 36), False, 1.0),  # tie for first: .index() finds the first -> rank 0
    ((10.0, 5.0, 5.0, 0.0), 2, (0, 36), False, 2 / 3),  # tie for second: both rank 1
    ((26.0, 26.0, 26.0, 26.0), 0, (0, 36), False, 1.0),  # everyone tied: everyone first
    ((896.0,), 0, (0, 20480), False, 896 / 20480),  # 2048: one player, the fallback min-max
    ((-1.0,), 0, (-1, 1), False, 0.0),  # blackjack loss
    ((0.0,), 0, (-1, 1), False, 0.5),  # blackjack push
    ((3.0, 3.0), 0, (0, 10), False, 0.5),  # two players, not zero-sum: a tie
    ((0.0, 0.0), 0, (0, 0), True, 0.0),  # ZERO_SUM with max == min: score = 0
]


@pytest.mark.parametrize(("returns", "player", "utility", "zero_sum", "expected"), AFFINETES_SCORES)
def test_scores_follow_compute_score(returns, player, utility, zero_sum, expected) -> None:
    assert normalised_score(returns, player, *utility, zero_sum) == pytest.approx(expected)


@pytest.mark.parametrize("task_id", [900_000_000, 800_000_001, 1_500_000_000])  # euchre, hearts, blackjack
def test_a_played_game_scores_like_affinetes(task_id: int) -> None:
    env = OpenSpielEnv(profile="affinetes", opponent="random")
    rng = random.Random(task_id)
    _, info = env.reset(seed=3, options={"task_id": task_id})
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(rng.choice(info["legal_actions"]))
    assert terminated
    returns, me = info["returns"], info["player"]
    game = env.game
    if game.get_type().utility.name == "ZERO_SUM":
        expected = (returns[me] - game.min_utility()) / (game.max_utility() - game.min_utility())
    elif len(returns) > 2:
        expected = 1 - sorted(returns, reverse=True).index(returns[me]) / (len(returns) - 1)
    else:
        expected = (returns[me] - game.min_utility()) / (game.max_utility() - game.min_utility())
    assert info["score"] == pytest.approx(expected)


def test_reset_option_sets_the_mcts_budget_for_one_episode() -> None:
    env = OpenSpielEnv("tic_tac_toe", opponent="mcts")
    env.reset(seed=0, options={"mcts": {"simulations": 7}})
    assert next(iter(env._opponents.values())).config.simulations == 7
    env.reset(seed=0)
    assert next(iter(env._opponents.values())).config.simulations == env.game_spec.mcts_simulations
