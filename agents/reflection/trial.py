"""The trial: play episodes in lockstep with the current model and keep, per episode, the steps worth reflecting on.

Every step records the observation, the legal actions, the action and the model's answer, the reward and (where
the env can clone its state) a snapshot taken before the action. When an episode ends, its steps get their
credit-assigned outcomes (:mod:`llm_gym.agents.reflection.credit`) and only the poor ones are kept as
:class:`Candidate` s; the rest of the episode is dropped at once, so memory holds one episode per env (a vision
episode of 1000 frames would not fit many times over).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_gym.agent import EnvConfig
from llm_gym.agents.reflection.credit import choose_poor_steps, credit_reward, discounted_outcomes
from llm_gym.envs.history import TURNS_KEY
from llm_gym.envs.protocol import can_snapshot

CANDIDATE_INFO = ("legal_actions", "action_names", "lives", "instructions", TURNS_KEY)
"""What a candidate keeps of its step's info: the legal moves and lives (credit, replays), and the rules and earlier
turns the policy's prompt had (the reflection prompt, the fine-tuning example, the replays' history)."""


@dataclass
class Candidate:
    """A poor step, with what reflecting on it and replaying it need."""

    episode: int
    step: int
    episode_seed: int
    before: Any
    after: Any
    action: int
    action_name: str
    answer: str
    """The model's answer at the step (score mode: the chosen action's name)."""
    legal_ids: tuple[int, ...]
    legal_names: tuple[str, ...]
    info: Mapping[str, Any]
    """The env's info at ``before``: the keys in ``CANDIDATE_INFO``."""
    reward: float
    outcome: float
    horizon_rewards: tuple[float, ...]
    snapshot: Any
    """``env.unwrapped.clone_state()`` before the action, or None when the env cannot clone."""


@dataclass
class TrialResult:
    """What one trial played and chose."""

    returns: list[float] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    """The game's own score per episode where the env reports one (else the return)."""
    lengths: list[int] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    """The poor steps kept for reflection: the ``keep`` with the lowest outcome, in episode and step order."""
    poor_steps: int = 0
    """Poor steps chosen over all episodes (before the ``keep`` cap)."""
    decisions: int = 0


def _legal(info: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    return tuple(int(a) for a in info["legal_actions"]), tuple(str(n) for n in info["action_names"])


def play_trial(
    policy: Any,
    env: EnvConfig,
    episodes: int,
    *,
    seed: int,
    num_envs: int,
    max_steps: int,
    rate: float,
    gamma: float,
    threshold: float,
    context: int,
    life_penalty: float = 0.0,
    keep: int = 0,
) -> TrialResult:
    """Play ``episodes`` episodes (episode ``i`` with seed ``seed + i``) and choose their poor steps.

    Args:
        policy: an :class:`~llm_gym.lm.policy.LMPolicy` (its ``last_answers`` are recorded).
        rate, gamma, threshold, life_penalty: the credit-assignment rule (see ``credit``).
        context: how many later rewards each candidate carries for the reflection prompt.
        keep: keep only this many poor steps, those with the lowest outcome (0: all). Applied as episodes end,
            so the observations of the others (vision frames) are freed at once.
    """
    num_envs = max(1, min(num_envs, episodes))
    envs = [env.make() for _ in range(num_envs)]
    cloning = can_snapshot(envs[0])
    result = TrialResult()
    finished: dict[int, tuple[float, float, int]] = {}
    pool: list[Candidate] = []
    slots: list[dict[str, Any] | None] = [None] * num_envs
    next_episode = 0

    def start(slot: int) -> None:
        nonlocal next_episode
        if next_episode >= episodes:
            slots[slot] = None
            return
        obs, info = envs[slot].reset(seed=seed + next_episode)
        slots[slot] = {"index": next_episode, "obs": obs, "info": info, "steps": [], "return": 0.0}
        next_episode += 1

    try:
        for slot in range(num_envs):
            start(slot)
        while any(slots):
            active = [i for i, s in enumerate(slots) if s is not None]
            snapshots = [envs[i].unwrapped.clone_state() if cloning else None for i in active]
            actions = policy.act([slots[i]["obs"] for i in active], [slots[i]["info"] for i in active])
            answers = list(getattr(policy, "last_answers", None) or [""] * len(active))
            result.decisions += len(active)
            for slot, action, answer, snapshot in zip(active, actions, answers, snapshots, strict=True):
                state = slots[slot]
                obs, reward, terminated, truncated, info = envs[slot].step(action)
                credit = credit_reward(reward, state["info"], info, life_penalty)
                state["steps"].append((state["obs"], state["info"], int(action), answer, credit, snapshot))
                state["return"] += float(reward)
                state["obs"], state["info"] = obs, info
                if terminated or truncated or len(state["steps"]) >= max_steps:
                    score = float(info.get("score", state["return"]))
                    chosen = _candidates(state, obs, seed, rate, gamma, threshold, context)
                    result.poor_steps += len(chosen)
                    pool.extend(chosen)
                    if keep > 0 and len(pool) > keep:  # the lowest outcomes: the same set whatever the finish order
                        pool = sorted(pool, key=lambda c: (c.outcome, c.episode, c.step))[:keep]
                    finished[state["index"]] = (state["return"], score, len(state["steps"]))
                    start(slot)
    finally:
        for e in envs:
            e.close()
    for index in sorted(finished):
        episode_return, score, length = finished[index]
        result.returns.append(episode_return)
        result.scores.append(score)
        result.lengths.append(length)
    result.candidates = sorted(pool, key=lambda c: (c.episode, c.step))
    return result


def _candidates(
    state: dict[str, Any], final_obs: Any, seed: int, rate: float, gamma: float, threshold: float, context: int
) -> list[Candidate]:
    steps: Sequence[tuple[Any, Mapping[str, Any], int, str, float, Any]] = state["steps"]
    rewards = [s[4] for s in steps]
    outcomes = discounted_outcomes(rewards, gamma)
    chosen = []
    for t in choose_poor_steps(outcomes, rate, threshold):
        before, info, action, answer, reward, snapshot = steps[t]
        legal_ids, legal_names = _legal(info)
        after = steps[t + 1][0] if t + 1 < len(steps) else final_obs
        chosen.append(
            Candidate(
                episode=state["index"],
                step=t,
                episode_seed=seed + state["index"],
                before=before,
                after=after,
                action=action,
                action_name=legal_names[legal_ids.index(action)] if action in legal_ids else str(action),
                answer=answer,
                legal_ids=legal_ids,
                legal_names=legal_names,
                info={k: info[k] for k in CANDIDATE_INFO if k in info},
                reward=reward,
                outcome=float(outcomes[t]),
                horizon_rewards=tuple(rewards[t + 1 : t + 1 + context]),
                snapshot=snapshot,
            )
        )
    return chosen
