"""What the bench adds around ``run_episodes``: per-episode tallies and, when asked, step-by-step trajectories.

Both live in a Gymnasium wrapper that the bench's :class:`BenchEnvConfig` puts around every env it makes, so
episodes are still played by the public :func:`llm_gym.training.evaluation.run_episodes`, whatever way it steps envs.

The policy's per-decision details (legal-action probabilities, value, answer) are matched to env steps by content:
the recording policy files them under (observation, legal actions), and the env wrapper takes them back when it is
stepped from that observation. Identical inputs give identical details, so a match never depends on the order in
which envs are stepped.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from llm_gym.agent import DecisionDetails, EnvConfig, act_with_details

MAX_OBSERVATION_CHARS = 4000
"""Observations longer than this are cut in stored trajectories."""
MAX_RECORDED_STEPS = 200
"""A trajectory keeps the first this many steps of an episode (a 1000-step Atari episode would be ~400 kB of text)."""


def observation_text(observation: Any) -> str:
    """The text of an observation (vision observations: their text part)."""
    if isinstance(observation, Mapping):
        return str(observation.get("text", ""))
    return str(observation)


def _content_key(observation: Any, info: Mapping[str, Any]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(observation_text(observation).encode())
    if isinstance(observation, Mapping) and "image" in observation:
        digest.update(bytes(memoryview(observation["image"]).cast("B")))
    digest.update(repr(list(info.get("legal_actions", ()))).encode())
    return digest.hexdigest()


class DetailsBoard:
    """Where the recording policy leaves each decision's details for the env wrapper to pick up."""

    def __init__(self) -> None:
        self._pending: dict[str, list[DecisionDetails]] = {}

    def put(self, observation: Any, info: Mapping[str, Any], details: DecisionDetails) -> None:
        self._pending.setdefault(_content_key(observation, info), []).append(details)

    def take(self, observation: Any, info: Mapping[str, Any]) -> DecisionDetails:
        queue = self._pending.get(_content_key(observation, info))
        return queue.pop(0) if queue else DecisionDetails()


class RecordingPolicy:
    """Wraps a policy: acts through it and files each decision's details on the board."""

    def __init__(self, policy: Any, board: DetailsBoard) -> None:
        self.policy, self.board = policy, board

    def __getattr__(self, name: str) -> Any:  # counters such as decisions / parse_failures stay readable
        return getattr(self.policy, name)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        actions, details = act_with_details(self.policy, observations, infos)
        for observation, info, detail in zip(observations, infos, details, strict=True):
            self.board.put(observation, info, detail)
        return actions


class EpisodeTally(gym.Wrapper):
    """Adds ``bench_wall_seconds`` and, where the policy reports tokens, ``bench_tokens`` to every step's info (run_episodes keeps these plain values in ``final_info``). With
    ``record``, the steps also go into ``finished[seed]`` for the trajectory viewer."""

    def __init__(
        self, env: gym.Env, board: DetailsBoard | None, finished: dict[int, list[dict[str, Any]]], record: bool
    ) -> None:
        super().__init__(env)
        self.board, self.finished, self.record = board, finished, record
        self._start, self._seed, self._tokens = 0.0, -1, None
        self._steps: list[dict[str, Any]] = []
        self._last: tuple[Any, Mapping[str, Any]] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        seed = kwargs.get("seed")
        self._start, self._seed = time.perf_counter(), -1 if seed is None else int(seed)
        self._steps, self._last, self._tokens = [], (observation, info), None
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        before = self._last
        observation, reward, terminated, truncated, info = self.env.step(action)
        info = {**info, "bench_wall_seconds": time.perf_counter() - self._start}
        if self.board is not None and before is not None:
            details = self.board.take(*before)  # taken every step, so the board never holds stale entries
            if "tokens" in details:
                self._tokens = (self._tokens or 0) + int(details["tokens"])
                info["bench_tokens"] = self._tokens
            if self.record and len(self._steps) < MAX_RECORDED_STEPS:
                self._steps.append(_step_record(before[0], before[1], action, reward, info, details))
                # Filed on every step: run_episodes may cut the episode (max_steps) after any of them.
                self.finished[self._seed] = self._steps
        self._last = (observation, info)
        return observation, reward, terminated, truncated, info


def _step_record(
    observation: Any, info: Mapping[str, Any], action: Any, reward: float, after: Mapping[str, Any], details: Any
) -> dict[str, Any]:
    text = observation_text(observation)
    record: dict[str, Any] = {
        "observation": text[:MAX_OBSERVATION_CHARS] + ("\n... (cut)" if len(text) > MAX_OBSERVATION_CHARS else ""),
        "legal": [str(n) for n in info.get("action_names", ())],
        "legal_ids": [int(a) for a in info.get("legal_actions", ())],
        "action": action if isinstance(action, str) else int(action),
        "reward": float(reward),
    }
    for key in ("probs", "value", "answer", "tokens"):
        if key in details:
            record[key] = details[key]
    for key in ("expected", "diff", "score"):  # Trace's verdict, the game score
        if key in after and isinstance(after[key], (int, float, str)):
            record[key] = after[key]
    return record


@dataclass(frozen=True)
class BenchEnvConfig(EnvConfig):
    """An :class:`EnvConfig` whose envs carry the bench's tally (and trajectory recorder)."""

    board: DetailsBoard | None = None
    """Where the policy's per-decision details wait for their step (None: the policy reports none)."""
    finished: dict[int, list[dict[str, Any]]] | None = None
    """Recorded trajectories by episode seed (None: not recording)."""

    def make(self, **overrides: Any) -> gym.Env:
        record = self.finished is not None
        return EpisodeTally(super().make(**overrides), self.board, self.finished if record else {}, record)
