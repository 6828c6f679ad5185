"""Small, pure RL building blocks shared by the agents: GAE, PPO losses, schedules, adaptive coefficients. Each is
tested against hand-computed values in tests/rl."""

from llm_gym.rl.controllers import adaptive_entropy_coef, adaptive_kl_coef
from llm_gym.rl.gae import compute_gae
from llm_gym.rl.ppo import (
    PPOLosses,
    explained_variance,
    improved_distribution,
    improvement_target,
    ppo_losses,
    target_policy_loss,
)
from llm_gym.rl.schedules import cosine_schedule, linear_schedule

__all__ = [
    "PPOLosses",
    "adaptive_entropy_coef",
    "adaptive_kl_coef",
    "compute_gae",
    "cosine_schedule",
    "explained_variance",
    "improved_distribution",
    "improvement_target",
    "linear_schedule",
    "ppo_losses",
    "target_policy_loss",
]
