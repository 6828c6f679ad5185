"""The config fields several learners share, declared once: one name, one docstring and one marker per knob.

* :class:`OptimizerConfig`: what every gradient-descent learner sets (``learning_rate``, ``minibatch_size``,
  ``max_grad_norm``);
* :class:`ScheduleConfig`: the AdamW schedule of the LM learners (``warmup_updates``, ``min_lr_ratio``,
  ``weight_decay``): ``ppo_lora`` and ``sft``;
* :class:`PPOConfig`: the rollouts and losses of PPO: ``ppo_lora``, ``nanogpt_ppo`` and the ``sb3_ppo`` plugin.

An agent's config inherits the blocks it uses (``PPOLoRAConfig(LocalLMConfig, PPOConfig, ScheduleConfig)``) and
redeclares a field only to give it its own default, in one line without a docstring (the docstring and the
``training_only`` marker stay the base's; :func:`llm_gym.config.field_docs`, :func:`llm_gym.config.field_effect`).
The defaults here are ``ppo_lora``'s, the main agent's. A field renamed to join this vocabulary keeps its old name
in the agent's ``renamed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_gym.agent import AgentConfig
from llm_gym.config import training_only


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig(AgentConfig):
    """The optimiser's knobs every gradient-descent learner has."""

    learning_rate: float | None = training_only(None)
    """Peak learning rate (where a schedule starts after its warm-up). None, where an agent allows it: the agent's
    own choice; ppo_lora: its policy loss's, 1e-3 with the target loss (the Kuhn poker and tic-tac-toe recipes) and
    2e-4 with the clipped ratio (the Breakout recipes; the clipped loss was tried at 5e-5 to 2e-4); nanogpt_ppo: its
    preset's."""
    minibatch_size: int = training_only(64)
    """Samples per optimizer step (ppo_lora: also the most per forward/backward pass)."""
    max_grad_norm: float = training_only(1.0)
    """Gradient-norm clip."""


@dataclass(frozen=True, kw_only=True)
class ScheduleConfig(OptimizerConfig):
    """The warm-up and decay of the learning rate, and AdamW's weight decay."""

    warmup_updates: int = training_only(1)
    """Updates of linear warm-up before the schedule (an update is what the schedule counts: one PPO update of a
    rollout in ppo_lora, one optimizer step in sft, which warms up for at most a fifth of its steps)."""
    min_lr_ratio: float = training_only(0.1)
    """Final learning rate as a fraction of the peak (cosine and linear schedules)."""
    weight_decay: float = training_only(0.0)
    """AdamW weight decay."""


@dataclass(frozen=True, kw_only=True)
class PPOConfig(OptimizerConfig):
    """PPO's rollouts, advantages and losses."""

    num_envs: int = training_only(8)
    """Envs stepped in lockstep (one batched forward pass decides for all of them)."""
    num_steps: int = training_only(32)
    """Steps per env between updates (a rollout holds num_envs * num_steps decisions)."""
    update_epochs: int = training_only(2)
    """Passes over each rollout."""
    gamma: float = training_only(0.99)
    """Discount."""
    gae_lambda: float = training_only(0.95)
    """GAE lambda."""
    clip_coef: float = training_only(0.2)
    """PPO ratio clip."""
    value_clip_coef: float = training_only(0.2)
    """Clip of the value change per update, around the rollout's values; 0 turns value clipping off."""
    value_coef: float = training_only(0.5)
    """Weight of the value loss."""
    entropy_coef: float = training_only(0.01)
    """Weight of the entropy bonus (with ppo_lora's entropy_target: its floor, where the coefficient starts and
    returns to)."""
    target_kl: float = training_only(0.0)
    """Stop an update early once the policy has moved this far from the rollout's (approximate KL(old || new)); 0 =
    never. ppo_lora and sb3_ppo: before the first optimizer step whose minibatch's KL exceeds 1.5 x this (SB3's
    rule, the first epoch included); nanogpt_ppo: after the first epoch whose mean KL exceeds it. (Not kl_target,
    which steers ppo_lora's KL to the reference model.)"""
