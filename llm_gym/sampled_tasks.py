"""Put a :class:`~llm_gym.tasks.TaskSampler` in front of any env: the wrapper asks the sampler for the reset options
of every episode the caller does not choose itself, and reports every episode that ends.

Being a wrapper, it works with any stepping path (a list of envs, Gymnasium's ``SyncVectorEnv`` with its
autoreset, the evaluation loop): the learner wraps its training envs with :func:`wrap_envs` and keeps
:func:`sampler_state` in its checkpoints; :func:`restore_sampler` puts the sampler and every env's episode
bookkeeping back, so a resumed run continues with the same stage, window and buffer.

The episode statistics reported: ``return`` (sum of rewards), ``raw_return`` (sum of ``info["raw_reward"]`` where
the env reports the game's own reward beside a shaped one), ``score`` and ``success`` where the env's last info has
them, ``length``, ``invalid_actions``, and ``truncated`` (1 when the episode was cut, by the env or by the caller
resetting it early, which is reported as well).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym

from llm_gym.tasks import TaskSampler


class SampledTasks(gym.Wrapper):
    """Resets with ``sampler.next_options()`` when no options are given; reports each episode to the sampler."""

    def __init__(self, env: gym.Env, sampler: TaskSampler) -> None:
        super().__init__(env)
        self.sampler = sampler
        self.options: dict[str, Any] | None = None
        """The reset options of the episode being played."""
        self.open = False
        self.stats = self._fresh()

    @staticmethod
    def _fresh() -> dict[str, float]:
        return {"return": 0.0, "raw_return": 0.0, "length": 0, "invalid_actions": 0}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if self.open:  # the caller cut the episode (a step limit of its own): it counts, as an unfinished one
            self._report(None, truncated=True)
        if options is None:
            options = self.sampler.next_options()
        self.options = dict(options) if options is not None else None
        observation, info = self.env.reset(seed=seed, options=options)
        self.open, self.stats = True, self._fresh()
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        stats = self.stats
        stats["return"] += float(reward)
        stats["raw_return"] += float(info.get("raw_reward", reward))
        stats["length"] += 1
        stats["invalid_actions"] += int(bool(info.get("invalid_action", False)))
        if terminated or truncated:
            self._report(info, truncated=bool(truncated and not terminated))
        return observation, reward, terminated, truncated, info

    def _report(self, info: Mapping[str, Any] | None, truncated: bool) -> None:
        stats: dict[str, float] = dict(self.stats)
        for key in ("score", "success"):
            if info is not None and key in info:
                stats[key] = float(info[key])
        stats["truncated"] = float(truncated)
        self.open = False
        self.sampler.report(self.options, stats)

    def episode_state(self) -> dict[str, Any]:
        """The bookkeeping of the episode in progress (plain data, for a checkpoint)."""
        return {"options": self.options, "open": self.open, "stats": dict(self.stats)}

    def load_episode_state(self, state: Mapping[str, Any]) -> None:
        self.options = None if state["options"] is None else dict(state["options"])
        self.open, self.stats = bool(state["open"]), dict(state["stats"])


def find_wrapper(env: gym.Env) -> SampledTasks | None:
    """The :class:`SampledTasks` layer of ``env``, if it has one."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, SampledTasks):
            return env
        env = env.env
    return None


def wrap_envs(make: Any, sampler: TaskSampler | None) -> Any:
    """An env factory whose envs draw their tasks from ``sampler`` (``make`` unchanged when there is none)."""
    if sampler is None:
        return make
    return lambda *args, **kwargs: SampledTasks(make(*args, **kwargs), sampler)


def sampler_state(sampler: TaskSampler | None, envs: Iterable[gym.Env]) -> dict[str, Any] | None:
    """What a checkpoint keeps: the sampler's state and each env's episode bookkeeping (None without a sampler)."""
    if sampler is None:
        return None
    wrappers = [find_wrapper(env) for env in envs]
    return {
        "sampler": sampler.state_dict(),
        "episodes": [w.episode_state() if w is not None else None for w in wrappers],
    }


def restore_sampler(
    sampler: TaskSampler | None,
    envs: Iterable[gym.Env],
    state: Mapping[str, Any] | None,
    *,
    episodes: bool = True,
    same_tasks: bool = True,
) -> None:
    """Undo whatever the envs' resets drew and put back the checkpoint's sampler and (with ``episodes``, when the
    envs were restored from snapshots) each env's episode bookkeeping. ``same_tasks=False``: the envs started other
    tasks than those in progress at the checkpoint, so replays handed out then will never be reported.

    Call it after the envs were reset or restored for the resume, so their throwaway resets are forgotten.
    """
    if sampler is None or state is None:
        return
    if episodes:
        for env, episode in zip(envs, state["episodes"], strict=True):
            wrapper = find_wrapper(env)
            if wrapper is not None and episode is not None:
                wrapper.load_episode_state(episode)
    sampler.load_state_dict(state["sampler"])
    if not same_tasks and hasattr(sampler, "drop_pending"):
        sampler.drop_pending()


def saved_options(state: Mapping[str, Any] | None) -> list[dict[str, Any] | None] | None:
    """The options of the episodes in progress at the checkpoint, per env: envs that cannot be snapshot restart
    these tasks on resume (new games of the same tasks), so the sampler's replay bookkeeping stays right."""
    if state is None:
        return None
    return [episode["options"] if episode and episode["open"] else None for episode in state["episodes"]]
