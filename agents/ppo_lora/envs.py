"""The training envs: a list of envs stepped in lockstep, reset in the same step an episode ends, with per-episode
bookkeeping and snapshots for an exact ``--resume``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from llm_gym.actions import TextActions
from llm_gym.agent import EnvConfig
from llm_gym.runs import can_pickle
from llm_gym.sampled_tasks import SampledTasks, restore_sampler, sampler_state, saved_options
from llm_gym.tasks import TaskSampler


@dataclass
class FinishedEpisode:
    episode_return: float
    raw_return: float
    """Sum of the game's own rewards (``info["raw_reward"]``; equals the return where the env shapes nothing)."""
    length: int
    invalid_actions: int


@dataclass
class StepResult:
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_observations: dict[int, Any]
    """Last observation of each env whose episode was truncated this step (for bootstrapping)."""
    final_infos: dict[int, dict[str, Any]]
    finished: list[FinishedEpisode] = field(default_factory=list)
    invalid: int = 0
    raw_reward: float = 0.0
    """The game's own reward summed over the envs this step."""


def _plain_info(info: dict[str, Any]) -> dict[str, Any]:
    # What a policy reads from info, small enough to checkpoint.
    keep = ("legal_actions", "action_names", "action_mask")
    return {k: info[k] for k in keep if k in info}


class EnvPool:
    """``num_envs`` envs; ``text_actions`` wraps discrete envs in :class:`TextActions` (generate mode); with a
    ``sampler`` every episode's task comes from it (:mod:`llm_gym.sampled_tasks`)."""

    def __init__(
        self,
        env: EnvConfig,
        num_envs: int,
        seed: int,
        *,
        text_actions: bool,
        max_episode_steps: int = 0,
        sampler: TaskSampler | None = None,
    ) -> None:
        self.envs: list[gym.Env] = []
        self.sampler = sampler
        for _ in range(num_envs):
            made = env.make()
            if text_actions and not isinstance(made.action_space, gym.spaces.Text):
                made = TextActions(made)
            if sampler is not None:  # outermost, so it sees the parser's invalid answers too
                made = SampledTasks(made, sampler)
            self.envs.append(made)
        self.seed = seed
        self.max_episode_steps = max_episode_steps
        self.next_episode = 0
        self.observations: list[Any] = [None] * num_envs
        self.infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        self.returns = np.zeros(num_envs)
        self.raw_returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.invalid = np.zeros(num_envs, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self) -> None:
        for i in range(len(self.envs)):
            self._reset(i)

    def _reset(self, i: int, options: dict[str, Any] | None = None) -> None:
        # Episode k (over all envs, in the order they start) gets seed + k: reproducible for any num_envs.
        obs, info = self.envs[i].reset(seed=self.seed + self.next_episode, options=options)
        self.next_episode += 1
        self.observations[i], self.infos[i] = obs, info
        self.returns[i] = self.raw_returns[i] = 0.0
        self.lengths[i] = self.invalid[i] = 0

    def step(self, actions: Sequence[Any]) -> StepResult:
        n = len(self.envs)
        result = StepResult(np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), {}, {})
        for i, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            obs, reward, terminated, truncated, info = env.step(action)
            self.returns[i] += reward
            raw = float(info.get("raw_reward", reward))
            self.raw_returns[i] += raw
            result.raw_reward += raw
            self.lengths[i] += 1
            bad = bool(info.get("invalid_action", False))
            self.invalid[i] += bad
            result.invalid += bad
            if self.max_episode_steps and self.lengths[i] >= self.max_episode_steps and not terminated:
                truncated = True
            result.rewards[i], result.terminated[i], result.truncated[i] = reward, terminated, truncated
            if terminated or truncated:
                result.finished.append(
                    FinishedEpisode(
                        float(self.returns[i]), float(self.raw_returns[i]), int(self.lengths[i]), int(self.invalid[i])
                    )
                )
                if truncated and not terminated:
                    result.final_observations[i], result.final_infos[i] = obs, info
                self._reset(i)
            else:
                self.observations[i], self.infos[i] = obs, info
        return result

    # -- exact resume ------------------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything needed to continue where the envs are: emulator snapshots where the envs can take them."""
        inner = [e.unwrapped for e in self.envs]
        snapshots = None
        if all(hasattr(e, "clone_state") and hasattr(e, "restore_state") for e in inner):
            snapshots = [e.clone_state() for e in inner]
            if not can_pickle(snapshots):  # reset on resume
                snapshots = None
        return {
            "snapshots": snapshots,
            "wrappers": [_wrapper_state(e) for e in self.envs],
            "observations": list(self.observations),
            "infos": [_plain_info(i) for i in self.infos],
            "returns": self.returns.copy(),
            "raw_returns": self.raw_returns.copy(),
            "lengths": self.lengths.copy(),
            "invalid": self.invalid.copy(),
            "next_episode": self.next_episode,
            "tasks": sampler_state(self.sampler, self.envs),
        }

    def restore(self, state: dict[str, Any]) -> bool:
        """Continue from :meth:`state`; returns False (and resets the envs) when they could not be snapshot."""
        self.next_episode = int(state["next_episode"])
        tasks = state.get("tasks")
        if state["snapshots"] is None:
            # New games; with a sampler, of the tasks that were in progress, so its replay bookkeeping stays right.
            restart = saved_options(tasks) or [None] * len(self.envs)
            for i, options in enumerate(restart):
                self._reset(i, options)
            restore_sampler(self.sampler, self.envs, tasks, episodes=False)
            return False
        for i, env in enumerate(self.envs):
            env.reset(seed=self.seed + i)  # initialise wrappers and RNGs; the snapshot then overrides the state
            env.unwrapped.restore_state(state["snapshots"][i])
            _restore_wrapper(env, state["wrappers"][i])
        self.observations, self.infos = list(state["observations"]), [dict(i) for i in state["infos"]]
        self.returns, self.raw_returns = state["returns"].copy(), state["raw_returns"].copy()
        self.lengths, self.invalid = state["lengths"].copy(), state["invalid"].copy()
        restore_sampler(self.sampler, self.envs, tasks)
        return True

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _wrappers(env: gym.Env) -> list[gym.Env]:
    found = []
    while isinstance(env, gym.Wrapper):
        found.append(env)
        env = env.env
    return found


def _wrapper_state(env: gym.Env) -> list[dict[str, Any]]:
    # Wrappers keep counters outside the env's snapshot: TimeLimit's step count, TextActions' latest info and count.
    state = []
    for wrapper in _wrappers(env):
        entry: dict[str, Any] = {}
        if hasattr(wrapper, "_elapsed_steps"):
            entry["_elapsed_steps"] = wrapper._elapsed_steps
        if isinstance(wrapper, TextActions):
            entry["_info"], entry["_invalid"] = _plain_info(wrapper._info), wrapper._invalid
        state.append(entry)
    return state


def _restore_wrapper(env: gym.Env, states: list[dict[str, Any]]) -> None:
    for wrapper, entry in zip(_wrappers(env), states, strict=True):
        for key, value in entry.items():
            setattr(wrapper, key, value)
