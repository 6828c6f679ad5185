"""Task samplers: which task the next episode plays, and what happened in the last one.

A sampler hands out ``reset`` options (``task_id``, ``opponent``, ``level``, ``mode`` ... whatever the env takes)
for each new episode and hears back each finished episode's statistics. The shared stepping path resets a finished
env with ``sampler.next_options()`` and calls ``sampler.report(options, stats)`` when the episode ends, so any
learner built on it gets curricula and replay without code of its own.

* :class:`UniformTaskSampler`: task ids uniform over one inclusive range, with fixed extra options.
* :class:`OptionsMix`: each episode one of a fixed list of option sets (say, the opponents to train against), drawn
  uniformly (list a set twice to draw it twice as often); it keeps each set's episodes and mean return.

The ``curriculum`` agent's samplers (staged task ranges, replay of failed tasks) build on these:
:mod:`llm_gym.agents.curriculum.samplers`.

An episode is a success when its statistics say so (``success``), else when its ``score`` (normalised to [0, 1])
is above 0.5, else when its ``return`` is positive. Every sampler's ``state_dict`` is plain JSON (lists, numbers,
strings), so it goes into any checkpoint, and ``load_state_dict`` continues the exact same sequence of draws.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from llm_gym.errors import ConfigError


@runtime_checkable
class TaskSampler(Protocol):
    """What the stepping path needs from a sampler (see the module docstring)."""

    def next_options(self) -> dict[str, Any] | None:
        """Reset options of the next episode (``task_id``, ``opponent``, ``level``, ...); None = the env's default."""
        ...

    def report(self, options: dict[str, Any] | None, stats: Mapping[str, float]) -> None:
        """A finished episode: the options it was reset with and its ``return``, ``raw_return``, ``score``,
        ``length``, ``invalid_actions``."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (JSON-ready)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a :meth:`state_dict`."""
        ...


# -- shared helpers ---------------------------------------------------------------------------------------------------


def is_success(stats: Mapping[str, Any]) -> bool:
    """The success rule every sampler uses (module docstring)."""
    if "success" in stats:
        return bool(stats["success"])
    if "score" in stats:
        return float(stats["score"]) > 0.5
    return float(stats.get("return", 0.0)) > 0.0


def episode_score(stats: Mapping[str, Any]) -> float:
    """The episode's score in [0, 1]: ``score`` clipped, or 1/0 from :func:`is_success` when there is none."""
    if "score" in stats:
        return min(1.0, max(0.0, float(stats["score"])))
    return 1.0 if is_success(stats) else 0.0


def options_key(options: Mapping[str, Any] | None) -> str:
    """A canonical text key for a set of reset options (the identity of a task in the replay buffer)."""
    return json.dumps(dict(options or {}), sort_keys=True, default=str)


def rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, state: Sequence[Any]) -> None:
    version, internal, gauss = state
    rng.setstate((int(version), tuple(int(x) for x in internal), gauss))


@dataclass(frozen=True)
class TaskRange:
    """An inclusive range of task ids, ``first..last``."""

    first: int
    """Smallest task id of the range."""
    last: int
    """Largest task id of the range (inclusive)."""

    def __post_init__(self) -> None:
        if self.first < 0:
            raise ConfigError(f"task ids are >= 0, got the range {self}; start it at 0 or above")
        if self.last < self.first:
            raise ConfigError(
                f"the task range {self.first}-{self.last} is empty; write it as first-last, first <= last"
            )

    @classmethod
    def parse(cls, text: str | int | Sequence[int]) -> TaskRange:
        """``"0-999"``, ``"7"``, ``7``, ``[0, 999]`` or ``"1_000_000_000-1_999_999_999"`` -> a range."""
        if isinstance(text, int):
            return cls(text, text)
        if not isinstance(text, str):
            if len(text) != 2:
                raise ConfigError(f"a task range is [first, last], got {list(text)}")
            return cls(int(text[0]), int(text[1]))
        head, sep, tail = text.replace("_", "").replace(",", "").strip().partition("-")
        try:
            first = int(head)
            last = int(tail) if sep else first
        except ValueError:
            raise ConfigError(f"cannot read task range {text!r}; write first-last, e.g. 0-999") from None
        return cls(first, last)

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, int) and self.first <= task_id <= self.last

    def overlaps(self, other: TaskRange) -> bool:
        return self.first <= other.last and other.first <= self.last

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


