"""The OpenSpiel catalog: game order, task-id decoding, registration, and the normalised score rules."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.envs.openspiel.catalog import (
    GAME_NAMES,
    GAMES,
    NUM_TASK_GAMES,
    TASK_STRIDE,
    decode_task_id,
    game_spec,
    task_id_of,
)
from llm_gym.envs.openspiel.core import load_game
from llm_gym.envs.openspiel.rules import RULES
from llm_gym.envs.openspiel.scoring import is_success, normalised_score
from llm_gym.errors import UnknownNameError

# The issue's 22-game list, in its order: task id game index i is ISSUE_ORDER[i].
ISSUE_ORDER = [
    "goofspiel", "liars_dice", "leduc_poker", "gin_rummy", "othello", "backgammon", "hex", "clobber", "hearts",
    "euchre", "dots_and_boxes", "go", "chess", "checkers", "quoridor", "blackjack", "phantom_ttt", "2048",
    "solitaire", "bridge", "amazons", "oware",
]  # fmt: skip


def test_the_22_task_games_come_first_in_the_issue_order() -> None:
    assert NUM_TASK_GAMES == 22
    assert list(GAME_NAMES[:22]) == ISSUE_ORDER
    assert {"tic_tac_toe", "connect_four", "kuhn_poker", "breakthrough"} <= set(GAME_NAMES[22:])
    assert len(set(GAME_NAMES)) == len(GAME_NAMES)


# task id -> (game, variant, the parameters that variant must set). The 22 affinetes games are checked against
# affinetes' own rules in tests/envs/test_openspiel_affinetes.py; here the catalog's mechanics and the extras.
DECODING_TABLE = [
    (0, "goofspiel", 0, {"num_cards": 8, "points_order": "random"}),
    (5, "goofspiel", 0, {"num_cards": 8}),  # variants wrap around: 5 % 5 = 0
    (600_000_006, "hex", 2, {"board_size": 9}),  # 6 % 4 = 2
    (2_200_000_000, "tic_tac_toe", 0, {}),
    (2_400_000_001, "kuhn_poker", 1, {"players": 3}),
    (2_500_000_001, "breakthrough", 1, {"rows": 8, "columns": 8}),
]


@pytest.mark.parametrize(("task_id", "game", "variant", "params"), DECODING_TABLE)
def test_task_id_decoding_table(task_id: int, game: str, variant: int, params: dict) -> None:
    task = decode_task_id(task_id)
    assert (task.game.name, task.variant) == (game, variant)
    assert task.task_id == task_id
    for key, value in params.items():
        assert task.params[key] == value


def test_task_ids_outside_the_list_are_refused() -> None:
    with pytest.raises(ValueError, match="task ids are 0"):
        decode_task_id(len(GAMES) * TASK_STRIDE)
    with pytest.raises(ValueError):
        decode_task_id(-1)


def test_task_id_of_inverts_decoding_for_every_variant() -> None:
    for spec in GAMES:
        for variant in range(len(spec.variants)):
            task = decode_task_id(task_id_of(spec.name, variant))
            assert (task.game, task.variant) == (spec, variant)
    with pytest.raises(ValueError):
        task_id_of("hex", 99)
    with pytest.raises(UnknownNameError, match="tic_tac_toe"):
        game_spec("tic_tac_toe_")


def test_every_variant_loads_and_has_rules_and_sane_caps() -> None:
    for spec in GAMES:
        assert spec.name in RULES and len(RULES[spec.name]) > 80
        assert spec.max_turns > 0 and spec.mcts_simulations > 0
        for params in spec.variants:
            game = load_game(spec.name, params)
            assert game.num_distinct_actions() > 0
            # The full state string may be shown only where nothing is hidden.
            if spec.view == "state":
                assert game.get_type().information.name == "PERFECT_INFORMATION", spec.name


def test_every_game_is_registered_with_string_entry_points() -> None:
    for name in GAME_NAMES:
        spec = gym.registry[f"OpenSpiel-{name}-v0"]
        assert spec.entry_point == "llm_gym.envs.openspiel.env:OpenSpielEnv"
        # bridge's per-game id plays cards: its task variants need a double-dummy solve (seconds) per deal
        extra = {"params": {"use_double_dummy_result": False}} if name == "bridge" else {}
        assert spec.kwargs == {"game": name, **extra}
    assert "OpenSpiel-v0" in gym.registry


def test_registration_does_not_import_pyspiel() -> None:
    code = "import sys, llm_gym; assert 'OpenSpiel-chess-v0' in llm_gym.env_ids(); print('pyspiel' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- the normalised score -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returns", "player", "utility", "zero_sum", "expected"),
    [
        ((1.0, -1.0), 0, (-1, 1), True, 1.0),  # two-player zero-sum: min-max of the utility range
        ((1.0, -1.0), 1, (-1, 1), True, 0.0),
        ((0.0, 0.0), 0, (-1, 1), True, 0.5),  # a draw
        ((-3.0, 3.0), 1, (-13, 13), True, 16 / 26),  # leduc: chips won, scaled
        ((5.0, 2.0), 0, (0, 10), False, 1.0),  # two-player general-sum: 1 / 0.5 / 0
        ((2.0, 2.0), 1, (0, 10), False, 0.5),
        ((1.0, 5.0), 0, (0, 10), False, 0.0),
        ((100.0, -100.0, 100.0, -100.0), 0, (-7600, 7600), True, 7700 / 15200),  # bridge: zero-sum, min-max
        ((-2.0, 2.0, -2.0, 2.0), 1, (-4, 4), True, 0.75),  # euchre: the team's result, scaled
        ((26.0, 20.0, 13.0, 0.0), 2, (0, 36), False, 1 / 3),  # hearts: by rank
        ((26.0, 26.0, 26.0, 26.0), 3, (0, 36), False, 1.0),  # ties share the best place
        ((5.0, 1.0), 0, (1, 1), True, 0.0),  # zero-sum with an empty utility range
        ((896.0,), 0, (0, 1792), False, 0.5),  # one player: min-max (2048 to the 256 tile)
        ((-1.0,), 0, (-1, 1), False, 0.0),  # blackjack loss
    ],
)
def test_normalised_score_rules(returns, player, utility, zero_sum, expected) -> None:
    score = normalised_score(returns, player, *utility, zero_sum)
    assert score == pytest.approx(expected)
    assert 0.0 <= score <= 1.0
    assert is_success(score) == (score > 0.5)
