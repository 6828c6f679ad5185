"""Collecting a rollout: every step is one call of :func:`~llm_gym.agents.ppo_lora.acting.act` for all envs, which
keeps what the update needs to recompute each decision (the prompt, the scored continuations, the frozen layers'
output, the action, its log-probability, the value and the reference policy's log-probabilities)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from llm_gym.agents.ppo_lora.acting import act, merged_rows, rules_of, turns_of
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.decisions import Decisions
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.strategies import Strategy
from llm_gym.envs.protocol import legal_choices
from llm_gym.lm.backends import LMBackend
from llm_gym.lm.prompts import Turns
from llm_gym.stepping import EnvStepper, Episode


@dataclass(frozen=True)
class RolloutActor:
    """What picks a rollout's actions (:func:`collect` and :func:`~llm_gym.agents.ppo_lora.groups.collect_groups`
    take it alike): the actor-critic and its strategy (score or generate mode), the generator sampling draws from,
    whether each decision also scores the reference policy (``kl_reference``), and the rollout engine serving the
    current adapter (``rollout_backend=vllm``), whose picks the training model then recomputes."""

    ac: ActorCritic
    strategy: Strategy
    generator: torch.Generator
    with_reference: bool = False
    engine: LMBackend | None = None

    def decide(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]], env_id: str, together: bool = False
    ) -> Decisions:
        """One batched decision for these envs (``together``: see :func:`~llm_gym.agents.ppo_lora.acting.act`)."""
        return act(self.ac, self.strategy, observations, infos, env_id, generator=self.generator,
                   with_reference=self.with_reference, engine=self.engine, together=together)  # fmt: skip


@dataclass
class Rollout:
    """``num_steps`` x ``num_envs`` decisions and what the envs returned."""

    decisions: list[Decisions] = field(default_factory=list)
    rewards: list[torch.Tensor] = field(default_factory=list)
    dones: list[torch.Tensor] = field(default_factory=list)
    """dones[t][i]: the observation at step t started a new episode (CleanRL's convention, as compute_gae wants)."""
    truncated_values: list[torch.Tensor] = field(default_factory=list)
    finished: list[Episode] = field(default_factory=list)
    branched: set[int] = field(default_factory=set)
    """The finished episodes (by number) that started at a visited state (``branch_fraction``), not a reset: their
    returns count from there, so the per-episode logs leave them out."""
    invalid: int = 0
    raw_reward: float = 0.0
    """The game's own reward summed over the rollout (seen before any episode ends)."""
    last_value: torch.Tensor | None = None
    last_done: torch.Tensor | None = None
    action_probs: dict[str, float] = field(default_factory=dict)
    """Score mode: per action name, the policy's probability of it summed over the rollout's decisions."""
    greedy_actions: Counter[str] = field(default_factory=Counter)
    """Score mode: per action name, the decisions in which it was the most likely action."""
    scored: int = 0
    """Score mode: the decisions counted in ``action_probs`` and ``greedy_actions``."""

    @property
    def size(self) -> int:
        """Decisions in the rollout."""
        return sum(len(d.actions) for d in self.decisions)

    def count_actions(self, probs: list[torch.Tensor], names: list[list[str]]) -> None:
        """Add one step's decisions (per row, the probability of each legal action and the actions' names)."""
        for row, row_names in zip(probs, names, strict=True):
            if row.numel() == 0:  # generate mode: no distribution over named actions
                continue
            for name, p in zip(row_names, row.tolist(), strict=True):
                self.action_probs[name] = self.action_probs.get(name, 0.0) + p
            self.greedy_actions[row_names[int(row.argmax())]] += 1
            self.scored += 1

    def stacked(self) -> dict[str, torch.Tensor]:
        return {
            "rewards": torch.stack(self.rewards),
            "dones": torch.stack(self.dones),
            "values": torch.stack([d.values for d in self.decisions]),
            "truncated_values": torch.stack(self.truncated_values),
        }


def values_of(
    ac: ActorCritic, observations: list[Any], rules: list[str], turns: list[Turns], needed: Sequence[bool] | None = None
) -> torch.Tensor:
    """V(s) for observations only (bootstrapping): the prompt (with each row's ``rules`` and earlier ``turns``)
    and a one-token continuation the value ignores. Rows not ``needed`` get 0 without a forward (GAE never reads the
    value of a state that follows a reset), and rows with the same prompt share one (as :func:`act`'s do)."""
    values = torch.zeros(len(observations))
    rows = [i for i in range(len(observations)) if needed is None or needed[i]]
    if not rows:
        return values
    prompts = ac.encode([observations[i] for i in rows], [rules[i] for i in rows], [turns[i] for i in rows])
    end = ac.builder.answer_end_ids or [ac.pad_id]
    ids, uses_prefix = [p.ids for p in prompts], [p.uses_prefix for p in prompts]
    distinct, inverse = merged_rows(ids, uses_prefix, [[end]] * len(prompts))
    batch, hidden, _ = ac.bottom_rows(
        [ids[j] for j in distinct], [uses_prefix[j] for j in distinct], [[end]] * len(distinct)
    )
    computed = ac.top(hidden, batch, "rollout")[1].cpu()
    values[rows] = computed[inverse].to(values.dtype)
    return values


def collect(
    actor: RolloutActor, stepper: EnvStepper, config: PPOLoRAConfig, env_id: str, next_done: torch.Tensor
) -> Rollout:
    """Step every env ``config.num_steps`` times with the current policy (with an engine, the engine picks the
    actions; the training model recomputes their log-probs)."""
    ac = actor.ac
    cache_common_rules(ac, stepper.infos)
    rollout = Rollout()
    for _ in range(config.num_steps):
        decisions = actor.decide(stepper.observations, stepper.infos, env_id)
        rules = rules_of(ac, stepper.infos)  # the episodes in play (a finished one's env is reset in the step)
        if any(row.numel() for row in decisions.probs):
            rollout.count_actions(decisions.probs, [legal_choices(info, env_id)[1] for info in stepper.infos])
        result = stepper.step(decisions.actions)
        truncated_values = torch.zeros(len(stepper))
        if result.final_observations:
            index = sorted(result.final_observations)
            truncated_values[index] = values_of(
                ac,
                [result.final_observations[i] for i in index],
                [rules[i] for i in index],
                turns_of([result.final_infos[i] for i in index]),
            )
        rollout.decisions.append(decisions)
        rollout.rewards.append(torch.as_tensor(result.rewards * config.reward_scale, dtype=torch.float32))
        rollout.dones.append(next_done)
        rollout.truncated_values.append(truncated_values)
        rollout.finished.extend(result.finished)
        rollout.invalid += int(result.invalid.sum())
        rollout.raw_reward += float(result.raw_rewards.sum())
        next_done = torch.as_tensor(result.terminated | result.truncated, dtype=torch.float32)
    rollout.last_value = values_of(ac, list(stepper.observations), rules_of(ac, stepper.infos),
                                   turns_of(stepper.infos), needed=(next_done == 0).tolist())  # fmt: skip
    rollout.last_done = next_done
    return rollout


def cache_common_rules(ac: ActorCritic, infos: list[dict[str, Any]]) -> None:
    """Cache the prompt prefix of the rules most envs play now, when that is not the cached one (a curriculum moved
    on to another game), so their prompts reuse it. Only here, before a rollout: the update that follows recomputes
    its decisions over the same prefix."""
    counts = Counter(rules_of(ac, infos))
    rules, count = counts.most_common(1)[0]
    if rules != ac.builder.instructions and 2 * count > len(infos):
        ac.use_instructions(rules)


def engine_gap(rollout: Rollout) -> dict[str, float]:
    """How far the rollout engine's log-probability of each action it picked is from the training model's
    (``rollout_backend=vllm``): the largest and the mean absolute gap in nats; nothing without an engine."""
    engine = torch.cat([d.engine_logprob for d in rollout.decisions])
    if torch.isnan(engine).all():
        return {}
    gap = (engine - torch.cat([d.logprob for d in rollout.decisions]).float()).abs()
    return {"charts/engine_logprob_gap_max": float(gap.max()), "charts/engine_logprob_gap_mean": float(gap.mean())}


MAX_LOGGED_ACTIONS = 18
"""Action statistics are logged per name up to this many names (ALE's full action set); a board game's hundreds of
moves would flood the log."""


def action_scalars(rollout: Rollout) -> dict[str, float]:
    """``policy/mean_prob/<action>`` (the policy's mean probability of it over the rollout's decisions, 0 where it
    was not legal) and ``policy/greedy_share/<action>`` (the share of decisions in which it was the most likely
    action: a greedy policy that is about to play one action everywhere shows one share near 1 while sampling still
    looks varied). Nothing in generate mode or for more than :data:`MAX_LOGGED_ACTIONS` names."""
    if not rollout.scored or len(rollout.action_probs) > MAX_LOGGED_ACTIONS:
        return {}
    scalars = {f"policy/mean_prob/{name}": p / rollout.scored for name, p in rollout.action_probs.items()}
    for name in rollout.action_probs:
        scalars[f"policy/greedy_share/{name}"] = rollout.greedy_actions[name] / rollout.scored
    return scalars


def value_scalars(rollout: Rollout, returns: torch.Tensor, gamma: float) -> dict[str, float]:
    """Where the value head sits against what it is fitted to: ``values/mean`` (the rollout's value estimates) and
    ``values/return_mean`` (its GAE returns), and ``values/end_advantage``, the one-step advantage r - V of the
    decisions that ended an episode (a truncated one with its bootstrapped value): a head far below the returns
    makes losing a life look good on Breakout (docs/results/ppo_lora_breakout.md, "A fresh value head's starting value"). NaN
    where no episode ended (the caller drops NaN scalars)."""
    arrays = rollout.stacked()
    values = arrays["values"].float()
    ends = torch.cat([arrays["dones"][1:], rollout.last_done[None]]).bool()
    end_advantage = arrays["rewards"].float() + gamma * arrays["truncated_values"].float() - values
    return {
        "values/mean": float(values.mean()),
        "values/return_mean": float(returns.float().mean()),
        "values/end_advantage": float(end_advantage[ends].mean()) if ends.any() else math.nan,
    }


def rollout_arrays(rollout: Rollout) -> dict[str, np.ndarray]:
    """Per-episode numbers of a rollout for logging."""
    games = [e for e in rollout.finished if e.index not in rollout.branched]
    return {
        "returns": np.array([e.stats.episode_return for e in games]),
        "raw_returns": np.array([e.stats.raw_return for e in games]),
        "lengths": np.array([e.stats.length for e in games]),
    }
