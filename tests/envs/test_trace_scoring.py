"""Trace scoring: think blocks, fences, whitespace normalisation, partial credit."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_gym.envs.trace import scoring_reference
from llm_gym.envs.trace.scoring import MAX_COMPARED_LINES, extract_answer, lcs_length, normalise, score

EXPECTED = "__DBG_1__ x=1\n  indented\n\nlast line\n"


@pytest.mark.parametrize(
    "answer",
    [
        EXPECTED,
        "__DBG_1__ x=1   \n  indented\t\n\nlast line",  # trailing spaces and tabs, no final newline
        "\n\n__DBG_1__ x=1\r\n  indented\r\n\r\nlast line\r\n\n",  # CRLF, blank lines around
        "```\n__DBG_1__ x=1\n  indented\n\nlast line\n```",
        "Here it is:\n```output\n__DBG_1__ x=1\n  indented\n\nlast line\n```\nDone.",
        "```python\nprint(1)\n```\nprints:\n```text\n__DBG_1__ x=1\n  indented\n\nlast line\n```",  # last block
        "<think>x is 1, so\n```\nwrong\n```</think>\n__DBG_1__ x=1\n  indented\n\nlast line",
        "<THINK>hm</THINK>```\n__DBG_1__ x=1\n  indented\n\nlast line",  # unclosed fence (cut off)
        "the opening tag was in the prompt... </think>\n__DBG_1__ x=1\n  indented\n\nlast line\n",
    ],
)
def test_equivalent_answers_match(answer: str) -> None:
    result = score(answer, EXPECTED)
    assert result.exact and result.partial == 1.0 and result.diff == ""
    assert result.reward("exact") == result.reward("partial") == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "__DBG_1__ x=1\nindented\n\nlast line",  # leading spaces are output
        "__DBG_1__ x=1\n  indented\nlast line",  # inner blank lines too
        "__dbg_1__ x=1\n  indented\n\nlast line",  # case
        "__DBG_1__ x = 1\n  indented\n\nlast line",  # inner spaces
        "<think>__DBG_1__ x=1\n  indented\n\nlast line",  # all of it is unfinished thinking
        "",
    ],
)
def test_different_answers_do_not_match(answer: str) -> None:
    result = score(answer, EXPECTED)
    assert not result.exact and result.reward("exact") == 0.0
    assert 0.0 <= result.partial < 1.0
    assert result.diff.startswith("--- expected\n+++ answer")


def test_normalise() -> None:
    assert normalise("\n\n a \t\r\nb  \r\n\n") == " a\nb"
    assert normalise("") == ""


def test_extract_answer() -> None:
    assert extract_answer("```1 2```") == "1 2"
    assert extract_answer("no fence") == "no fence"
    assert extract_answer(42) == "42"
    assert extract_answer("<think>a</think>b<think>c</think>d") == "bd"


def test_partial_credit_counts_expected_lines_in_order() -> None:
    expected = "a\nb\nc\nd"
    assert score("a\nb\nc", expected).partial == pytest.approx(3 / 4)
    assert score("a\nX\nc\nd", expected).partial == pytest.approx(3 / 4)
    assert score("d\nc\nb\na", expected).partial == pytest.approx(1 / 4)  # order matters
    assert score("nothing right", expected).partial == 0.0
    # Extra lines count against the answer: padding does not pay.
    assert score("a\nb\nc\nd\nx\ny\nz\nw", expected).partial == pytest.approx(4 / 8)
    assert score("", "").exact and score("", "").partial == 1.0


def test_lcs_length() -> None:
    assert lcs_length(list("abcbdab"), list("bdcaba")) == 4
    assert lcs_length([], ["a"]) == 0


def test_long_diffs_are_cut() -> None:
    result = score("\n".join(f"y{i}" for i in range(100)), "\n".join(f"x{i}" for i in range(100)))
    assert result.diff.count("\n") <= 21 and "more diff lines" in result.diff


# -- huge answers: every step of scoring is linear, and what is compared is capped -------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["<think>", "</think>", "<THINK>", "</Think>", "a", "b\n", "```", " "]), max_size=14))
def test_reasoning_is_dropped_as_before(tokens: list[str]) -> None:
    text = "".join(tokens)
    assert extract_answer(text) == scoring_reference.extract_answer(text)  # the regex-only extraction used before


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=40), st.lists(st.sampled_from("abcd"), max_size=40))
def test_bit_parallel_lcs_equals_the_textbook_one(a: list[str], b: list[str]) -> None:
    assert lcs_length(a, b) == scoring_reference.lcs_length(a, b)  # the textbook dynamic programme


@pytest.mark.parametrize(
    "answer",
    [
        "a\n" * 5_000_000,  # 10 MB of short lines (took 51 s to score before)
        " " * 10_000_000 + "x",  # trailing-space regex: quadratic before
        "<think>" * 1_000_000,  # unclosed think tags: quadratic before
        "x = 1\n" * 200_000 + "```\n" * 1001,
    ],
    ids=["short-lines", "spaces", "think-tags", "fences"],
)
def test_a_huge_answer_scores_in_bounded_time(answer: str) -> None:
    # The bound is relative to a linear pass over the same answer timed in this run, so a loaded machine slows both:
    # scoring took 0.3-9x that pass here (2-core machine at load 12); the quadratic cases before took a minute.
    reference = sorted(_linear_pass_seconds(answer) for _ in range(3))[1]
    started = time.perf_counter()
    result = score(answer, EXPECTED)
    assert time.perf_counter() - started < 50 * reference + 0.5
    assert not result.exact and result.partial < 0.01


def _linear_pass_seconds(answer: str) -> float:
    """Seconds for one linear pass over ``answer``: split into lines, strip each, lower-case the whole."""
    started = time.perf_counter()
    lines = [line.rstrip() for line in answer.splitlines()]
    answer.lower()
    assert len(lines) >= 1
    return time.perf_counter() - started


def test_caps_only_ever_lower_partial_credit_and_say_so() -> None:
    expected = "\n".join(f"__DBG_{i}__ x={i}" for i in range(30))
    padded = expected + "\n" + " \n" * 2_000_000  # whitespace padding normalises away, even past the cap
    result = score(padded, expected)
    assert result.exact and result.partial == 1.0
    many = expected + "\n" + "noise\n" * (MAX_COMPARED_LINES + 10)
    result = score(many, expected)
    assert result.cut and not result.exact
    assert result.partial == pytest.approx(30 / (30 + MAX_COMPARED_LINES + 10))  # every line is counted
    assert not score(expected + "\nnoise", expected).cut
