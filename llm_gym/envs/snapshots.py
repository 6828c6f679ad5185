"""Snapshots of stepped envs for an exact ``--resume``: the one place that knows what an env's state is made of.

An env's state is its unwrapped env's ``clone_state()`` (emulator or game, RNG included; see
:class:`llm_gym.envs.protocol.Snapshotting`) plus the counters of the wrappers around it that keep any
(:class:`Stateful`: ``state_dict`` / ``load_state_dict``, e.g. the episode statistics and the text-action parser).
Gymnasium's own wrappers hold nothing a reset does not set, so restoring = reset, then put the snapshot back.

Snapshots are taken of the sub-envs of a :class:`~gymnasium.vector.SyncVectorEnv`; an ``AsyncVectorEnv`` keeps its
envs in other processes, so it gives None, as do envs without ``clone_state`` or whose snapshot the state file
cannot hold (:mod:`llm_gym.envs.state_codec`: data only; OpenSpiel's hold live C++ states): the caller then starts new
episodes on resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
from gymnasium.vector import SyncVectorEnv, VectorEnv

from llm_gym.envs.protocol import Snapshotting
from llm_gym.envs.state_codec import can_encode


@runtime_checkable
class Stateful(Protocol):
    """A wrapper that keeps counters outside the env's own snapshot."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class EnvSnapshot:
    """One env where it stands: the unwrapped env's snapshot and each stateful wrapper's counters (outermost
    first)."""

    env: Any
    wrappers: tuple[dict[str, Any], ...]


def can_store(value: Any) -> bool:
    """Whether ``value`` can go into a checkpoint's env state file (:mod:`llm_gym.envs.state_codec`)."""
    return can_encode(value)


def capture(envs: VectorEnv) -> list[EnvSnapshot] | None:
    """A snapshot of every sub-env, or None where they cannot be taken (see the module docstring)."""
    if not isinstance(envs, SyncVectorEnv) or not all(isinstance(e.unwrapped, Snapshotting) for e in envs.envs):
        return None
    snapshots = [
        EnvSnapshot(env.unwrapped.clone_state(), tuple(w.state_dict() for w in _stateful(env))) for env in envs.envs
    ]
    return snapshots if can_store(snapshots) else None


def restore(envs: VectorEnv, snapshots: list[EnvSnapshot]) -> None:
    """Put every sub-env back where :func:`capture` found it. The envs must have been reset once (that sets up
    Gymnasium's wrappers and the env's RNG, which the snapshot then overrides)."""
    if not isinstance(envs, SyncVectorEnv) or len(snapshots) != envs.num_envs:
        raise ValueError("snapshots are restored into a SyncVectorEnv with as many envs as were captured")
    for env, snapshot in zip(envs.envs, snapshots, strict=True):
        env.unwrapped.restore_state(snapshot.env)
        for wrapper, state in zip(_stateful(env), snapshot.wrappers, strict=True):
            wrapper.load_state_dict(state)


def _stateful(env: gym.Env) -> list[Stateful]:
    found: list[Stateful] = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, Stateful):
            found.append(env)
        env = env.env
    return found
