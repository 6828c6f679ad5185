"""The improvement-target policy loss (``policy_loss=target``) against hand computations."""

from __future__ import annotations

import math

import pytest
import torch

from llm_gym.rl import improved_distribution, improvement_target, target_policy_loss


def test_the_target_reweights_the_taken_action_by_its_exponentiated_advantage() -> None:
    old = torch.tensor([[0.03, 0.97, 0.0], [0.5, 0.3, 0.2]], dtype=torch.float64)
    choice = torch.tensor([0, 2])
    advantages = torch.tensor([1.0, -2.0], dtype=torch.float64)
    target = improvement_target(old, choice, advantages, temperature=0.25)
    # Row 0: 0.03 e^4 and 0.97, renormalised; the padded third choice stays 0.
    up = 0.03 * math.exp(4.0)
    assert target[0].tolist() == pytest.approx([up / (up + 0.97), 0.97 / (up + 0.97), 0.0])
    # Row 1: the taken choice 2 down by e^-8.
    down = 0.2 * math.exp(-8.0)
    assert target[1].tolist() == pytest.approx([0.5 / (0.8 + down), 0.3 / (0.8 + down), down / (0.8 + down)])


def test_the_losss_gradient_on_the_logits_is_new_minus_target() -> None:
    logits = torch.tensor([[0.2, -0.1], [1.0, 0.5]], dtype=torch.float64, requires_grad=True)
    logp = torch.log_softmax(logits, dim=1)
    old = logp.detach().exp()
    choice = torch.tensor([1, 0])
    advantages = torch.tensor([0.5, -1.0], dtype=torch.float64)
    loss = target_policy_loss(logp, old, choice, advantages, temperature=1.0)
    loss.backward()
    expected = (old - improvement_target(old, choice, advantages, 1.0)) / 2  # the mean over 2 decisions
    assert logits.grad.tolist() == [pytest.approx(row) for row in expected.tolist()]


def test_a_rare_action_that_did_worse_is_pushed_down_by_at_most_its_probability() -> None:
    # The clipped ratio loss pushes a sampled action's logit by |advantage| (1 - p); the target loss by at most p.
    logits = torch.tensor([[math.log(0.03), math.log(0.97)]], dtype=torch.float64, requires_grad=True)
    logp = torch.log_softmax(logits, dim=1)
    loss = target_policy_loss(
        logp, logp.detach().exp(), torch.tensor([0]), torch.tensor([-3.0], dtype=torch.float64), 1.0
    )
    loss.backward()
    assert 0 < logits.grad[0, 0] <= 0.03
    # And a rare action that did better is pulled up by far more than its probability.
    logits.grad = None
    logp = torch.log_softmax(logits, dim=1)
    loss = target_policy_loss(
        logp, logp.detach().exp(), torch.tensor([0]), torch.tensor([3.0], dtype=torch.float64), 1.0
    )
    loss.backward()
    assert -logits.grad[0, 0] > 0.3


def test_the_improved_distribution_with_every_advantage_known_is_old_times_exp_advantage_renormalised() -> None:

    old = torch.tensor([0.5, 0.25, 0.25, 0.0])
    advantages = torch.tensor([1.0, 0.0, -1.0, 5.0])
    weights = torch.tensor([0.5 * math.e, 0.25, 0.25 / math.e, 0.0])
    expected = weights / weights.sum()
    assert torch.allclose(improved_distribution(old, advantages, 1.0), expected.float(), atol=1e-7)
    # A lower temperature sharpens towards the best action; an action the policy never plays stays at 0.
    sharp = improved_distribution(old, advantages, 0.1)
    assert sharp[0] > 0.99 and sharp[3] == 0.0
