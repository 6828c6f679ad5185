"""The shared parser: model text -> action id. It never raises, whatever the text."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llm_gym  # noqa: F401
from llm_gym.actions import InvalidActionPolicy, ParsedAction, TextActions, clean_answer, parse_action

ATARI = ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]


@pytest.mark.parametrize(
    ("text", "action", "method"),
    [
        ("RIGHT", 2, "name"),
        ("  right. ", 2, "name"),
        ("3", 3, "id"),
        ("Action: LEFTFIRE", 5, "label"),
        ("final answer = 1", 1, "label"),
        ("I will press RIGHTFIRE now", 4, "mention"),
        ("Move LEFT, then maybe RIGHT", 3, "mention"),
        ("<think>RIGHT is tempting, but</think> LEFT", 3, "name"),
        ("```\nFIRE\n```", 1, "name"),
        ("Sure!\n```text\nNOOP\n```", 0, "name"),
        ("I pick number 4", 4, "number"),
        ("noo", 0, "prefix"),
        ("ght", None, "none"),  # a substring of RIGHT and RIGHTFIRE: ambiguous
        ("htf", 4, "substring"),
        ("", None, "none"),
        ("<think>never closed", None, "none"),
        ("jump", None, "none"),
        ("42", None, "none"),
    ],
)
def test_parse_cases(text: str, action: int | None, method: str) -> None:
    parsed = parse_action(text, ATARI)
    assert (parsed.action, parsed.method) == (action, method)


def test_prefix_must_be_unique() -> None:
    assert parse_action("ri", ATARI).action is None, "RIGHT and RIGHTFIRE both start with ri"
    assert parse_action("ri", ATARI[:4]).action == 2
    assert parse_action("fir", ATARI).action == 1, "a unique prefix wins over an ambiguous substring"


def test_ids_follow_the_legal_set() -> None:
    names, legal = ["e4", "d4", "Nf3"], [12, 40, 77]
    assert parse_action("40", names, legal).action == 40
    assert parse_action("Nf3", names, legal).action == 77
    assert parse_action("1", names, legal).action is None, "1 is not a legal id here"


def test_names_win_over_ids_when_names_are_numbers() -> None:
    # 2048-style games name actions with numbers that are not their ids.
    assert parse_action("2", ["0", "1", "2"], [5, 6, 7]).action == 7


def test_aliases() -> None:
    assert parse_action("RIGHT", ["NOOP", "FIRE", "UP", "DOWN"], aliases={"RIGHT": 2}).action == 2


def test_clean_answer() -> None:
    assert clean_answer("<think>x</think>\n  A  \n B ") == "a b"
    assert clean_answer("a ```py\nprint(1)\n``` b ```\nlast\n```") == "last"
    assert clean_answer(123) == "123"


@settings(max_examples=400, deadline=None)
@given(
    text=st.one_of(st.text(), st.binary().map(repr), st.integers().map(str), st.none(), st.floats()),
    names=st.lists(st.text(max_size=12), max_size=8),
)
def test_parser_never_raises(text: object, names: list[str]) -> None:
    legal = list(range(len(names)))
    parsed = parse_action(text, names, legal)
    assert parsed.action is None or parsed.action in legal


# Numbers of any length, alone or among words: Python's int() refuses more than 4,300 digits.
_DIGIT_RUNS = st.builds(
    lambda before, digit, length, middle, after: before + digit * length + middle + after,
    st.sampled_from(["", "-", "action: ", "I pick ", "0", "1."]),
    st.sampled_from("0123456789"),
    st.integers(min_value=1, max_value=20_000),
    st.sampled_from(["", "7", " 2", "\n3", " or FIRE"]),
    st.text(max_size=8),
)


@settings(max_examples=150, deadline=None)
@given(text=_DIGIT_RUNS, legal=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=6, unique=True))
def test_parser_never_raises_on_long_digit_runs(text: str, legal: list[int]) -> None:
    names = [f"action{a}" for a in legal]
    parsed = parse_action(text, names, legal)
    assert parsed.action is None or parsed.action in legal


def test_long_numbers_are_not_ids_and_later_ids_are_still_read() -> None:
    names = ["NOOP", "FIRE", "RIGHT", "LEFT"]
    assert parse_action("1" * 4301, names).action is None
    assert parse_action("-" + "9" * 50_000, names).action is None
    assert parse_action("0" * 5000 + "2", names) == ParsedAction(2, "id")  # leading zeros do not make it long
    assert parse_action("9" * 10_000 + " then 3", names) == ParsedAction(3, "number")
    started = time.perf_counter()
    parse_action(("1" * 100_000 + " ") * 10, names)
    assert time.perf_counter() - started < 2.0, "a megabyte of digits is read in linear time"


def test_text_actions_step_takes_a_huge_number() -> None:
    env = TextActions(gym.make("LLMBreakout-text-v0"))
    env.reset(seed=0)
    _, reward, _, _, info = env.step("1" * 4301)
    assert info["invalid_action"] and info["parsed_action"] == 0 and reward == pytest.approx(-0.1)


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.text(alphabet=st.characters(blacklist_categories=["L", "N"]), max_size=10),
    index=st.integers(min_value=0, max_value=len(ATARI) - 1),
)
def test_a_name_alone_is_always_found(prefix: str, index: int) -> None:
    assert parse_action(prefix + ATARI[index], ATARI).action == index


def test_text_actions_wrapper_counts_and_penalises() -> None:
    env = TextActions(gym.make("LLMBreakout-text-v0"), InvalidActionPolicy(fallback="noop", penalty=0.5))
    env.reset(seed=0)
    _, reward, _, _, info = env.step("FIRE")
    assert info["parsed_action"] == 1 and not info["invalid_action"] and reward == 0.0
    _, reward, _, _, info = env.step("do a barrel roll")
    assert info["invalid_action"] and info["parsed_action"] == 0 and reward == -0.5
    _, _, _, _, info = env.step(None)
    assert info["invalid_actions"] == 2
    _, info = env.reset(seed=1)
    assert info["invalid_actions"] == 0


def test_text_actions_random_fallback_is_seeded() -> None:
    def run() -> list[int]:
        env = TextActions(gym.make("LLMBreakout-text-v0"), InvalidActionPolicy(fallback="random"))
        env.reset(seed=5)
        return [env.step("???")[4]["parsed_action"] for _ in range(20)]

    first = run()
    assert first == run() and len(set(first)) > 1


TTT_AFTER_CENTER = ["x(0,0)", "x(0,1)", "x(0,2)", "x(1,0)", "x(1,2)", "x(2,0)", "x(2,1)", "x(2,2)"]  # (1,1) taken
TTT_IDS = [0, 1, 2, 3, 5, 6, 7, 8]


@pytest.mark.parametrize(
    "text",
    ["x(1,1)", "I play x(1,1).", "Action: x(1,1)", "o(1,1)", "1,1", "(1, 1)", "the centre, (1,1)", "x(3,3)"],
)
def test_a_move_that_is_not_legal_is_never_read_as_another(text: str) -> None:
    """``x(1,1)`` on an occupied cell used to be played as action 1 (``x(0,1)``) by the number rule."""
    parsed = parse_action(text, TTT_AFTER_CENTER, TTT_IDS)
    assert parsed.action is None, parsed


@pytest.mark.parametrize(
    ("names", "legal", "text"),
    [
        (["x0", "x1", "x2", "x4", "x5", "x6"], [0, 1, 2, 4, 5, 6], "x3"),  # connect four, column 3 full
        (["pile:1, take:1;", "pile:2, take:1;"], [0, 1], "pile:1, take:5;"),  # nim
        (["1-1", "1-2", "2-1"], [0, 1, 5], "2-2"),  # liar's dice
    ],
)
def test_other_games_illegal_moves_are_invalid(names: list[str], legal: list[int], text: str) -> None:
    assert parse_action(text, names, legal) == ParsedAction(None, "illegal")


def test_legal_moves_and_plain_ids_still_read() -> None:
    assert parse_action("x(1,2)", TTT_AFTER_CENTER, TTT_IDS).action == 5
    assert parse_action("x(1,1) is taken, so x(2,2)", TTT_AFTER_CENTER, TTT_IDS).action == 8
    assert parse_action("I pick action 3, the left edge", TTT_AFTER_CENTER, TTT_IDS) == ParsedAction(3, "number")
    assert parse_action("answer: 7", TTT_AFTER_CENTER, TTT_IDS).action == 7


def test_the_tic_tac_toe_env_penalises_an_occupied_cell() -> None:
    env = TextActions(gym.make("OpenSpiel-tic_tac_toe-v0"))
    _, info = env.reset(seed=0, options={"seat": 0})
    centre = info["action_names"][info["legal_actions"].index(4)]
    _, _, _, _, info = env.step(centre)
    assert 4 not in info["legal_actions"] and 1 in info["legal_actions"]  # x took it; action 1 (x(0,1)) is free
    _, reward, _, _, info = env.step(centre)
    assert info["invalid_action"] and info["parse_method"] == "illegal" and reward < 0


def test_text_actions_after_the_game_is_over_asks_for_a_reset() -> None:
    env = TextActions(gym.make("OpenSpiel-tic_tac_toe-v0"))
    with pytest.raises(gym.error.ResetNeeded, match="call reset"):
        env.step("x(0,0)")
    env.reset(seed=0)
    terminated = False
    while not terminated:
        _, _, terminated, _, info = env.step(str(env._info["legal_actions"][0]))
    with pytest.raises(gym.error.ResetNeeded, match="the episode is over"):
        env.step("x(0,0)")
