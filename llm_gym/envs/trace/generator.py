"""Procedural Python programs, deterministic from ``(level, task_id)``; no data set involved.

Levels (each adds to the one before):

1. straight-line arithmetic and strings (assignments, operators, string methods, slices, f-strings, prints);
2. loops and branches (``for``/``while``, ``if``/``elif``/``else``, ``break``/``continue``);
3. functions, lists, dicts and comprehensions;
4. recursion, classes and exceptions.

Programs are built from the statement templates in :mod:`snippets_basic` and :mod:`snippets_advanced`, which keep every value small and every
operation safe (constant non-zero divisors, indexes into lists known to be non-empty, keys known to exist), so
a generated program runs in milliseconds and prints a few dozen lines at most. Randomness comes from
``random.Random`` seeded with a string, whose algorithm Python keeps stable across versions.
"""

from __future__ import annotations

import random

from llm_gym.envs.trace import snippets_advanced as adv
from llm_gym.envs.trace import snippets_basic as basic
from llm_gym.envs.trace.program import Program

LEVELS = (1, 2, 3, 4)


def generate(task_id: int, level: int, attempt: int = 0) -> str:
    """The program of ``task_id`` at ``level`` (``attempt`` > 0 gives the next candidate for the same task)."""
    if level not in LEVELS:
        raise ValueError(f"Trace levels are {LEVELS}, got {level!r}")
    rng = random.Random(f"trace:{level}:{int(task_id)}:{attempt}")
    program = Program(rng)
    _COMPOSE[level](program)
    return program.source()


def _setup(p: Program, n: int) -> None:
    """A few level-1 statements that give later templates names to work on."""
    p.rng.choice((basic.new_int, basic.new_str))(p)
    for _ in range(n - 1):
        p.rng.choice(basic.LEVEL1)(p)


def _level1(p: Program) -> None:
    basic.new_int(p)
    basic.new_str(p)
    p.rng.choice((basic.int_update, basic.new_float))(p)  # some arithmetic in every program
    for _ in range(p.rng.randint(2, 4)):
        p.rng.choice(basic.LEVEL1)(p)
        if p.rng.random() < 0.35:
            basic.show(p)
    basic.show(p)
    basic.show(p)


def _level2(p: Program) -> None:
    _setup(p, p.rng.randint(2, 3))
    first = p.rng.choice(basic.LEVEL2_LOOP_BRANCH)  # at least one loop with a branch inside
    first(p)
    p.rng.choice([t for t in basic.LEVEL2 if t is not first])(p)
    if p.rng.random() < 0.5:
        basic.show(p)


def _level3(p: Program) -> None:
    _setup(p, p.rng.randint(1, 2))
    p.rng.choice((adv.new_list, adv.new_words))(p)
    p.rng.choice(adv.LEVEL3_FUNCTIONS)(p)
    p.rng.choice((adv.comprehension, adv.dict_comprehension))(p)
    p.rng.choice(adv.LEVEL3_DATA)(p)
    if p.rng.random() < 0.3:
        p.rng.choice(basic.LEVEL2)(p)


def _level4(p: Program) -> None:
    _setup(p, p.rng.randint(1, 2))
    groups = p.rng.sample((adv.LEVEL4_RECURSION, adv.LEVEL4_CLASSES, adv.LEVEL4_EXCEPTIONS), 2)
    for group in groups:
        p.rng.choice(group)(p)
    if p.rng.random() < 0.3:
        p.rng.choice(adv.LEVEL3_DATA)(p)


_COMPOSE = {1: _level1, 2: _level2, 3: _level3, 4: _level4}
