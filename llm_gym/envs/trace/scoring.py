"""Score a model's predicted stdout against the real one.

1. Reasoning is dropped: every ``<think>...</think>`` block; an unclosed ``<think>`` drops the rest of the text;
   a stray ``</think>`` (the opening tag was in the prompt) drops everything before it.
2. If a fenced code block remains (```` ``` ```` with or without a language tag), only the last one counts; an
   unclosed final fence counts up to the end of the text.
3. Whitespace is normalised on both sides the same way: ``\\r\\n`` and ``\\r`` become ``\\n``, trailing spaces and
   tabs are cut from every line, and blank lines at the start and the end are dropped. Leading spaces, inner
   blank lines and letter case stay significant: they are part of what the program prints.

``exact`` is 1.0 when the normalised texts are equal, else 0.0. ``affinetes`` is 1.0 when affinetes would call the
answer correct (:mod:`llm_gym.envs.trace.affinetes`: its own cleaning, whitespace and case ignored). ``partial`` is the number of lines of the
longest common subsequence of the two line lists (expected lines reproduced in order) divided by the longer of
the two lists, so padding an answer with extra lines does not pay; it is 1.0 exactly when ``exact`` is.
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
_THINK_OPEN = re.compile(r"<think>.*", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"^.*</think>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:\n[ \t]*```|```)", re.DOTALL)
_INLINE_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)
_DIFF_LINES = 20


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

    def reward(self, mode: ScoringMode) -> float:
        if mode == "affinetes":
            return float(self.affinetes)
        return float(self.exact) if mode == "exact" else self.partial


def extract_answer(text: object) -> str:
    """The part of a model's text that is its predicted output (steps 1 and 2 above), not yet normalised."""
    text = text if isinstance(text, str) else str(text)
    text = _THINK_OPEN.sub("", _THINK_CLOSE.sub("", _THINK.sub("", text)))
    fences = text.count("```")
    if fences == 0:
        return text
    if fences % 2:  # the last fence never closes (the answer was cut off): what follows it, minus its tag line
        tail = text[text.rfind("```") + 3 :]
        return tail.split("\n", 1)[1] if "\n" in tail else tail
    blocks = _FENCE.findall(text) or _INLINE_FENCE.findall(text)
    return blocks[-1] if blocks else text


def normalise(text: str) -> str:
    """Step 3 above: newlines unified, trailing whitespace cut, surrounding blank lines dropped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING.sub("", text)
    return text.strip("\n")


def _lines(text: str) -> list[str]:
    return text.split("\n") if text else []


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two line lists (O(len(a) * len(b)), outputs are short)."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def score(answer_text: object, expected_stdout: str) -> Score:
    """Compare a model's raw text with a program's real stdout."""
    answer = normalise(extract_answer(answer_text))
    expected = normalise(expected_stdout)
    affinetes = affinetes_matches(answer_text, expected_stdout)
    if answer == expected:
        return Score(True, 1.0, answer, expected, "", affinetes)
    got, want = _lines(answer), _lines(expected)
    partial = lcs_length(want, got) / max(len(want), len(got), 1)
    diff = list(difflib.unified_diff(want, got, "expected", "answer", n=1, lineterm=""))
    if len(diff) > _DIFF_LINES:
        diff = [*diff[:_DIFF_LINES], f"... ({len(diff) - _DIFF_LINES} more diff lines)"]
    return Score(False, partial, answer, expected, "\n".join(diff), affinetes)
