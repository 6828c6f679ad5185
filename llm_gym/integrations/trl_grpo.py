"""TRL's ``GRPOTrainer`` on an llm-gym env: decisions as prompts, the episode's return as the reward (extra ``trl``).

GRPO samples a group of completions per prompt and scores each against the others. Here a prompt is one decision
of an llm-gym episode, exactly as llm-gym's LM agents are prompted with it (:mod:`llm_gym.integrations.episode`),
and a completion's reward is what the env pays for it:

1. :func:`decision_dataset` makes the rows: for each (task id, seed), the env is reset and ``lead_in`` seeded random
   legal moves are played, and the decision reached becomes the ``prompt`` (chat messages); the columns ``env_id``,
   ``env_kwargs``, ``task_id``, ``seed`` and ``lead_in`` say how to reach it again.
2. :class:`EpisodeReward` is the reward function: per completion it rebuilds that decision (same seed, task id and
   lead-in moves, so every completion of a group plays the same position), steps the completion through the shared
   parser, then finishes the episode with a continuation policy seeded by the row's seed (the same for every
   completion of the group) and returns the sum of rewards from the decision on, the parse penalty included.

Single-decision envs (``Trace-v0``: one answer per episode) need neither lead-in nor continuation. TRL repeats each
row ``num_generations`` times, so a group always shares its task id and seed. The recipe is in docs/guides/trainers.md and
``examples/trl_grpo.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from llm_gym.integrations.episode import TextEpisode, Turn

Continuation = Literal["random", "first"]


@dataclass(frozen=True)
class Decision:
    """Where a row's decision is: env, arguments, task id, seed and the moves played before it."""

    env_id: str
    env_kwargs: Mapping[str, Any]
    task_id: int | None
    seed: int
    lead_in: tuple[str, ...] = ()

    def reach(self, episode: TextEpisode | None = None) -> tuple[TextEpisode, Turn]:
        """An episode standing at this decision (``episode`` reused when given)."""
        episode = episode or TextEpisode(self.env_id, self.env_kwargs)
        turn = episode.reset(seed=self.seed, task_id=self.task_id)
        for move in self.lead_in:
            turn = episode.step(answer=move)
        return episode, turn


def decision_dataset(
    env_id: str,
    tasks: Iterable[tuple[int | None, int]],
    env_kwargs: Mapping[str, Any] | None = None,
    lead_in: int = 0,
) -> Any:
    """A ``datasets.Dataset`` of decisions: one row per (task id, seed), ``lead_in`` seeded random moves in.

    A row whose episode ends within the lead-in is left out (its position has no decision to make).
    """
    from datasets import Dataset  # the trl extra's: EpisodeReward and Decision work without it

    kwargs = dict(env_kwargs or {})
    episode = TextEpisode(env_id, kwargs)
    rows: dict[str, list[Any]] = {k: [] for k in ("prompt", "env_id", "env_kwargs", "task_id", "seed", "lead_in")}
    try:
        for task_id, seed in tasks:
            rng = np.random.default_rng(seed)
            turn = episode.reset(seed=seed, task_id=task_id)
            moves: list[str] = []
            while len(moves) < lead_in and not turn.done:
                moves.append(_random_move(rng, turn))
                turn = episode.step(answer=moves[-1])
            if turn.done:
                continue
            rows["prompt"].append(turn.messages)
            rows["env_id"].append(env_id)
            rows["env_kwargs"].append(json.dumps(kwargs, sort_keys=True))
            rows["task_id"].append(-1 if task_id is None else int(task_id))
            rows["seed"].append(int(seed))
            rows["lead_in"].append(json.dumps(moves))
    finally:
        episode.close()
    return Dataset.from_dict(rows)


class EpisodeReward:
    """A TRL reward function: each completion's return in the episode where it is the row's decision.

    Args:
        continuation: how the rest of the episode is played after the completion's move: ``random`` (a seeded
            random legal move; the seed is the row's, so a group's completions face the same continuation) or
            ``first`` (the first legal action).
        horizon: at most this many continuation steps (None: to the episode's end).
    """

    __name__ = "llm_gym_return"  # TRL logs each reward function under its name

    def __init__(self, continuation: Continuation = "random", horizon: int | None = None) -> None:
        if continuation not in ("random", "first"):
            raise ValueError(f"continuation={continuation!r}: use random or first")
        self.continuation, self.horizon = continuation, horizon
        self._episodes: dict[tuple[str, str], TextEpisode] = {}
        self.scored: list[tuple[int, int, float]] = []
        """(task id, seed, reward) of every completion scored, in order (what a test or a log can check)."""

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        env_id: Sequence[str],
        env_kwargs: Sequence[str],
        task_id: Sequence[int],
        seed: Sequence[int],
        lead_in: Sequence[str],
        **_: Any,
    ) -> list[float]:
        rewards = []
        for k, completion in enumerate(completions):
            decision = Decision(
                env_id[k],
                json.loads(env_kwargs[k]),
                None if task_id[k] < 0 else int(task_id[k]),
                int(seed[k]),
                tuple(json.loads(lead_in[k])),
            )
            reward = self.score(decision, completion_text(completion))
            self.scored.append((int(task_id[k]), int(seed[k]), reward))
            rewards.append(reward)
        return rewards

    def score(self, decision: Decision, answer: str) -> float:
        """The return from ``decision`` on when ``answer`` is the move taken there."""
        key = (decision.env_id, json.dumps(dict(decision.env_kwargs), sort_keys=True))
        episode, _ = decision.reach(self._episodes.get(key))
        self._episodes[key] = episode
        turn = episode.step(answer=answer)
        total, steps = turn.reward, 0
        rng = np.random.default_rng(decision.seed)
        while not turn.done and (self.horizon is None or steps < self.horizon):
            turn = episode.step(answer=self._move(rng, turn))
            total += turn.reward
            steps += 1
        return float(total)

    def _move(self, rng: np.random.Generator, turn: Turn) -> str:
        if self.continuation == "random" or not turn.action_names:
            return _random_move(rng, turn)
        return turn.action_names[0]

    def close(self) -> None:
        for episode in self._episodes.values():
            episode.close()
        self._episodes.clear()


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or conversational messages (the last one's content)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content") or "")
    return str(completion)


def _random_move(rng: np.random.Generator, turn: Turn) -> str:
    if not turn.action_names:  # a text-action env: any answer ends it; an empty one is scored as wrong
        return ""
    return turn.action_names[int(rng.integers(len(turn.action_names)))]
