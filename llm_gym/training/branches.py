"""Groups that start where the policy has been (``branch_fraction``): some of a rollout's groups start at a state one
of its envs stood in earlier in the same rollout instead of at a new game's start.

Why: a group compares G episodes from one start, so its advantage credits cleanly only the decisions where its
episodes first part ways, chiefly the first; every later decision shares its episode's luck. In a game of several
decisions a reset group therefore teaches the opening, and the positions where the game is decided (a block in
tic-tac-toe) only through noisy episode returns. A group started at such a position compares G continuations
of it by the same policy (VinePPO, Kazemnejad et al. 2024, estimates a state's value by Monte Carlo rollouts from
it for the same reason). Their returns count from the branch point (the decisions before it are not in the
rollout), which is all the leave-one-out baseline compares.

A visited state is reached again by replay: the env resets with its episode's seed and options and takes the same
actions. llm-gym's envs are deterministic given those (the opponent's and the game's generators are seeded by the
reset), so the G episodes of a branched group start identically, as a reset group's do; a replay that does not
reproduce the recorded observation is an error, not a silent approximation. (Replay, not snapshots: a snapshot may
hold live objects, OpenSpiel's generators and opponents, that every env restored from it would share.)

The states are a uniform sample (a reservoir) of the decisions the rollout's envs made after an episode's first
(a group from a first decision is a reset group), and whether a group branches is drawn when it starts; both with a
generator seeded by the run's seed and the rollout's first episode number, so a resumed run branches exactly as the
uninterrupted one would. Nothing carries over between rollouts: every update stays on-policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import SyncVectorEnv

from llm_gym.envs.tasks import OptionsMix
from llm_gym.envs.wrappers import BOX_KEY
from llm_gym.errors import ConfigError
from llm_gym.stepping import EnvStepper


@dataclass(frozen=True)
class BranchPoint:
    """A visited state, as the replay that reaches it: the episode's reset and the env's actions since."""

    seed: int
    options: dict[str, Any] | None
    actions: tuple[Any, ...]
    observation: Any
    """What the policy saw there (the replay must reproduce it)."""


@dataclass
class _Trace:
    episode: int | None
    seed: int
    options: dict[str, Any] | None
    actions: list[Any]
    start: int
    """Actions that were replayed to start the episode (its own decisions come after)."""


class Branches:
    """Keeps a uniform sample of the states a rollout visits and starts a share of its groups at them.

    Args:
        stepper: the rollout's stepper, in groups; its ``on_group_start`` is set to :meth:`start`.
        fraction: the chance that a group starting after the first states were visited starts at one of them.
        seed: the run's seed (with the stepper's next episode number it seeds this rollout's draws).
        capacity: states kept.
    """

    def __init__(self, stepper: EnvStepper, fraction: float, seed: int, capacity: int = 256) -> None:
        check_branching(stepper)
        if not 0 <= fraction <= 1:
            raise ConfigError(f"branch_fraction must be in [0, 1], got {fraction}")
        self.stepper, self.fraction, self.capacity = stepper, fraction, capacity
        self.rng = np.random.default_rng([seed, stepper.next_episode])
        self.points: list[BranchPoint] = []
        self.seen = 0
        self.branched: set[int] = set()
        """The episodes (by number) that started at a branch point."""
        self._traces: dict[int, _Trace] = {}
        stepper.on_group_start = self.start

    def visit(self, slots: Sequence[int], actions: Sequence[Any]) -> None:
        """The policy chose ``actions`` in envs ``slots`` (before the step): offer the states it chose in to the
        sample, and remember the actions."""
        for slot, action in zip(slots, actions, strict=True):
            trace = self._trace(slot)
            if len(trace.actions) > trace.start:  # not the episode's first decision
                self.seen += 1
                keep = len(self.points) if len(self.points) < self.capacity else int(self.rng.integers(self.seen))
                if keep < self.capacity:
                    point = BranchPoint(
                        trace.seed, trace.options, tuple(trace.actions), self.stepper.observations[slot]
                    )
                    self.points[keep : keep + 1] = [point]
            trace.actions.append(action)

    def start(self, slots: list[int]) -> None:
        """A group starts on envs ``slots``: with chance ``fraction``, replay them to a visited state."""
        if not self.points or self.rng.random() >= self.fraction:
            return
        point = self.points[int(self.rng.integers(len(self.points)))]
        envs = self.stepper.envs
        assert isinstance(envs, SyncVectorEnv)  # check_branching
        for slot in slots:
            observation, info = replay(envs.envs[slot], point)
            self.stepper.observations[slot], self.stepper.infos[slot] = observation, info
            episode = self.stepper.episode_index[slot]
            self.branched.add(episode)  # type: ignore[arg-type]  # a starting group's envs play numbered episodes
            # It plays with the point's options (an episode_options mix: the point's opponent), and its statistics,
            # which count from the branch point, are not reported to the mix's tallies.
            self.stepper.options[slot] = point.options
            self.stepper.not_reported.add(episode)  # type: ignore[arg-type]
            self._traces[slot] = _Trace(episode, point.seed, point.options, list(point.actions), len(point.actions))

    def close(self) -> None:
        """Stop branching the stepper's groups (the rollout is over)."""
        self.stepper.on_group_start = None
        self.points.clear()

    def _trace(self, slot: int) -> _Trace:
        episode = self.stepper.episode_index[slot]
        trace = self._traces.get(slot)
        if trace is None or trace.episode != episode:
            assert episode is not None  # only playing envs decide
            seed, options = self.stepper.episode_seed(episode), self.stepper.options[slot]
            trace = self._traces[slot] = _Trace(episode, seed, options, [], 0)
        return trace


def replay(env: gym.Env, point: BranchPoint) -> tuple[Any, dict[str, Any]]:
    """Reset ``env`` as the point's episode was and take its actions; the observation and info reached."""
    observation, info = env.reset(seed=point.seed, options=dict(point.options) if point.options else None)
    text = isinstance(env.action_space, gym.spaces.Text)
    for action in point.actions:
        observation, _, terminated, truncated, info = env.step(str(action) if text else int(action))
        if terminated or truncated:
            break
    if not _same(observation, point.observation):
        raise RuntimeError(
            f"{env.spec.id if env.spec else 'the env'} did not reproduce a visited state from its seed and actions: "
            "it is not deterministic given them, so groups cannot start at visited states; use branch_fraction=0"
        )
    box = info.get(BOX_KEY)
    return observation, dict(box.info if box is not None else info)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def check_branching(stepper: EnvStepper) -> None:
    """Raise a one-line error where a stepper's envs cannot start groups at visited states."""
    if not isinstance(stepper.envs, SyncVectorEnv):
        raise ConfigError(
            "branch_fraction replays envs stepped in this process: use --set vector=sync, or branch_fraction=0"
        )
    if stepper.group_size < 2:
        raise ConfigError(
            "branch_fraction starts groups at visited states: it needs a group estimator (advantage=group)"
        )
    if stepper.sampler is not None and not isinstance(stepper.sampler, OptionsMix):
        raise ConfigError(
            "branch_fraction does not go with a task sampler (a curriculum): a branched episode's outcome is not its "
            "task's; use branch_fraction=0 under a curriculum (episode_options goes with it)"
        )
