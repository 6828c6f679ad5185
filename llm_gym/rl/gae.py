"""Generalised advantage estimation (Schulman et al. 2016) over a (time, env) rollout."""

from __future__ import annotations

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_value: torch.Tensor,
    last_done: torch.Tensor,
    gamma: float = 0.99,
    lam: float = 0.95,
    truncated_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns for a rollout of shape (T, N).

    Args:
        rewards: r_t, shape (T, N).
        values: V(s_t), shape (T, N).
        dones: 1.0 where s_t is the first state of a new episode (the step *before* it ended one), CleanRL's
            convention: ``dones[t]`` says whether the observation at t followed a reset.
        last_value: V(s_T) for the state after the rollout, shape (N,).
        last_done: whether s_T follows a reset, shape (N,).
        gamma: discount.
        lam: GAE lambda.
        truncated_values: optional (T, N) tensor of V(final observation) for steps that ended by truncation
            (0 elsewhere); it is bootstrapped into that step's reward, so time limits do not look like deaths.

    Returns:
        (advantages, returns), each (T, N); returns = advantages + values.
    """
    steps = rewards.shape[0]
    rewards = rewards.float()
    if truncated_values is not None:
        rewards = rewards + gamma * truncated_values.float()
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(last_value, dtype=rewards.dtype)
    for t in reversed(range(steps)):
        if t == steps - 1:
            next_nonterminal = 1.0 - last_done.float()
            next_value = last_value.float()
        else:
            next_nonterminal = 1.0 - dones[t + 1].float()
            next_value = values[t + 1].float()
        delta = rewards[t] + gamma * next_value * next_nonterminal - values[t].float()
        last_gae = delta + gamma * lam * next_nonterminal * last_gae
        advantages[t] = last_gae
    return advantages, advantages + values.float()
