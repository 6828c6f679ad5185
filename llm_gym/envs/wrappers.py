"""The wrappers every stepped env wears (:func:`llm_gym.stepping.make_vector_env` puts them on): one that counts an
episode's statistics, and one that hands the info dict through a vector env untouched.

Both keep their counters in public ``state_dict`` / ``load_state_dict`` methods, so :mod:`llm_gym.envs.snapshots` can
put an env back exactly without reaching into private fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym

EPISODE_KEY = "episode"
"""The info key :class:`EpisodeStatistics` puts a finished episode's :class:`EpisodeStats` under (as a dict)."""


@dataclass
class EpisodeStats:
    """One episode's numbers; the keys a task sampler's ``report`` gets."""

    episode_return: float
    """Sum of the rewards the agent saw (shaping and penalties included)."""
    raw_return: float
    """Sum of the game's own rewards (``info["raw_reward"]``; the return where the env shapes nothing)."""
    score: float
    """The game's score at the end (``info["score"]``; the return where the env reports none)."""
    length: int
    """Steps."""
    invalid_actions: int
    """Steps whose text named no legal action (``info["invalid_action"]``)."""
    truncated: bool
    """Cut by a time limit (the env's or ``max_episode_steps``), not ended by the game."""

    @classmethod
    def start(cls) -> EpisodeStats:
        """The numbers of an episode that has not taken a step yet."""
        return cls(0.0, 0.0, 0.0, 0, 0, False)

    def report(self) -> dict[str, float]:
        """The numbers a task sampler gets: return, raw_return, score, length, invalid_actions, truncated."""
        return {
            "return": self.episode_return,
            "raw_return": self.raw_return,
            "score": self.score,
            "length": float(self.length),
            "invalid_actions": float(self.invalid_actions),
            "truncated": float(self.truncated),
        }


class EpisodeStatistics(gym.Wrapper):
    """Counts return, raw return, score, length and invalid actions of the running episode, and puts them into the
    info of its last step under ``"episode"``. With ``max_episode_steps`` > 0 it also cuts episodes there
    (``truncated``), keeping the step count where a snapshot finds it (Gymnasium's ``TimeLimit`` keeps it private).
    """

    def __init__(self, env: gym.Env, max_episode_steps: int = 0) -> None:
        super().__init__(env)
        self.max_episode_steps = max_episode_steps
        self.stats = EpisodeStats.start()

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.stats = EpisodeStats.start()
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        stats = self.stats
        stats.episode_return += float(reward)
        stats.raw_return += float(info.get("raw_reward", reward))
        stats.length += 1
        stats.invalid_actions += int(bool(info.get("invalid_action", False)))
        if self.max_episode_steps and stats.length >= self.max_episode_steps and not terminated:
            truncated = True
        if terminated or truncated:
            score = info.get("score")
            stats.score = float(stats.raw_return if score is None else score)
            stats.truncated = bool(truncated and not terminated)
            info = {**info, EPISODE_KEY: asdict(stats)}
        return obs, reward, terminated, truncated, info

    def state_dict(self) -> dict[str, Any]:
        """The running episode's counters."""
        return asdict(self.stats)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats = EpisodeStats(**state)


class InfoBox:
    """An info dict carried through a vector env as one object: Gymnasium would otherwise batch it key by key into
    arrays typed by the first env's values (an int array cannot then take another env's None)."""

    __slots__ = ("info",)

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def __reduce__(self) -> tuple[Any, ...]:  # AsyncVectorEnv pickles it between processes
        return (InfoBox, (self.info,))


IDLE_ACTION, IDLE_TEXT = -1, "\x00llm_gym:idle\x00"
"""What the stepper sends an env that has no episode left to play (an id no Discrete space has; a text no model
writes): :class:`Pausable` then leaves the env untouched for that step."""


class Pausable(gym.Wrapper):
    """Leaves the env untouched on an idle action: the latest observation comes back with reward 0 and no end, and
    nothing below (the env, its statistics, its recorders) sees a step. A vector env steps every env at once; this is
    how the envs that finished their share of episodes sit out the others' last steps."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._latest: tuple[Any, dict[str, Any]] = (None, {})

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._latest = (obs, info)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if _idle(action):
            return self._latest[0], 0.0, False, False, self._latest[1]
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._latest = (obs, info)
        return obs, reward, terminated, truncated, info


def _idle(action: Any) -> bool:
    if isinstance(action, str):
        return action == IDLE_TEXT
    try:
        return int(action) == IDLE_ACTION
    except (TypeError, ValueError):
        return False


BOX_KEY = "llm_gym"
"""The vector-env info key under which each env's :class:`InfoBox` travels."""


class BoxedInfo(gym.Wrapper):
    """Returns ``{BOX_KEY: InfoBox(info)}`` as the info; :class:`llm_gym.stepping.EnvStepper` unpacks it."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {BOX_KEY: InfoBox(info)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {BOX_KEY: InfoBox(info)}
