"""Score a model's predicted stdout against the real one.

1. Reasoning is dropped: every ``<think>...</think>`` block; an unclosed ``<think>`` drops the rest of the text;
   a stray ``</think>`` (the opening tag was in the prompt) drops everything before it.
2. If a fenced code block remains (```` ``` ```` with or without a language tag), only the last one counts; an
   unclosed final fence counts up to the end of the text.
3. Whitespace is normalised on both sides the same way: ``\\r\\n`` and ``\\r`` become ``\\n``, trailing spaces and
   tabs are cut from every line, and blank lines at the start and the end are dropped. Leading spaces, inner
   blank lines and letter case stay significant: they are part of what the program prints.

``exact`` is 1.0 when the normalised texts are equal, else 0.0. ``affinetes`` is 1.0 when affinetes would call the
answer correct (:mod:`llm_gym.envs.trace.affinetes`: its own cleaning, whitespace and case ignored). ``partial`` is
the number of lines of the longest common subsequence of the two line lists (expected lines reproduced in order) divided by the longer of
the two lists, so padding an answer with extra lines does not pay; it is 1.0 exactly when ``exact`` is.

What is compared is capped, so a step costs little whatever the answer's size (a 10 MB answer scores in a fraction
of a second, not a minute), and ``Score.cut`` says when a cap applied:

* the answer (what steps 1 and 2 kept) is compared up to its first ``max(MAX_ANSWER_CHARS, 2 * len(expected))``
  characters; anything longer cannot be the program's output, which the sandbox caps far below that, unless it
  is padded with whitespace that normalising would drop;
* partial credit compares at most :data:`MAX_COMPARED_LINES` lines of each side, the diff at most
  :data:`MAX_DIFF_INPUT_LINES`; lines past the cap count as unmatched (the denominator still counts every line),
  so a cut can only lower ``partial``.

Every step of the text handling is linear in the length of the text.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from llm_gym.envs.trace.affinetes import matches as affinetes_matches

ScoringMode = Literal["exact", "partial", "affinetes"]
SCORING_MODES: tuple[str, ...] = ("exact", "partial", "affinetes")

_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:\n[ \t]*```|```)", re.DOTALL)
_INLINE_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
# The look-behind makes a match start only where a run of blanks starts: without it, a line of a million spaces
# followed by text is retried from every one of its spaces (quadratic).
_TRAILING = re.compile(r"(?<![ \t])[ \t]+$", re.MULTILINE)
_DIFF_LINES = 20
MAX_ANSWER_CHARS = 1 << 20
"""The answer is compared up to this many characters, or twice the expected output's length if that is more."""
MAX_COMPARED_LINES = 20_000
"""Partial credit compares at most this many lines of the answer and of the expected output (see above)."""
MAX_DIFF_INPUT_LINES = 2_000
"""The diff is computed over at most this many lines of each side (it shows at most 20 diff lines anyway)."""


@dataclass(frozen=True)
class Score:
    """How an answer compares with the expected output."""

    exact: bool
    partial: float
    answer: str
    """The normalised answer that was compared."""
    expected: str
    """The normalised expected output."""
    diff: str
    """A short unified diff (expected -> answer), empty when they match."""
    affinetes: bool = False
    """affinetes' exact-match verdict on the same raw answer."""
    cut: bool = False
    """True when a cap applied (see above): the answer was cut, or lines past the cap counted as unmatched."""

    def reward(self, mode: ScoringMode) -> float:
        if mode == "affinetes":
            return float(self.affinetes)
        return float(self.exact) if mode == "exact" else self.partial


def extract_answer(text: object) -> str:
    """The part of a model's text that is its predicted output (steps 1 and 2 above), not yet normalised."""
    text = _drop_reasoning(text if isinstance(text, str) else str(text))
    fences = text.count("```")
    if fences == 0:
        return text
    if fences % 2:  # the last fence never closes (the answer was cut off): what follows it, minus its tag line
        tail = text[text.rfind("```") + 3 :]
        return tail.split("\n", 1)[1] if "\n" in tail else tail
    blocks = _FENCE.findall(text) or _INLINE_FENCE.findall(text)
    return blocks[-1] if blocks else text


def _drop_reasoning(text: str) -> str:
    """Step 1 above, in linear time.

    Only the text up to the last ``</think>`` can hold closed blocks; matching ``<think>...</think>`` past it would
    rescan the rest of the text from every unclosed ``<think>`` (quadratic in a text of many of them).
    """
    last_close = None
    for last_close in _THINK_CLOSE.finditer(text):  # noqa: B007  (only the last one is wanted)
        pass
    if last_close is not None:
        head = _THINK.sub("", text[: last_close.end()])
        stray = None
        for stray in _THINK_CLOSE.finditer(head):  # noqa: B007  (a close left over: its open was in the prompt)
            pass
        text = (head[stray.end() :] if stray is not None else head) + text[last_close.end() :]
    opened = _THINK_OPEN.search(text)  # unfinished thinking: the rest is not an answer
    return text[: opened.start()] if opened else text


def normalise(text: str) -> str:
    """Step 3 above: newlines unified, trailing whitespace cut, surrounding blank lines dropped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if " \n" in text or "\t\n" in text or text.endswith((" ", "\t")):  # substring search: much faster than re
        text = _TRAILING.sub("", text)
    return text.strip("\n")


def _lines(text: str, cap: int) -> tuple[list[str], int]:
    """The first ``cap`` lines of ``text`` and how many it has (without splitting a huge text whole)."""
    if not text:
        return [], 0
    lines = text.split("\n", cap)
    if len(lines) > cap:
        return lines[:cap], text.count("\n") + 1
    return lines, len(lines)


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two line lists.

    Bit-parallel (Allison-Dix/Hyyrö): one big-integer row of ``len(b)`` bits per line of ``a``, so the cost is
    ``len(a) * len(b) / 64`` machine words instead of ``len(a) * len(b)`` Python steps.
    """
    if not a or not b:
        return 0
    where: dict[str, int] = {}
    for j, line in enumerate(b):
        where[line] = where.get(line, 0) | (1 << j)
    full = (1 << len(b)) - 1
    row = full
    for line in a:
        matches = row & where.get(line, 0)
        row = ((row + matches) | (row - matches)) & full
    return len(b) - row.bit_count()


def score(answer_text: object, expected_stdout: str) -> Score:
    """Compare a model's raw text with a program's real stdout."""
    answer = extract_answer(answer_text)
    limit = max(MAX_ANSWER_CHARS, 2 * len(expected_stdout))
    answer_cut = len(answer) > limit
    answer = normalise(answer[:limit])
    expected = normalise(expected_stdout)
    affinetes = affinetes_matches(answer_text, expected_stdout)
    if answer == expected:
        return Score(True, 1.0, answer, expected, "", affinetes, answer_cut)
    got, got_total = _lines(answer, MAX_COMPARED_LINES)
    want, want_total = _lines(expected, MAX_COMPARED_LINES)
    partial = lcs_length(want, got) / max(want_total, got_total, 1)
    diff = list(
        difflib.unified_diff(
            want[:MAX_DIFF_INPUT_LINES], got[:MAX_DIFF_INPUT_LINES], "expected", "answer", n=1, lineterm=""
        )
    )
    if len(diff) > _DIFF_LINES:
        diff = [*diff[:_DIFF_LINES], f"... ({len(diff) - _DIFF_LINES} more diff lines)"]
    cut = answer_cut or got_total > len(got) or want_total > len(want)
    return Score(False, partial, answer, expected, "\n".join(diff), affinetes, cut)
