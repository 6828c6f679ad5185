"""Worked solutions of Trace programs (:mod:`llm_gym.envs.trace.worked`): one operation per step, the printed lines
equal to the sandbox's stdout on real generated tasks, and a clear refusal of what is not straight-line code."""

from __future__ import annotations

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401 - registers the env ids
from llm_gym.envs.trace.inject import HELPER
from llm_gym.envs.trace.worked import UnsupportedProgram, dbg_text, worked_answer, worked_solution


def test_each_step_substitutes_the_names_then_does_one_operation() -> None:
    program = 'y = 4\nname = "cherry"\ny += y\ntotal = len(name) * 2 + y\nprint(f"{name}:{total}", name[1:3])\n'
    solution = worked_solution(program)
    assert solution.steps == (
        "y = 4",
        'name = "cherry"',
        "y = y + y = 4 + 4 = 8",
        "total = len(name) * 2 + y = len('cherry') * 2 + 8 = 6 * 2 + 8 = 12 + 8 = 20",
        "print(f\"{name}:{total}\", name[1:3]) = print(f\"{'cherry'}:{20}\", 'cherry'[1:3]) = "
        "print('cherry:20', 'cherry'[1:3]) = print('cherry:20', 'he') -> cherry:20 he",
    )
    assert solution.output == "cherry:20 he\n"


def test_debug_prints_show_the_line_they_write() -> None:
    program = HELPER + "\nflag = 3 > 2\nprint('__DBG_1__', 'flag=' + __dbg__(flag))\nword = 'x' * 70\n"
    program += "print('__DBG_2__', 'word=' + __dbg__(word), 'flag=' + __dbg__(flag))\nprint(round(7 / 3, 2))\n"
    solution = worked_solution(program)
    assert solution.steps[1] == "print -> __DBG_1__ flag=True"
    assert solution.steps[3] == "print -> __DBG_2__ word=str flag=True"  # over 60 characters: the type name
    assert solution.steps[4] == "print(round(7 / 3, 2)) = print(round(2.3333333333333335, 2)) = print(2.33) -> 2.33"
    assert dbg_text("ab") == "'ab'" and dbg_text([1]) == "list" and dbg_text(None) == "None"


def test_print_separators_and_negative_slices() -> None:
    solution = worked_solution("s = 'stone'\nprint(s[-2:] + s[:2], 3, sep='|', end='!\\n')\n")
    assert solution.output == "nest|3!\n"
    assert solution.steps[-1].endswith("-> nest|3!")


def test_generated_level_1_tasks_are_worked_out_and_score_one() -> None:
    env = gym.make("Trace-v0", level=1)
    for seed in range(60):
        env.reset(seed=seed)
        task = env.unwrapped.task
        answer = worked_answer(task.program, task.expected)  # raises if the worked output differs from the sandbox's
        assert answer.startswith("<think>\n") and answer.endswith("</think>\n" + task.expected)
        _, reward, _, _, info = env.step(answer)
        assert reward == 1.0 and info["exact"]  # the env's scoring drops the think block
    env.close()


@pytest.mark.parametrize(
    ("program", "needle"),
    [
        ("for i in range(3):\n    print(i)\n", "line 1: For is not straight-line code"),
        ("x = [1, 2]\n", "line 1: List ([1, 2]) is not worked out"),
        ("print(y)\n", "line 1: y is read before it is bound"),
        ("import os\n", "line 1: Import is not straight-line code"),
        ("x = open('f')\n", "the call open(...) is not worked out"),
        ("x = 'a'.__class__\n", "Attribute"),
        ("x = 'ab' * 10 ** 6\n", "repeats a string too often"),
        ("x = 2 ** 10000\n", "too large to write out"),
        ("x = 1 // 0\n", "1 // 0 raises ZeroDivisionError"),
        ("x = 'a'.center(10 ** 9)\n", "is too wide to write out"),
        ("x = (\n", "does not parse"),
    ],
)
def test_what_is_not_straight_line_code_is_refused_in_one_line(program: str, needle: str) -> None:
    with pytest.raises(UnsupportedProgram) as caught:
        worked_solution(program)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_a_solution_that_disagrees_with_the_stdout_is_never_written() -> None:
    with pytest.raises(UnsupportedProgram, match="differs from the program's stdout"):
        worked_answer("print(1 + 1)\n", "3\n")
