"""A generated program under construction: its lines and the names it has bound so far, by kind. The statement
templates (:mod:`~llm_gym.envs.trace.snippets_basic`, :mod:`~llm_gym.envs.trace.snippets_advanced`) append to it and
:mod:`~llm_gym.envs.trace.generator` composes them into a level's program."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

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
