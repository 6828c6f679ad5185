"""Rollouts of whole episodes played in groups, for the critic-free estimators (``advantage=group`` or
``step_group``, :mod:`llm_gym.rl.advantages`).

The envs play in groups of ``group_size`` (:class:`llm_gym.stepping.EnvStepper` with ``group_size``): the episodes of a
group reset with one task id and seed, so they start from the identical state and differ only by what the policy
drew. A rollout starts a new group on a set of envs as soon as all of them have finished, until it holds
``num_envs * num_steps`` decisions; the groups in play then are played to their ends, and no new one starts. So every
decision of a rollout belongs to a finished episode of a complete group, all played by the same policy, and the
update that follows is on-policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.rollout import Rollout, RolloutActor, cache_common_rules
from llm_gym.envs.protocol import legal_choices
from llm_gym.rl.advantages import EpisodeSteps, group_advantages
from llm_gym.stepping import EnvStepper
from llm_gym.training.branches import Branches


@dataclass
class GroupRollout(Rollout):
    """Whole episodes of complete groups; ``decisions[t]`` holds the rows of the envs that were playing at step t."""

    episode_of: list[int] = field(default_factory=list)
    """Per decision (in the order the update flattens them: step by step, row by row), its episode's number."""
    row_rewards: list[float] = field(default_factory=list)
    """Per decision, the (scaled) reward that followed it."""
    keys: list[tuple] = field(default_factory=list)
    """Per decision, what it saw: its prompt's token ids (``step_group``'s anchor sets)."""

    def advantages(self, config: PPOLoRAConfig) -> torch.Tensor:
        """(decisions,) each decision's advantage under ``config.advantage``, in the order of :attr:`episode_of`."""
        rows: dict[int, list[int]] = {}
        for row, episode in enumerate(self.episode_of):
            rows.setdefault(episode, []).append(row)
        finished = {e.index for e in self.finished}
        if set(rows) - finished:
            raise RuntimeError(f"episodes {sorted(set(rows) - finished)} of the rollout did not finish")
        episodes = [
            EpisodeSteps(
                group=index // config.group_size,
                rewards=tuple(self.row_rewards[r] for r in members),
                keys=tuple(self.keys[r] for r in members),
            )
            for index, members in rows.items()
        ]
        per_episode = group_advantages(
            episodes, config.advantage, gamma=config.gamma, scale=config.group_scale, step_weight=config.step_weight
        )
        out = torch.zeros(len(self.episode_of))
        for members, advantages in zip(rows.values(), per_episode, strict=True):
            out[members] = advantages
        return out


def collect_groups(actor: RolloutActor, stepper: EnvStepper, config: PPOLoRAConfig, env_id: str) -> GroupRollout:
    """Play new groups on every env until the rollout holds ``config.rollout_size`` decisions, then play the groups
    in progress to their ends (one batched decision per step for the envs that are playing)."""
    stepper.episodes = None  # groups start as envs free up ...
    stepper.reset()
    cache_common_rules(actor.ac, stepper.infos)
    rollout = GroupRollout(last_done=torch.zeros(len(stepper)))
    branches = Branches(stepper, config.branch_fraction, config.seed) if config.branch_fraction > 0 else None
    try:
        while True:
            if stepper.episodes is None and rollout.size >= config.rollout_size:
                stepper.episodes = stepper.next_episode  # ... until there are enough decisions: the rest finish
            active = stepper.active
            if not active:
                if branches is not None:
                    rollout.branched = branches.branched
                return rollout
            infos = [stepper.infos[i] for i in active]
            decisions = actor.decide([stepper.observations[i] for i in active], infos, env_id)
            if any(row.numel() for row in decisions.probs):
                rollout.count_actions(decisions.probs, [legal_choices(info, env_id)[1] for info in infos])
            episodes = [stepper.episode_index[i] for i in active]
            if branches is not None:
                branches.visit(active, decisions.actions)
            result = stepper.step(decisions.actions)
            rollout.decisions.append(decisions)
            rollout.episode_of.extend(episodes)  # type: ignore[arg-type]  # active envs play a numbered episode
            rollout.row_rewards.extend(float(result.rewards[i]) * config.reward_scale for i in active)
            rollout.keys.extend(tuple(prompt) for prompt in decisions.prompts)
            rollout.finished.extend(result.finished)
            rollout.invalid += int(result.invalid[active].sum())
            rollout.raw_reward += float(result.raw_rewards[active].sum())
    finally:  # a rollout that raises must not leave the stepper branching its next groups
        if branches is not None:
            branches.close()