# -- uniform -----------------------------------------------------------------------------------------------------------


class UniformTaskSampler:
    """Task ids uniform over ``tasks``, each with the same extra ``options`` (opponent, level, ...)."""

    def __init__(self, tasks: TaskRange, options: Mapping[str, Any] | None = None, *, seed: int = 0) -> None:
        self.tasks = tasks
        self.options = dict(options or {})
        self.rng = random.Random(seed)
        self.episodes = 0
        self.successes = 0

    def next_options(self) -> dict[str, Any]:
        return {**self.options, "task_id": self.rng.randint(self.tasks.first, self.tasks.last)}

    def report(self, options: dict[str, Any] | None, stats: Mapping[str, float]) -> None:
        self.episodes += 1
        self.successes += is_success(stats)

    def evaluation_tasks(self) -> tuple[TaskRange, dict[str, Any]]:
        """The tasks a held-out evaluation plays now (:func:`llm_gym.training.evaluation_sampler`)."""
        return self.tasks, dict(self.options)

    def state_dict(self) -> dict[str, Any]:
        return {"rng": rng_state(self.rng), "episodes": self.episodes, "successes": self.successes}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        set_rng_state(self.rng, state["rng"])
        self.episodes, self.successes = int(state["episodes"]), int(state["successes"])


# -- a mix of option sets ---------------------------------------------------------------------------------------------


class OptionsMix:
    """Each episode's reset options: one of ``choices`` (dicts of reset options, e.g. ``{"opponent": "mcts"}``), drawn
    uniformly with its own seeded generator; a set listed twice is drawn twice as often. Per distinct set it counts
    the episodes and sums their returns, so a run can tell how it fares against each. It names no task range: an
    evaluation keeps the env's own defaults."""

    def __init__(self, choices: Sequence[Mapping[str, Any]], *, seed: int = 0) -> None:
        if not choices:
            raise ConfigError('an options mix needs at least one set of reset options, e.g. [{"opponent": "random"}]')
        bad = [c for c in choices if not isinstance(c, Mapping)]
        if bad:
            raise ConfigError(f'each set of reset options must be a dict like {{"opponent": "mcts"}}, got {bad[0]!r}')
        self.choices = [dict(c) for c in choices]
        listed = [options_key(c) for c in self.choices]
        self.keys = list(dict.fromkeys(listed))  # the distinct sets, in list order
        self.shares = [
            listed.count(key) / len(listed) for key in self.keys
        ]  # a set listed twice is drawn twice as often
        self.rng = random.Random(seed)
        self.episodes = [0] * len(self.keys)
        self.return_sums = [0.0] * len(self.keys)

    def next_options(self) -> dict[str, Any]:
        return dict(self.choices[self.rng.randrange(len(self.choices))])

    def report(self, options: dict[str, Any] | None, stats: Mapping[str, float]) -> None:
        key = options_key(options)
        if key in self.keys:  # options from elsewhere (none in a run the mix picks for) are not counted
            index = self.keys.index(key)
            self.episodes[index] += 1
            self.return_sums[index] += float(stats.get("return", 0.0))

    def tallies(self) -> list[dict[str, Any]]:
        """Per distinct set: its options, its share of the draws, the episodes played with it and their mean
        return (None before any)."""
        return [
            {
                "options": json.loads(key),
                "share": share,
                "episodes": n,
                "mean_return": (total / n) if n else None,
            }
            for key, share, n, total in zip(self.keys, self.shares, self.episodes, self.return_sums, strict=True)
        ]

    def state_dict(self) -> dict[str, Any]:
        return {"rng": rng_state(self.rng), "episodes": list(self.episodes), "return_sums": list(self.return_sums)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if len(state["episodes"]) != len(self.keys):
            raise ConfigError(
                f"the checkpoint's options mix has {len(state['episodes'])} distinct sets, this run {len(self.keys)}: "
                "resume with the same episode_options"
            )
        set_rng_state(self.rng, state["rng"])
        self.episodes = [int(n) for n in state["episodes"]]
        self.return_sums = [float(x) for x in state["return_sums"]]
