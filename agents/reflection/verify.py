"""Verification: does the proposed correction really do at least as well as the action that was taken?

Both actions are replayed from the snapshot stored before the reflected step: restore, take the action, then let
the same continuation policy play ``horizon - 1`` more steps (or until the episode ends). The emulator's or game's
RNG is part of the snapshot, so both branches see the same randomness; the continuation policy is deterministic
(the current model, greedy) or seeded identically for both branches (random). The outcome of a branch is the sum
of its rewards (a lost life counting ``-life_penalty``, as in the choice of poor steps); a correction is kept when its outcome is at least the taken action's (``keep_ties=False``:
strictly better). All branches of a batch step in lockstep, so the model decides for all of them in one call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llm_gym.agent import EnvConfig
from llm_gym.agents.reflection.credit import credit_reward
from llm_gym.envs.history import restore_turns


@dataclass(frozen=True)
class Replay:
    """One branch to replay: from ``snapshot`` (of an episode reset with ``episode_seed``), take ``action``."""

    snapshot: Any
    info: Mapping[str, Any]
    """The env's info at the snapshot (lives before the step)."""
    episode_seed: int
    action: int
    rng_seed: int
    """Seed of the random continuation (equal for the two branches of one correction)."""
    observation: Any = None
    """The observation at the snapshot: with ``info``'s earlier turns, what a ``history=K`` env shows next."""


@dataclass(frozen=True)
class Verdict:
    """The two replays of one correction."""

    taken_outcome: float
    proposed_outcome: float
    kept: bool


class RandomContinuation:
    """Seeded uniformly random legal actions, one generator per branch (same seed: same draws)."""

    def __init__(self) -> None:
        self.rngs: list[np.random.Generator] = []

    def start(self, seeds: Sequence[int]) -> None:
        self.rngs = [np.random.default_rng(s) for s in seeds]

    def act_branches(
        self, branches: Sequence[int], observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> list[int]:
        return [
            int(self.rngs[b].choice(np.asarray(info["legal_actions"]))) for b, info in zip(branches, infos, strict=True)
        ]


class PolicyContinuation:
    """A deterministic batched policy (the current model, greedy) continues every branch."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def start(self, seeds: Sequence[int]) -> None:
        pass

    def act_branches(
        self, branches: Sequence[int], observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> list[int]:
        return list(self.policy.act(list(observations), list(infos)))


def replay(
    replays: Sequence[Replay], env: EnvConfig, continuation: Any, horizon: int, batch: int, life_penalty: float = 0.0
) -> list[float]:
    """The summed reward of each replay over ``horizon`` steps (its own action first)."""
    outcomes: list[float] = []
    envs = [env.make() for _ in range(max(1, min(batch, len(replays))))]
    try:
        for start in range(0, len(replays), len(envs)):
            chunk = replays[start : start + len(envs)]
            outcomes.extend(_replay_chunk(chunk, envs, continuation, horizon, life_penalty))
    finally:
        for e in envs:
            e.close()
    return outcomes


def _replay_chunk(
    chunk: Sequence[Replay], envs: Sequence[Any], continuation: Any, horizon: int, life_penalty: float
) -> list[float]:
    totals = [0.0] * len(chunk)
    observations: list[Any] = [None] * len(chunk)
    infos: list[Mapping[str, Any]] = [{}] * len(chunk)
    live: list[int] = []
    continuation.start([r.rng_seed for r in chunk])
    for b, (item, env) in enumerate(zip(chunk, envs, strict=False)):
        env.reset(seed=item.episode_seed)  # wrappers and RNGs initialised; the snapshot then sets the game state
        env.unwrapped.restore_state(item.snapshot)
        restore_turns(env, item.observation, item.info)  # the game's state holds no turns: a history env's do
        obs, reward, terminated, truncated, info = env.step(item.action)
        totals[b] += credit_reward(reward, item.info, info, life_penalty)
        if not (terminated or truncated):
            observations[b], infos[b] = obs, info
            live.append(b)
    for _ in range(horizon - 1):
        if not live:
            break
        actions = continuation.act_branches(live, [observations[b] for b in live], [infos[b] for b in live])
        still = []
        for b, action in zip(live, actions, strict=True):
            obs, reward, terminated, truncated, info = envs[b].step(action)
            totals[b] += credit_reward(reward, infos[b], info, life_penalty)
            if not (terminated or truncated):
                observations[b], infos[b] = obs, info
                still.append(b)
        live = still
    return totals


def verify(
    items: Sequence[tuple[Any, int]],
    env: EnvConfig,
    continuation: Any,
    *,
    horizon: int,
    keep_ties: bool,
    batch: int,
    seed: int,
    life_penalty: float = 0.0,
) -> list[Verdict]:
    """Replay each ``(candidate, proposed action)`` against the candidate's own action; one verdict per item.

    ``candidate`` is a :class:`~llm_gym.agents.reflection.trial.Candidate` (its ``snapshot``, ``info``,
    ``episode_seed`` and ``action`` are used).
    """
    replays: list[Replay] = []
    for k, (candidate, proposed) in enumerate(items):
        for action in (candidate.action, proposed):
            replays.append(
                Replay(
                    candidate.snapshot,
                    candidate.info,
                    candidate.episode_seed,
                    int(action),
                    seed * 1_000_003 + k,
                    candidate.before,
                )
            )
    outcomes = replay(replays, env, continuation, horizon, batch, life_penalty)
    verdicts = []
    for k in range(len(items)):
        taken, proposed = outcomes[2 * k], outcomes[2 * k + 1]
        kept = proposed >= taken if keep_ties else proposed > taken
        verdicts.append(Verdict(taken, proposed, kept))
    return verdicts
