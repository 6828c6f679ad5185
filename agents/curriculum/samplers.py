"""The curriculum's task samplers: stages of task ranges, and failed tasks replayed.

* :class:`StagedCurriculum`: stages, each a task range plus options; the next stage starts when the success rate
  over the last ``window`` episodes of the current stage reaches its threshold; optional demotion below a floor.
* :class:`FailureReplay`: wraps any sampler; failed tasks go into a buffer and come back with probability
  ``replay_share``, drawn with priority ``1 - score``; a task leaves the buffer as soon as it is solved.

Both keep the :class:`~llm_gym.envs.tasks.TaskSampler` contract (plain-JSON ``state_dict``, the same draws after
``load_state_dict``), so the shared stepping path runs them like any sampler and every checkpoint holds them.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_gym.envs.tasks import (
    TaskRange,
    TaskSampler,
    episode_score,
    is_success,
    options_key,
    rng_state,
    set_rng_state,
)
from llm_gym.errors import ConfigError

# -- staged curriculum -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """One stage of a curriculum."""

    name: str
    """Shown in logs, TensorBoard and error messages."""
    tasks: TaskRange
    """Task ids of this stage (drawn uniformly)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Extra reset options of every episode of this stage (``opponent``, ``level``, ``mode``, ...)."""
    threshold: float = 0.5
    """Advance to the next stage when the success rate over the window reaches this (0..1)."""
    window: int = 100
    """Episodes of this stage the success rate is measured over (the window must be full to decide)."""
    demote_below: float | None = None
    """Go back one stage when the success rate over a full window falls below this (None: never)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(
                f"stage {self.name!r}: threshold {self.threshold} is outside [0, 1]; give a success rate, e.g. 0.6"
            )
        if self.window < 1:
            raise ConfigError(f"stage {self.name!r}: window {self.window} must be at least 1 episode, e.g. 100")
        if self.demote_below is not None and not 0.0 <= self.demote_below <= self.threshold:
            raise ConfigError(
                f"stage {self.name!r}: demote_below {self.demote_below} must lie in [0, threshold={self.threshold}]; "
                "lower it or leave it out"
            )


def check_stages(stages: Sequence[Stage]) -> None:
    """At least one stage, unique names, no two stages sharing a task id (each error names the stage and the fix)."""
    if not stages:
        raise ConfigError("a curriculum needs at least one stage; add a [[stages]] table")
    seen: dict[str, Stage] = {}
    for stage in stages:
        if stage.name in seen:
            raise ConfigError(f"stage {stage.name!r} appears twice; give each stage its own name")
        for other in seen.values():
            if stage.tasks.overlaps(other.tasks) and dict(stage.options) == dict(other.options):
                raise ConfigError(
                    f"stage {stage.name!r}: task range {stage.tasks} overlaps stage {other.name!r} ({other.tasks}); "
                    f"start it after {other.tasks.last} or give it other options"
                )
        seen[stage.name] = stage


class StagedCurriculum:
    """Stages in order; see :class:`Stage` for when it moves on (or back).

    Only episodes of the current stage count towards its window: an episode that was handed out before a stage
    change (its options are another stage's) is ignored, so a new stage starts with an empty window.
    """

    def __init__(self, stages: Sequence[Stage], *, seed: int = 0) -> None:
        check_stages(stages)
        self.stages = tuple(stages)
        self.rng = random.Random(seed)
        self.stage = 0
        self.window: deque[bool] = deque(maxlen=self.stages[0].window)
        self.episodes = 0
        """Episodes reported (all stages)."""
        self.events: list[dict[str, Any]] = [{"stage": 0, "name": self.stages[0].name, "episode": 0, "kind": "start"}]
        """Every stage change: stage index, name, the episode count when it happened, ``advance``/``demote``."""

    @property
    def current(self) -> Stage:
        return self.stages[self.stage]

    @property
    def success_rate(self) -> float:
        """Success rate over the current stage's window so far (0.0 when empty)."""
        return sum(self.window) / len(self.window) if self.window else 0.0

    def next_options(self) -> dict[str, Any]:
        stage = self.current
        return {**stage.options, "task_id": self.rng.randint(stage.tasks.first, stage.tasks.last)}

    def evaluation_tasks(self) -> tuple[TaskRange, dict[str, Any]]:
        """The current stage's tasks and options (what a held-out evaluation plays now)."""
        return self.current.tasks, dict(self.current.options)

    def belongs_to_current(self, options: Mapping[str, Any] | None) -> bool:
        options = dict(options or {})
        task_id = options.pop("task_id", None)
        return task_id in self.current.tasks and options == dict(self.current.options)

    def report(self, options: dict[str, Any] | None, stats: Mapping[str, float]) -> None:
        self.episodes += 1
        if not self.belongs_to_current(options):
            return
        self.window.append(is_success(stats))
        stage = self.current
        if len(self.window) < stage.window:
            return
        rate = self.success_rate
        if rate >= stage.threshold and self.stage + 1 < len(self.stages):
            self._move(self.stage + 1, "advance")
        elif stage.demote_below is not None and rate < stage.demote_below and self.stage > 0:
            self._move(self.stage - 1, "demote")

    def _move(self, stage: int, kind: str) -> None:
        self.stage = stage
        self.window = deque(maxlen=self.current.window)
        self.events.append({"stage": stage, "name": self.current.name, "episode": self.episodes, "kind": kind})

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": rng_state(self.rng),
            "stage": self.stage,
            "stage_name": self.current.name,
            "window": [int(x) for x in self.window],
            "episodes": self.episodes,
            "events": [dict(e) for e in self.events],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stage = int(state["stage"])
        if not 0 <= stage < len(self.stages) or self.stages[stage].name != state.get("stage_name", ""):
            raise ConfigError(
                f"the saved curriculum was at stage {state.get('stage_name')!r} (index {stage}), which these stages "
                "do not have at that index; resume with the stage file the run was started with"
            )
        set_rng_state(self.rng, state["rng"])
        self.stage = stage
        self.window = deque((bool(x) for x in state["window"]), maxlen=self.current.window)
        self.episodes = int(state["episodes"])
        self.events = [dict(e) for e in state["events"]]


