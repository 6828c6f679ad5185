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
from dataclasses import dataclass, field

from llm_gym.envs.trace import snippets_advanced as adv
from llm_gym.envs.trace import snippets_basic as basic

LEVELS = (1, 2, 3, 4)

_POOLS = {
    "int": ("a", "b", "c", "n", "x", "y", "k", "m", "total", "count", "step", "size"),
    "str": ("s", "t", "word", "name", "text", "label", "tag", "code"),
    "float": ("ratio", "avg", "share", "rate"),
    "bool": ("flag", "ok", "found", "done"),
    "list": ("nums", "items", "values", "data", "scores", "marks"),
    "words": ("words", "names", "fruits", "colors"),
    "dict": ("stock", "ages", "prices", "table", "counts"),
}
WORDS = ("apple", "banana", "cherry", "lemon", "mango", "pear", "plum", "kiwi", "grape", "melon", "olive", "peach",
         "red", "blue", "green", "gold", "sun", "moon", "star", "rain", "snow", "wind", "stone", "river")  # fmt: skip


@dataclass
class Program:
    """A program under construction: its lines and the names bound so far, by kind."""

    rng: random.Random
    lines: list[str] = field(default_factory=list)
    bound: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in _POOLS})
    list_len: dict[str, int] = field(default_factory=dict)
    """Current length of each int list (templates never let one become empty)."""
    dict_keys: dict[str, list[str]] = field(default_factory=dict)
    """Keys each dict is known to hold."""
    used: set[str] = field(default_factory=set)

    def emit(self, *lines: str, depth: int = 0) -> None:
        if depth == 0 and lines[0].startswith(("def ", "class ")) and self.lines and self.lines[-1]:
            self.lines.append("")  # a blank line before a top-level definition, as people write it
        self.lines += ["    " * depth + line if line else "" for line in lines]

    def fresh(self, kind: str) -> str:
        """A name never used before in this program, from the pool of ``kind``."""
        choices = [n for n in _POOLS[kind] if n not in self.used]
        name = self.rng.choice(choices) if choices else f"{_POOLS[kind][0]}{len(self.used)}"
        self.used.add(name)
        return name

    def bind(self, kind: str, name: str) -> str:
        self.used.add(name)
        if name not in self.bound[kind]:
            self.bound[kind].append(name)
        return name

    def some(self, kind: str) -> str | None:
        return self.rng.choice(self.bound[kind]) if self.bound[kind] else None

    def num(self, lo: int = 2, hi: int = 12) -> int:
        return self.rng.randint(lo, hi)

    def word(self) -> str:
        return self.rng.choice(WORDS)

    def int_operand(self) -> str:
        """An existing int name or a small constant."""
        name = self.some("int")
        return name if name and self.rng.random() < 0.7 else str(self.num(1, 9))

    def int_expr(self) -> str:
        """A small, never-failing int expression over bound ints and constants."""
        a, b = self.int_operand(), self.int_operand()
        if a == b:
            b = str(self.num(1, 9))
        form = self.rng.randrange(6)
        if form == 0:
            return f"{a} + {b}"
        if form == 1:
            return f"{a} * {self.num(2, 4)} - {b}"
        if form == 2:
            return f"({a} + {b}) // {self.num(2, 5)}"
        if form == 3:
            return f"({a} * {b}) % {self.num(3, 11)}"
        if form == 4:
            return f"abs({a} - {b})"
        return f"{self.rng.choice(('max', 'min'))}({a}, {b})"

    def source(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


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
