"""Trace ``scoring="affinetes"`` against verdicts worked out by hand from affinetes'
``environments/trace/trace_task.py`` (``clean_llm_prediction`` + ``compare_outputs``), beside this project's own."""

from __future__ import annotations

import pytest

from llm_gym.envs.trace.affinetes import clean_prediction, matches
from llm_gym.envs.trace.env import TraceEnv
from llm_gym.envs.trace.scoring import score

# (answer, expected stdout, affinetes' verdict, this project's exact verdict)
CASES = [
    ("```\nhello\n```", "hello", True, True),
    ("```python\nA\nB\n```", "a b", True, False),  # whitespace and case ignored there, not here
    ("a  b", "a b", True, False),
    ("<think>no idea</think>```output\n1\n```", "1", True, True),
    ("reasoning...</think>\n5", "5", True, True),  # stray closing tag: keep what follows the last one
    ("<thinking>a</thinking>b", "b", True, False),  # only <think> is a reasoning tag here
    ("<THINK>x</THINK>5", "5", False, True),  # their tags are case-sensitive
    ("```python\nprint(1)\n```\nOutput:\n```\n1\n```", "1", False, True),  # first block there, last block here
    ("```\n1\n2", "1\n2", False, True),  # unclosed fence: no block there, the cut-off answer here
    ("```output3\nx\n```", "3x", True, False),  # the tag stops at the digit, which joins the block
    ("<think>unclosed 5", "5", False, False),
    ("``````", "", True, True),  # an empty block
    ("```\n\n1\n\n```", "1", True, True),
]


@pytest.mark.parametrize(("answer", "expected", "affinetes", "exact"), CASES)
def test_affinetes_verdicts_beside_the_projects(answer, expected, affinetes, exact) -> None:
    assert matches(answer, expected) is affinetes
    result = score(answer, expected)
    assert result.affinetes is affinetes and result.exact is exact
    assert result.reward("affinetes") == float(affinetes)


def test_cleaning_steps() -> None:
    assert clean_prediction("<think>a</think>x<think>b</think>y") == "xy"
    assert clean_prediction("a</think>b</think> c ") == "c"
    assert clean_prediction("```py\n  x\n```") == "x"


def test_env_rewards_with_affinetes_scoring() -> None:
    env = TraceEnv(level=1, scoring="affinetes")
    env.reset(seed=0, options={"task_id": 3})
    expected = env.task.expected
    _, reward, *_, info = env.step(f"```\n{expected.upper()}\n```")
    assert reward == 1.0 and info["affinetes"]  # case is ignored there
    assert info["exact"] == (expected.upper() == expected)
    assert "ignoring all whitespace and letter case" in env.instructions
