"""The rollout buffer: what goes in at (t, env) comes out together, every sample once per epoch, GAE as computed."""

from __future__ import annotations

import numpy as np
import torch

from llm_gym.agents.nanogpt_ppo.buffer import RolloutBuffer
from llm_gym.rl import compute_gae

STEPS, ENVS, CONTEXT, ACTIONS = 5, 3, 4, 3


def filled() -> RolloutBuffer:
    """A buffer where every field of sample (t, e) encodes t and e, so misalignment shows."""
    buffer = RolloutBuffer(STEPS, ENVS, CONTEXT, ACTIONS)
    for t in range(STEPS):
        ids = np.arange(ENVS) + 10 * t  # sample id = 10 t + e
        tokens = np.repeat(ids[:, None], CONTEXT, axis=1).astype(np.uint8)
        mask = np.ones((ENVS, ACTIONS), dtype=bool)
        mask[:, t % ACTIONS] = False
        done = torch.tensor([1.0 if (t == 2 and e == 1) else 0.0 for e in range(ENVS)])
        buffer.add(
            t,
            tokens,
            ids % CONTEXT,
            mask,
            done,
            torch.as_tensor(ids) % ACTIONS,
            -torch.as_tensor(ids, dtype=torch.float32),
            torch.as_tensor(ids, dtype=torch.float32) / 100,
        )
        truncated = torch.tensor([0.5, 0.0, 0.0]) if t == 3 else None
        buffer.add_reward(t, torch.ones(ENVS) * (t + 1), truncated)
    return buffer


def test_minibatches_cover_every_sample_once_and_keep_fields_aligned() -> None:
    buffer = filled()
    buffer.compute_returns(torch.zeros(ENVS), torch.zeros(ENVS), gamma=0.9, lam=0.8)
    seen = []
    batches = list(buffer.minibatches(4, torch.Generator().manual_seed(0)))
    assert [len(b) for b in batches] == [4, 4, 4, 3]  # 15 samples; the last minibatch takes the rest
    for batch in batches:
        ids = batch.tokens[:, 0].long()
        t, e = ids // 10, ids % 10
        assert torch.all(batch.tokens == batch.tokens[:, :1])
        assert torch.equal(batch.query_index, ids % CONTEXT)
        assert torch.equal(batch.actions, ids % ACTIONS)
        assert torch.equal(batch.logprobs, -ids.float())
        assert torch.equal(batch.values, ids.float() / 100)
        assert torch.equal(batch.advantages, buffer.advantages[t, e])
        assert torch.equal(batch.returns, buffer.returns[t, e])
        assert not batch.action_mask[torch.arange(len(ids)), t % ACTIONS].any()
        seen += ids.tolist()
    assert sorted(seen) == sorted(10 * t + e for t in range(STEPS) for e in range(ENVS))


def test_each_epoch_has_its_own_order_from_the_generator() -> None:
    buffer = filled()
    generator = torch.Generator().manual_seed(1)
    first = torch.cat([b.actions for b in buffer.minibatches(15, generator)])
    second = torch.cat([b.actions for b in buffer.minibatches(15, generator)])
    again = torch.cat([b.actions for b in buffer.minibatches(15, torch.Generator().manual_seed(1))])
    assert torch.equal(first, again)
    assert not torch.equal(first, second)


def test_returns_are_gae_with_the_truncation_bootstrap() -> None:
    buffer = filled()
    last_value, last_done = torch.tensor([0.3, -0.2, 0.1]), torch.tensor([0.0, 1.0, 0.0])
    buffer.compute_returns(last_value, last_done, gamma=0.9, lam=0.8)
    truncated = torch.zeros(STEPS, ENVS)
    truncated[3, 0] = 0.5
    advantages, returns = compute_gae(
        buffer.rewards, buffer.values, buffer.dones, last_value, last_done, 0.9, 0.8, truncated_values=truncated
    )
    assert torch.equal(buffer.advantages, advantages) and torch.equal(buffer.returns, returns)
    # By hand for env 2 at the last step: delta = r + gamma * V(s_T) - V(s_{T-1}).
    assert buffer.advantages[4, 2].item() == torch.tensor(5 + 0.9 * 0.1 - 0.42).item()
    # Env 1 starts a new episode at t = 2: the advantage at t = 1 does not look past it.
    assert buffer.advantages[1, 1].item() == torch.tensor(2 - 0.11).item()
