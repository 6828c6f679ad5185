"""The PPO objective (Schulman et al. 2017) with the details that matter: clipped policy loss, clipped value loss,
entropy bonus, and the diagnostics worth logging (approximate KL, clip fraction, explained variance)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PPOLosses:
    """The loss to minimise and its parts (all scalars)."""

    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    """The k3 estimator of KL(old || new): mean((r - 1) - log r)."""
    clip_fraction: torch.Tensor


def ppo_losses(
    new_logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    new_value: torch.Tensor,
    old_value: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    *,
    clip_coef: float = 0.2,
    value_clip_coef: float | None = 0.2,
    value_coef: float = 0.5,
    entropy_coef: float = 0.01,
    normalize_advantages: bool = True,
) -> PPOLosses:
    """PPO losses for one minibatch (every argument is a 1-D tensor over samples, ``entropy`` per sample).

    ``value_clip_coef=None`` turns value clipping off. The value loss is 0.5 * max(unclipped, clipped) squared
    error, as in the original implementation.
    """
    if normalize_advantages and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    policy_loss = torch.max(unclipped, clipped).mean()

    value_error = (new_value - returns) ** 2
    if value_clip_coef is not None:
        value_clipped = old_value + torch.clamp(new_value - old_value, -value_clip_coef, value_clip_coef)
        value_error = torch.max(value_error, (value_clipped - returns) ** 2)
    value_loss = 0.5 * value_error.mean()

    entropy_mean = entropy.mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy_mean
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return PPOLosses(loss, policy_loss, value_loss, entropy_mean, approx_kl, clip_fraction)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target); nan when the target has no variance."""
    var_target = torch.var(target)
    if var_target.item() == 0:
        return float("nan")
    return float(1 - torch.var(target - predicted) / var_target)


def improvement_target(
    old_probs: torch.Tensor, choice: torch.Tensor, advantages: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Per decision, the improved distribution over its choices: the old policy with the taken action's probability
    multiplied by ``exp(advantage / temperature)``, renormalised (a KL-regularised improvement step from one sampled
    action, as in MPO and AWR). ``old_probs``: (rows, choices), 0 on padding; ``choice``: (rows,) the taken action."""
    weights = torch.ones_like(old_probs)
    scale = torch.exp((advantages / temperature).clamp(-30.0, 30.0)).to(old_probs.dtype)
    weights = weights.scatter(1, choice[:, None], scale[:, None])
    target = old_probs * weights
    return target / target.sum(1, keepdim=True).clamp_min(1e-30)


def improved_distribution(old_probs: torch.Tensor, advantages: torch.Tensor, temperature: float) -> torch.Tensor:
    """One state's improved distribution when every action's advantage is known: ``old_probs * exp(advantages /
    temperature)``, renormalised (policy mirror descent's step; :func:`improvement_target` is its one-sample form)."""
    logits = old_probs.double().clamp_min(1e-300).log() + (advantages.double() / temperature).clamp(-30.0, 30.0)
    return torch.softmax(torch.where(old_probs > 0, logits, torch.full_like(logits, -torch.inf)), 0).float()


def target_policy_loss(
    new_logprobs: torch.Tensor, old_probs: torch.Tensor, choice: torch.Tensor, advantages: torch.Tensor,
    temperature: float,
) -> torch.Tensor:  # fmt: skip
    """Cross-entropy of the new policy to :func:`improvement_target` (its KL to the target up to a constant), mean
    over decisions. Its gradient on each decision's logits is ``new - target``: an action that did better than its
    group gets pulled towards the target however unlikely it was, and one that did worse is pushed down by no more
    than its own probability, where the clipped ratio loss pushes both by ``|advantage|`` (which, summed over many
    states that share the LM's weights, drives every state towards the action most states prefer)."""
    target = improvement_target(old_probs, choice, advantages, temperature).detach()
    finite = torch.where(torch.isfinite(new_logprobs), new_logprobs, torch.zeros_like(new_logprobs))
    return -(target * finite).sum(1).mean()
