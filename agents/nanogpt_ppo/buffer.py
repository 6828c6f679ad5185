"""The rollout buffer: preallocated (time, env) tensors, GAE through ``llm_gym.rl.compute_gae``, shuffled minibatches.

Observations are stored as uint8 character tokens (the vocabulary has fewer than 256 ids), so a rollout of
1024 x 1944-token grids is 2 MB, not 16 MB of int64.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from llm_gym.rl import compute_gae


@dataclass
class Minibatch:
    """One shuffled minibatch, flattened over (time, env); every tensor has the same first dimension."""

    tokens: torch.Tensor
    query_index: torch.Tensor
    action_mask: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    def __len__(self) -> int:
        return int(self.actions.shape[0])


class RolloutBuffer:
    """``steps`` x ``num_envs`` transitions, written one time step at a time with :meth:`add`.

    ``dones[t]`` follows CleanRL and ``compute_gae``: 1 where the observation at t is the first of a new episode
    (or of a new life, when lives count as episodes).
    """

    def __init__(
        self, steps: int, num_envs: int, context: int, num_actions: int, device: str | torch.device = "cpu"
    ) -> None:
        self.steps, self.num_envs, self.context = steps, num_envs, context
        self.device = torch.device(device)
        shape = (steps, num_envs)
        self.tokens = np.zeros((*shape, context), dtype=np.uint8)
        self.query_index = np.zeros(shape, dtype=np.int64)
        self.action_mask = np.ones((*shape, num_actions), dtype=bool)
        self.actions = torch.zeros(shape, dtype=torch.long)
        self.logprobs = torch.zeros(shape)
        self.rewards = torch.zeros(shape)
        self.dones = torch.zeros(shape)
        self.values = torch.zeros(shape)
        self.truncated_values = torch.zeros(shape)
        """V(final observation) where the step ended by truncation (bootstrapped into that step's reward)."""
        self.advantages = torch.zeros(shape)
        self.returns = torch.zeros(shape)

    def add(
        self,
        t: int,
        tokens: np.ndarray,
        query_index: np.ndarray,
        action_mask: np.ndarray,
        done: torch.Tensor,
        action: torch.Tensor,
        logprob: torch.Tensor,
        value: torch.Tensor,
    ) -> None:
        """Store what was seen and decided at step ``t`` (the reward comes after the env step: :meth:`add_reward`)."""
        self.tokens[t] = tokens
        self.query_index[t] = query_index
        self.action_mask[t] = action_mask
        self.dones[t] = done
        self.actions[t] = action
        self.logprobs[t] = logprob
        self.values[t] = value

    def add_reward(self, t: int, reward: torch.Tensor, truncated_value: torch.Tensor | None = None) -> None:
        """The reward of step ``t`` and, for envs whose episode was truncated there, V(final observation)."""
        self.rewards[t] = reward
        self.truncated_values[t] = 0.0 if truncated_value is None else truncated_value

    def compute_returns(self, last_value: torch.Tensor, last_done: torch.Tensor, gamma: float, lam: float) -> None:
        """Fill ``advantages`` and ``returns`` with GAE(gamma, lam)."""
        self.advantages, self.returns = compute_gae(
            self.rewards,
            self.values,
            self.dones,
            last_value,
            last_done,
            gamma,
            lam,
            truncated_values=self.truncated_values,
        )

    def minibatches(self, size: int, generator: torch.Generator) -> Iterator[Minibatch]:
        """One epoch: every sample exactly once, in a random order, ``size`` at a time (the last may be smaller)."""
        total = self.steps * self.num_envs
        order = torch.randperm(total, generator=generator)
        tokens = self.tokens.reshape(total, self.context)
        query_index = self.query_index.reshape(total)
        action_mask = self.action_mask.reshape(total, -1)
        flat = {
            name: getattr(self, name).reshape(total)
            for name in ("actions", "logprobs", "values", "advantages", "returns")
        }
        for chunk in order.split(size):
            rows = chunk.numpy()
            yield Minibatch(
                tokens=torch.from_numpy(tokens[rows]).to(self.device),
                query_index=torch.from_numpy(query_index[rows]).to(self.device),
                action_mask=torch.from_numpy(action_mask[rows]).to(self.device),
                **{name: tensor[chunk].to(self.device) for name, tensor in flat.items()},
            )
