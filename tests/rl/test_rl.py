"""GAE, PPO losses, schedules and adaptive coefficients against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from llm_gym.rl import (
    adaptive_entropy_coef,
    adaptive_kl_coef,
    compute_gae,
    cosine_schedule,
    explained_variance,
    linear_schedule,
    ppo_losses,
)


def test_gae_single_env_by_hand() -> None:
    gamma, lam = 0.9, 0.8
    rewards = torch.tensor([[1.0], [0.0], [2.0]])
    values = torch.tensor([[0.5], [0.4], [0.3]])
    dones = torch.zeros(3, 1)
    last_value, last_done = torch.tensor([0.2]), torch.tensor([0.0])
    adv, ret = compute_gae(rewards, values, dones, last_value, last_done, gamma, lam)
    d2 = 2.0 + 0.9 * 0.2 - 0.3
    d1 = 0.0 + 0.9 * 0.3 - 0.4
    d0 = 1.0 + 0.9 * 0.4 - 0.5
    a2 = d2
    a1 = d1 + 0.9 * 0.8 * a2
    a0 = d0 + 0.9 * 0.8 * a1
    assert adv[:, 0].tolist() == pytest.approx([a0, a1, a2])
    assert ret[:, 0].tolist() == pytest.approx([a0 + 0.5, a1 + 0.4, a2 + 0.3])


def test_gae_stops_at_episode_boundaries() -> None:
    rewards = torch.tensor([[1.0], [1.0]])
    values = torch.tensor([[0.0], [0.0]])
    dones = torch.tensor([[0.0], [1.0]])  # step 1 starts a new episode
    adv, _ = compute_gae(rewards, values, dones, torch.tensor([5.0]), torch.tensor([0.0]), 0.99, 0.95)
    assert adv[0, 0].item() == pytest.approx(1.0), "no bootstrap across the boundary"
    assert adv[1, 0].item() == pytest.approx(1.0 + 0.99 * 5.0)


def test_gae_bootstraps_truncated_steps() -> None:
    rewards, values = torch.tensor([[1.0]]), torch.tensor([[0.0]])
    truncated_values = torch.tensor([[2.0]])
    adv, _ = compute_gae(
        rewards,
        values,
        torch.zeros(1, 1),
        torch.tensor([0.0]),
        torch.tensor([1.0]),
        0.5,
        1.0,
        truncated_values=truncated_values,
    )
    assert adv.item() == pytest.approx(1.0 + 0.5 * 2.0)


def test_ppo_losses_by_hand() -> None:
    old = torch.log(torch.tensor([0.5, 0.5]))
    new = torch.log(torch.tensor([0.8, 0.2]))  # ratios 1.6 and 0.4
    adv = torch.tensor([1.0, -1.0])
    losses = ppo_losses(
        new,
        old,
        adv,
        torch.tensor([1.0, 0.0]),
        torch.tensor([0.0, 0.0]),
        torch.tensor([2.0, 0.0]),
        torch.tensor([0.5, 0.7]),
        clip_coef=0.2,
        value_clip_coef=0.5,
        value_coef=0.5,
        entropy_coef=0.1,
        normalize_advantages=False,
    )
    # policy: max(-A r, -A clip(r)) -> sample 0: max(-1.6, -1.2) = -1.2; sample 1: max(0.4, 0.8) = 0.8
    assert losses.policy_loss.item() == pytest.approx((-1.2 + 0.8) / 2)
    # value: sample 0 unclipped (1-2)^2 = 1, clipped v = 0 + clamp(1, -.5, .5) = .5 -> (.5-2)^2 = 2.25 -> 2.25
    assert losses.value_loss.item() == pytest.approx(0.5 * (2.25 + 0.0) / 2)
    assert losses.entropy.item() == pytest.approx(0.6)
    assert losses.loss.item() == pytest.approx(-0.2 + 0.5 * 0.5625 - 0.1 * 0.6)
    assert losses.clip_fraction.item() == pytest.approx(1.0)
    expected_kl = ((1.6 - 1) - math.log(1.6) + (0.4 - 1) - math.log(0.4)) / 2
    assert losses.approx_kl.item() == pytest.approx(expected_kl, rel=1e-5)


def test_ppo_value_clipping_can_be_off() -> None:
    z = torch.zeros(1)
    losses = ppo_losses(
        z, z, z, torch.tensor([1.0]), z, torch.tensor([2.0]), z, value_clip_coef=None, normalize_advantages=False
    )
    assert losses.value_loss.item() == pytest.approx(0.5)


def test_explained_variance() -> None:
    target = torch.tensor([1.0, 2.0, 3.0])
    assert explained_variance(target, target) == pytest.approx(1.0)
    assert explained_variance(torch.zeros(3), target) == pytest.approx(
        1 - torch.var(target).item() / torch.var(target).item()
    )
    assert math.isnan(explained_variance(target, torch.ones(3)))


def test_schedules() -> None:
    assert cosine_schedule(0, 100, 1.0, 0.1) == pytest.approx(1.0)
    assert cosine_schedule(50, 100, 1.0, 0.1) == pytest.approx(0.55)
    assert cosine_schedule(100, 100, 1.0, 0.1) == pytest.approx(0.1)
    assert cosine_schedule(0, 100, 1.0, 0.1, warmup=10) == pytest.approx(0.1)
    assert linear_schedule(25, 100, 1.0, 0.0) == pytest.approx(0.75)
    assert linear_schedule(500, 100, 1.0, 0.0) == 0.0


def test_adaptive_kl_coef_by_hand() -> None:
    # KL twice the target: the error is clipped to 0.2 and applied over batch / horizon of the horizon.
    assert adaptive_kl_coef(0.1, kl=0.2, target=0.1, batch=32, horizon=100) == pytest.approx(0.1 * (1 + 0.2 * 0.32))
    assert adaptive_kl_coef(0.1, kl=0.09, target=0.1, batch=100, horizon=100) == pytest.approx(0.1 * 0.9)


def test_adaptive_entropy_coef_rises_below_the_target_and_returns_to_the_floor() -> None:
    step = dict(target=0.5, rate=1.0, low=0.01, high=0.5)
    # Entropy 0.25 is half the target: the relative error 0.5 raises the coefficient by e ** 0.5.
    assert adaptive_entropy_coef(0.02, entropy=0.25, **step) == pytest.approx(0.02 * math.exp(0.5))
    # A collapsed policy (entropy 0) raises it by at most e ** rate per update, and never past high.
    assert adaptive_entropy_coef(0.02, entropy=0.0, **step) == pytest.approx(0.02 * math.e)
    assert adaptive_entropy_coef(0.4, entropy=0.0, **step) == 0.5
    # Above the target it falls, by at most e ** -rate, and never below low (the configured bonus).
    assert adaptive_entropy_coef(0.1, entropy=0.75, **step) == pytest.approx(0.1 * math.exp(-0.5))
    assert adaptive_entropy_coef(0.1, entropy=5.0, **step) == pytest.approx(0.1 / math.e)
    assert adaptive_entropy_coef(0.012, entropy=1.0, **step) == 0.01
    assert adaptive_entropy_coef(0.03, entropy=0.5, **step) == pytest.approx(0.03)