# -- failure replay ----------------------------------------------------------------------------------------------------


class FailureReplay:
    """Failed tasks come back: a buffer of failures in front of any sampler.

    Args:
        base: the sampler of fresh tasks (its ``report`` hears fresh episodes only, so a curriculum's success rate
            is not dragged down by the replays of old failures).
        capacity: most tasks kept; when full, the entry with the lowest priority (oldest among equals) goes.
        replay_share: probability that the next episode replays a buffered task (when the buffer is not empty).
        seed: seeds the replay draws.

    Every finished episode updates the buffer, whether it was a replay or a fresh draw of a buffered task: a
    success removes the task ("solved"), a failure stores its latest score, whose ``1 - score`` is its priority.
    """

    def __init__(self, base: TaskSampler, *, capacity: int = 1000, replay_share: float = 0.3, seed: int = 0) -> None:
        if capacity < 1:
            raise ConfigError(f"the failure buffer needs a capacity of at least 1, got {capacity}")
        if not 0.0 <= replay_share <= 1.0:
            raise ConfigError(f"replay_share {replay_share} is outside [0, 1]; give a fraction, e.g. 0.3")
        self.base = base
        self.capacity = capacity
        self.replay_share = replay_share
        self.rng = random.Random(seed)
        self.buffer: dict[str, dict[str, Any]] = {}
        """options key -> {"options", "score", "failures", "added"}; insertion order = age."""
        self.pending: dict[str, int] = {}
        """Replays handed out and not yet reported, per options key."""
        self.counts = {"fresh": 0, "replayed": 0, "added": 0, "solved": 0, "evicted": 0}

    def __len__(self) -> int:
        return len(self.buffer)

    def drop_pending(self) -> None:
        """Forget the replays handed out and not reported (after a resume whose envs started other tasks)."""
        self.pending.clear()

    def next_options(self) -> dict[str, Any] | None:
        if self.buffer and self.rng.random() < self.replay_share:
            entries = list(self.buffer.items())
            weights = [1.0 - entry["score"] for _, entry in entries]
            if sum(weights) <= 0.0:  # only possible with custom success rules: fall back to uniform
                weights = [1.0] * len(entries)
            key, entry = self.rng.choices(entries, weights=weights)[0]
            self.pending[key] = self.pending.get(key, 0) + 1
            self.counts["replayed"] += 1
            return dict(entry["options"])
        self.counts["fresh"] += 1
        return self.base.next_options()

    def evaluation_tasks(self) -> tuple[TaskRange, dict[str, Any]]:
        return self.base.evaluation_tasks()  # type: ignore[attr-defined]

    def report(self, options: dict[str, Any] | None, stats: Mapping[str, float]) -> None:
        key = options_key(options)
        replayed = self.pending.get(key, 0) > 0
        if replayed:
            self.pending[key] -= 1
            if not self.pending[key]:
                del self.pending[key]
        success, score = is_success(stats), episode_score(stats)
        if key in self.buffer:
            if success:
                del self.buffer[key]
                self.counts["solved"] += 1
            else:
                self.buffer[key]["score"] = score
                self.buffer[key]["failures"] += 1
        elif not success:
            self._add(key, dict(options or {}), score)
        if not replayed:
            self.base.report(options, stats)

    def _add(self, key: str, options: dict[str, Any], score: float) -> None:
        if len(self.buffer) >= self.capacity:
            # Lowest priority = highest score; min() keeps the first (oldest) of equals.
            victim = min(self.buffer, key=lambda k: 1.0 - self.buffer[k]["score"])
            if 1.0 - score < 1.0 - self.buffer[victim]["score"]:
                return  # the newcomer is the least urgent of all
            del self.buffer[victim]
            self.counts["evicted"] += 1
        self.buffer[key] = {"options": options, "score": score, "failures": 1, "added": self.counts["added"]}
        self.counts["added"] += 1

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": rng_state(self.rng),
            "buffer": [dict(entry) for entry in self.buffer.values()],
            "pending": dict(self.pending),
            "counts": dict(self.counts),
            "base": self.base.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        set_rng_state(self.rng, state["rng"])
        self.buffer = {options_key(e["options"]): dict(e) for e in state["buffer"]}
        self.pending = {str(k): int(v) for k, v in state["pending"].items()}
        self.counts = {k: int(v) for k, v in state["counts"].items()}
        self.base.load_state_dict(state["base"])
