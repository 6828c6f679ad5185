"""The Trace answer scorer as it was before the caps (kept verbatim apart from names): regexes that go quadratic on
some texts and a textbook line-by-line longest-common-subsequence over every line. Not used by the env: it is the
reference that tests/envs/test_trace_scoring.py and benchmarks/trace_scoring.py compare
:mod:`llm_gym.envs.trace.scoring` with (same answers, same partial credit)."""

from __future__ import annotations

import difflib
import re

_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>.*", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"^.*</think>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:\n[ \t]*```|```)", re.DOTALL)
_INLINE_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)


def extract_answer(text: str) -> str:
    text = _THINK_OPEN.sub("", _THINK_CLOSE.sub("", _THINK.sub("", text)))
    fences = text.count("```")
    if fences == 0:
        return text
    if fences % 2:
        tail = text[text.rfind("```") + 3 :]
        return tail.split("\n", 1)[1] if "\n" in tail else tail
    blocks = _FENCE.findall(text) or _INLINE_FENCE.findall(text)
    return blocks[-1] if blocks else text


def normalise(text: str) -> str:
    return _TRAILING.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).strip("\n")


def lcs_length(a: list[str], b: list[str]) -> int:
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def score(answer_text: str, expected_stdout: str) -> float:
    answer = normalise(extract_answer(answer_text))
    expected = normalise(expected_stdout)
    if answer == expected:
        return 1.0
    got, want = answer.split("\n") if answer else [], expected.split("\n") if expected else []
    partial = lcs_length(want, got) / max(len(want), len(got), 1)
    list(difflib.unified_diff(want, got, "expected", "answer", n=1, lineterm=""))
    return partial
